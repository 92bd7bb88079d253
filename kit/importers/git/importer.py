"""``kit tasks import-git``: one commit or a range of a local repository becomes a validated task.

1. **Plan** (:mod:`.plan`): base = the commit's parent (or BASE of the range), head = the commit (or
   HEAD); the change's files split into the test side and the reference solution; the test
   functions the change added or changed are the candidates; those it changed or removed are left
   out of the own tests (``own_tests_deselect``).
2. **Trees** (:mod:`.gitread`): base and head written out as plain files; ``repo/`` is the base tree
   (no ``.git``, no history: a run's clone is the kit's own one-commit base).
3. **Probes** (:mod:`.probe`): each changed test file checked on its own through the kit's scorer and
   sandbox, at the base and with the solution, under the time limit (``--timeout``, default 120 s)
   and the sandbox's memory limit (4 GB a process); when a file's session runs away, each of its
   tests alone. The fail -> pass tests are the hidden tests (:mod:`kit.tasks.transitions`), each
   with a severity from how it fails at the base (:mod:`.severity`). A module-level ``from
   <package> import name`` in a hidden module is written so that a name the base lacks fails only
   the tests that use it (:func:`~kit.importers.git.testfiles.tolerant_imports`). A session that
   pytest stops on a usage error before any test (the configuration's ``addopts`` naming a
   plugin's option, ``--cov``: the kit runs pytest with plugin autoload off) stops the import
   with pytest's own words (:func:`.probe.usage_error`).
4. **Validation** (``kit tasks validate``'s own check, :mod:`.settle`): the assembled task scored with
   its own tests at the base and with the solution; own tests that fail at the base or with the
   reference solution, and hidden tests that are not fail -> pass here, are left out (each named,
   with why) and it is validated again. A hidden test that runs past the time limit at the base is
   left out too when it hangs the base's whole session: the kit's scoring has no per-test time
   limit, so it would make every unsolved run ``tampered``. A task that still does not validate is
   refused with the reasons (nothing is written); a valid one is swapped into place whole.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from kit.errors import TaskError
from kit.importers.exercism.marks import load_severity_map
from kit.importers.git import flaky, layout, settle, severity
from kit.importers.git.gitread import Repo, writing
from kit.importers.git.plan import make_plan, resolve_change
from kit.importers.git.probe import Prober, Verdict, acceptance_module
from kit.importers.git.result import ImportResult, Options, drop, own_test_command
from kit.importers.git.spec import default_id, generated_prompt, read_prompt, task_spec
from kit.importers.git.writer import write_acceptance, write_solution, write_spec
from kit.importers.size import measure
from kit.importers.spec_audit import audit_task, gap_counts
from kit.importers.validate import remember_checked, validate_task
from kit.tasks.task import Task, TaskFile, apply_solution, load_task
from kit.tasks.transitions import Outcome, is_hidden_test
from kit.tasks.workspace import COPY_IGNORE, create_workspace

__all__ = ["ImportResult", "Options", "import_git"]

Progress = Callable[[str], None]


def import_git(opts: Options, progress: Progress = lambda _line: None) -> ImportResult:
    """Import the change ``opts`` names as a task under ``opts.out`` (see the module docstring).
    Bad input raises TaskError / ConfigError; a candidate that does not validate comes back with
    ``problems`` and no folder."""
    started = time.monotonic()
    repo = Repo(opts.repo)
    base, head, commits = resolve_change(repo, opts.commit, opts.range)
    for commit in (base, head):  # a tree bomb is refused by its file count before git walks it
        repo.count_files(commit)
    job = _Import(opts, repo, progress)
    task_id = opts.task_id or default_id(repo, opts, base, head)
    try:
        TaskFile.model_validate({"id": task_id, "title": "-", "prompt": "-"})
    except ValidationError as e:
        raise TaskError(
            f"--id {task_id!r}: {e.errors()[0]['msg']}", "give an id like mylib-fix-parser"
        ) from None
    out = Path(opts.out)
    if (out / task_id).exists() and not opts.force:
        raise TaskError(
            f"{out / task_id} already exists", "pass --force to replace it, or --id to name another"
        )
    subject = f": {commits[0].subject[:100]}" if len(commits) == 1 else ""
    progress(f"{repo.path}: {base[:12]}..{head[:12]}, {len(commits)} commit(s){subject}")
    result = ImportResult(task_id, base=base, head=head, commits=len(commits))
    out.mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix=f".{task_id}-", dir=out))
    try:
        with tempfile.TemporaryDirectory(prefix="orchbench-import-") as tmp:
            folder = holder / task_id
            with writing(f"{out} and the importer's scratch folder {tmp}"):
                job.build(Path(tmp), folder, result, (base, head, commits))
            if not result.problems:
                if (out / task_id).exists():
                    shutil.rmtree(out / task_id)
                folder.rename(out / task_id)
                result.task_dir = out / task_id
                remember_checked(load_task(out / task_id))  # validated as it is now (its final task.yaml)
    finally:
        shutil.rmtree(holder, ignore_errors=True)
    result.seconds = round(time.monotonic() - started, 1)
    return result


class _Import:
    """One import's steps, sharing the options, the repository and the scratch folders."""

    def __init__(self, opts: Options, repo: Repo, progress: Progress) -> None:
        self.opts, self.repo, self.progress = opts, repo, progress
        self.smap = load_severity_map(opts.severities)
        self.prompt = read_prompt(opts.prompt_file)

    def build(self, tmp: Path, folder: Path, result: ImportResult, change: tuple) -> None:
        base, head, commits = change
        self.folder = folder
        opts, repo = self.opts, self.repo
        self.trees = trees = {"base": tmp / "base", "head": tmp / "head"}
        result.notes += repo.export(base, trees["base"]).notes[:10]
        self.head_files = repo.export(head, trees["head"]).paths
        self.plan = plan = make_plan(repo, base, head, commits, trees, opts.tests)
        result.notes += plan.notes
        _exclude(plan.candidates, opts.exclude, result)
        result.deselected = dict(plan.deselect)
        result.ignored = dict(plan.ignore)
        self.packages = layout.packages(trees["base"], opts.tests)
        _refuse_shadowed(self.packages)
        self.support = layout.support_files(trees["head"], list(plan.candidates), opts.tests)
        self.spec = task_spec(opts, repo, plan, result.task_id, self.packages, self.prompt or "-")
        shutil.copytree(trees["base"], folder / "repo")
        left_out: list[str] = []
        write_solution(folder, trees["head"], plan.solution, left_out)
        result.solution_files = len(plan.solution) - len(left_out)  # (what solution/ holds or deletes)
        if left_out:
            shown = ", ".join(left_out[:5]) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
            result.notes.append(
                f"{len(left_out)} changed path(s) of the solution are no files of the change's tree (a symlink, a submodule, a .git entry): left out ({shown})"
            )
        write_acceptance(folder, trees["head"], self.support, {})
        write_spec(folder, self.spec)
        self.ws = create_workspace(load_task(folder), tmp / "ws")
        self.scored = {"base": self.ws.root, "change": tmp / "change"}
        shutil.copytree(self.ws.root, self.scored["change"], ignore=COPY_IGNORE)
        apply_solution(load_task(folder), self.scored["change"])
        self.probe_all(tmp / "probes", result)
        if self.prompt is None:
            self.spec["prompt"] = generated_prompt(plan, trees, result)
        self.validate(folder, result)
        if not result.problems:
            self.settle_flaky(folder, result)
        if not result.problems:
            result.gaps = audit_task(load_task(folder))
            self.spec["spec_gaps"] = gap_counts(result.gaps)
            write_spec(folder, self.spec)

    def settle_flaky(self, folder: Path, result: ImportResult) -> None:
        """Score the reference solution twice more (:mod:`.flaky`); tests whose outcome differs are
        left out with why, and the task is validated again."""
        self.progress(f"  scoring the reference solution {flaky.RUNS - 1} more times (flaky tests)")
        found = flaky.flaky_tests(load_task(folder), self.evaluations["solution"], self.opts.sandbox)
        for key, why in found.items():
            if key in result.hidden:
                drop(result, key, why)
            else:
                result.deselected[key] = why
        if found:
            self.validate(folder, result)

    def probe_all(self, scratch: Path, result: ImportResult) -> None:
        """Every candidate through the kit's scorer, a test file at a time; the fail -> pass ones
        become hidden tests with a severity, the others are dropped with why."""
        head = self.trees["head"]
        candidates = layout.candidate_data(head, list(self.plan.candidates), self.opts.tests)
        support = {rel: head / rel for rel in sorted({*self.support, *candidates})}
        prober = Prober(
            self.spec,
            self.folder / "repo",
            support,
            self.packages,
            self.ws,
            self.scored,
            scratch,
            self.opts.timeout_s,
            self.opts.sandbox,
            self.progress,
            self.opts.probe_budget_s,
        )
        verdicts: dict[str, Verdict] = {}
        for module, keys in self.plan.candidates.items():
            self.progress(
                f"  checking {module}: {len(keys)} new or changed tests, at the base and with the change"
            )
            verdicts.update(prober.check(module, (head / module).read_text(encoding="utf-8"), keys))
        found = set(layout.read_data(head, prober.reads, self.head_files)) - set(self.support)
        if found:
            result.notes.append(f"laid the data files the hidden tests read: {', '.join(sorted(found)[:10])}")
            self.support = sorted({*self.support, *found})
        for key, v in verdicts.items():
            if not is_hidden_test(v.transition):
                result.dropped[key] = v.reason()
                continue
            kind = severity.failure_kind(v.base.message, v.base.timed_out)
            result.kinds[key] = kind
            result.hidden[key] = severity.severity(self.smap, result.task_id, key, kind, self.plan.nodes[key])
        if not result.hidden:
            raise TaskError(_no_hidden(verdicts), _no_hidden_hint(verdicts, self.packages))

    def assemble(self, folder: Path, result: ImportResult) -> None:
        """Write the hidden modules (cut to the hidden tests, marked) and task.yaml."""
        modules = {}
        for module in self.plan.candidates:
            mine = {k: s for k, s in result.hidden.items() if k.startswith(f"{module}::")}
            if mine:
                source = (self.trees["head"] / module).read_text(encoding="utf-8")
                modules[module] = acceptance_module(source, module, mine, set(self.packages))
        write_acceptance(folder, self.trees["head"], self.support, modules)
        self.spec["own_tests_deselect"] = sorted(result.deselected)
        self.spec["test_command"] = own_test_command(result.ignored)
        self.spec["exclude_tests"] = [{"test": k, "reason": r} for k, r in sorted(self.opts.exclude.items())]
        result.size = measure(Task(**self.spec, path=folder))
        self.spec["long"] = result.size.long
        write_spec(folder, self.spec)

    def validate(self, folder: Path, result: ImportResult) -> None:
        """``kit tasks validate`` on the assembled task; what it shows is used, and validated again
        (up to three rounds): own tests that fail at the base or with the reference solution are
        left out, and so are hidden tests that are not fail -> pass in the assembled task, each
        with why. When a session runs past the time limit the limit is doubled once (a run
        away at the base is handled apart: :meth:`runaways`)."""
        limit = float(self.opts.timeout_s)
        for attempt in range(3):
            self.spec["limits"] = {"scoring_timeout_s": limit}
            self.assemble(folder, result)
            self.progress(
                f"  validating the task (kit tasks validate): {len(result.hidden)} hidden tests, with the own tests"
            )
            self.evaluations = evs = {}
            report = validate_task(load_task(folder), self.opts.sandbox, evs)
            result.problems = report.problems
            if report.ok or "start" not in evs or attempt == 2:
                break
            start, end = evs["start"], evs.get("solution")
            changed = settle.runaways(start, result)
            timed_out = any(
                e is not None and (e.own.timed_out or e.acceptance.timed_out) for e in (start, end)
            )
            if not changed and timed_out and limit == self.opts.timeout_s:
                limit, changed = limit * 2, True
            if not changed:
                changed = settle.uncollected(start, end, result)
            if end is not None and not changed:
                changed = settle.own_failures(start, end, result) | settle.not_fail_to_pass(
                    start, end, result
                )

            if not changed:
                break
        slowest = max(report.durations.get("start_s", 0.0), report.durations.get("solution_s", 0.0))
        self.spec["limits"] = {"scoring_timeout_s": float(max(limit, math.ceil(slowest * 3)))}
        self.assemble(folder, result)


def _exclude(candidates: dict[str, list[str]], exclude: dict[str, str], result: ImportResult) -> None:
    """Take the tests ``exclude`` names (``--exclude-test``) out of ``candidates``, saying why; a
    name that is no candidate is refused (a typo would leave the test in)."""
    known = {f"{m}::{k}" for m, keys in candidates.items() for k in keys}
    unknown = sorted(set(exclude) - known)
    if unknown:
        raise TaskError(
            f"--exclude-test {unknown[0]}: the change adds or changes no test of that node id",
            f"give one of: {', '.join(sorted(known)[:10]) or '(none)'}",
        )
    for module in list(candidates):
        candidates[module] = [k for k in candidates[module] if f"{module}::{k}" not in exclude]
        if not candidates[module]:
            del candidates[module]
    for key, why in exclude.items():
        result.dropped[key] = f"excluded: {why}"


def _refuse_shadowed(packages: list[str]) -> None:
    found = layout.shadowed(packages)
    if found:
        where = "; ".join(f"{n} at {p}" for n, p in found.items())
        raise TaskError(
            f"the project's package is importable from the kit's own environment ({where}): the "
            "installed copy would shadow the task's code and hand the agent another release",
            "import the task with a kit whose environment does not hold that package (pip uninstall it there)",
        )


def _no_hidden(verdicts: dict[str, Verdict]) -> str:
    lines = [f"no test goes fail -> pass ({len(verdicts)} new or changed tests checked):"]
    lines += [f"    {k}: {v.reason()}" for k, v in list(verdicts.items())[:20]]
    if len(verdicts) > 20:
        lines.append(f"    ... and {len(verdicts) - 20} more")
    return "\n".join(lines)


_NO_MODULE = re.compile(r"No module named '([A-Za-z_][\w.]*)'")


def _no_hidden_hint(verdicts: dict[str, Verdict], packages: list[str]) -> str:
    """What to do when no test goes fail -> pass: when the tests fail with the change because they
    import a module that is neither the repository's nor in the kit's environment (a test dependency:
    freezegun, pytest-mock's ``pytest_mock``), that it is missing; else pick another change."""
    missing = sorted(
        {
            name.split(".")[0]
            for v in verdicts.values()
            if v.change.outcome is not Outcome.PASSED
            for name in _NO_MODULE.findall(v.change.message)
        }
        - set(packages)
    )
    if missing:
        return (
            f"the tests import {', '.join(missing)}, which the kit's environment lacks: scoring runs the kit's "
            "own interpreter (with podman or docker, the image's), so install the project's test "
            "dependencies there (with the default sandbox: .venv/bin/pip install ...) and import again"
        )
    return "pick a commit or range whose tests fail before it and pass after it"
