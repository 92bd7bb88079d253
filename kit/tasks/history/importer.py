"""``kit tasks import-git``: one commit or a range of a local repository becomes a validated task.

1. **Plan** (:mod:`.plan`): base = the commit's parent (or BASE of the range), head = the commit (or
   HEAD); the change's files split into the test side and the reference solution; the test
   functions the change added or changed are the candidates; those it changed or removed are left
   out of the own tests (``own_tests_deselect``).
2. **Trees** (:mod:`.gitread`): base and head written out as plain files; ``repo/`` is the base tree
   (no ``.git``, no history: a run's clone is the kit's own one-commit base).
3. **Probes** (:mod:`.probe`): each changed test file checked on its own through the kit's scorer and
   sandbox, at the base and with the solution; the fail -> pass tests are the hidden tests
   (:mod:`kit.tasks.transitions`), each with a severity from how it fails at the base
   (:mod:`.severity`).
4. **Assembled check**: the task as written, scored with its own tests on both sides; own tests that
   fail at the base or with the reference solution are left out too (each named, with why).
5. **Validation**: ``kit tasks validate``'s check; a task that does not validate is refused (nothing
   is written) with the reasons. The folder is swapped in whole.
"""

from __future__ import annotations

import difflib
import math
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import TaskError
from kit.paths import TASKS_DIR
from kit.tasks.exercism.marks import load_severity_map
from kit.tasks.history import layout, severity
from kit.tasks.history.gitread import Repo
from kit.tasks.history.plan import Plan, make_plan, resolve_change
from kit.tasks.history.probe import Prober, Verdict, acceptance_module
from kit.tasks.history.prompt import build_prompt, changed_names, interface
from kit.tasks.history.writer import write_acceptance, write_solution, write_spec
from kit.tasks.scoring.scorer import evaluate
from kit.tasks.task import TaskFile, apply_solution, load_task
from kit.tasks.transitions import Outcome, is_hidden_test, is_regression, outcome_of, transition
from kit.tasks.validate import validate_task
from kit.tasks.workspace import COPY_IGNORE, create_workspace

Progress = Callable[[str], None]


@dataclass
class Options:
    repo: Path
    commit: str | None = None
    range: str | None = None
    task_id: str | None = None
    prompt_file: Path | None = None
    out: Path = TASKS_DIR
    tests: list[str] | None = None
    severities: Path | None = None
    timeout_s: float = 120.0
    sandbox: str | None = None
    force: bool = False
    repo_url: str | None = None
    command: str = ""


@dataclass
class ImportResult:
    task_id: str
    task_dir: Path | None = None  # None: refused
    base: str = ""
    head: str = ""
    commits: int = 0
    solution_files: int = 0
    hidden: dict[str, str] = field(default_factory=dict)  # requirement key -> severity
    kinds: dict[str, str] = field(default_factory=dict)  # requirement key -> how it fails at the base
    dropped: dict[str, str] = field(default_factory=dict)  # candidate key -> why it is no hidden test
    deselected: dict[str, str] = field(default_factory=dict)  # own test node id -> why it is left out
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # why it was refused
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.task_dir is not None and not self.problems


def default_id(repo: Repo, opts: Options, base: str, head: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", repo.path.name.removesuffix(".git")).strip("-.") or "repo"
    if opts.commit:
        return f"{name}-{head[:10]}"
    a, b = (re.sub(r"[^A-Za-z0-9._-]+", "-", p).strip("-.") for p in (opts.range or "").split("..", 1))
    return re.sub(r"\.\.+", ".", f"{name}-{a}-{b}")


def import_git(opts: Options, progress: Progress = lambda _line: None) -> ImportResult:
    """Import the change ``opts`` names as a task under ``opts.out`` (see the module docstring).
    Bad input raises TaskError / ConfigError; a candidate that does not validate comes back with
    ``problems`` and no folder."""
    started = time.monotonic()
    repo = Repo(opts.repo)
    base, head, commits = resolve_change(repo, opts.commit, opts.range)
    job = _Import(opts, repo, progress)
    task_id = opts.task_id or default_id(repo, opts, base, head)
    TaskFile.model_validate({"id": task_id, "title": "-", "prompt": "-"})  # a bad id fails here
    out = Path(opts.out)
    if (out / task_id).exists() and not opts.force:
        raise TaskError(
            f"{out / task_id} already exists", "pass --force to replace it, or --id to name another"
        )
    progress(f"{repo.path}: {base[:12]}..{head[:12]}, {len(commits)} commit(s)")
    result = ImportResult(task_id, base=base, head=head, commits=len(commits))
    out.mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix=f".{task_id}-", dir=out))
    try:
        with tempfile.TemporaryDirectory(prefix="orchbench-import-") as tmp:
            folder = holder / task_id
            job.build(Path(tmp), folder, result, (base, head, commits))
            if not result.problems:
                if (out / task_id).exists():
                    shutil.rmtree(out / task_id)
                folder.rename(out / task_id)
                result.task_dir = out / task_id
    finally:
        shutil.rmtree(holder, ignore_errors=True)
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _read_prompt(path: Path | None) -> str | None:
    if path is None:
        return None
    if not Path(path).is_file():
        raise TaskError(f"prompt file not found: {path}", "give a text file holding the task's prompt")
    text = Path(path).read_text(encoding="utf-8").strip()
    if not text:
        raise TaskError(f"prompt file {path} is empty")
    return text + "\n"


class _Import:
    """One import's steps, sharing the options, the repository and the scratch folders."""

    def __init__(self, opts: Options, repo: Repo, progress: Progress) -> None:
        self.opts, self.repo, self.progress = opts, repo, progress
        self.smap = load_severity_map(opts.severities)
        self.prompt = _read_prompt(opts.prompt_file)

    def build(self, tmp: Path, folder: Path, result: ImportResult, change: tuple) -> None:
        base, head, commits = change
        opts, repo = self.opts, self.repo
        self.trees = trees = {"base": tmp / "base", "head": tmp / "head"}
        result.notes += repo.export(base, trees["base"]).notes[:10]
        repo.export(head, trees["head"])
        self.plan = plan = make_plan(repo, base, head, commits, trees, opts.tests)
        result.notes += plan.notes
        result.solution_files = len(plan.solution)
        result.deselected = dict(plan.deselect)
        self.packages = layout.packages(trees["base"], opts.tests)
        _refuse_shadowed(self.packages)
        self.support = layout.support_files(trees["head"], list(plan.candidates), opts.tests)
        self.spec = _spec(opts, repo, plan, result.task_id, self.packages, self.prompt or "-")
        shutil.copytree(trees["base"], folder / "repo")
        write_solution(folder, trees["head"], plan.solution)
        write_acceptance(folder, trees["head"], self.support, {})
        write_spec(folder, self.spec)
        self.ws = create_workspace(load_task(folder), tmp / "ws")
        self.scored = {"base": self.ws.root, "change": tmp / "change"}
        shutil.copytree(self.ws.root, self.scored["change"], ignore=COPY_IGNORE)
        apply_solution(load_task(folder), self.scored["change"])
        self.probe_all(tmp / "probes", result)
        if self.prompt is None:
            self.spec["prompt"] = _prompt(plan, trees, result)
        self.assemble(folder, result)
        self.progress(f"  checking the assembled task: {len(result.hidden)} hidden tests, with the own tests")
        self.own_tests(folder, result)
        self.progress("  validating the task (kit tasks validate)")
        result.problems = validate_task(load_task(folder), opts.sandbox).problems

    def probe_all(self, scratch: Path, result: ImportResult) -> None:
        """Every candidate through the kit's scorer, a test file at a time; the fail -> pass ones
        become hidden tests with a severity, the others are dropped with why."""
        head = self.trees["head"]
        support = {rel: head / rel for rel in self.support}
        prober = Prober(
            self.spec,
            support,
            self.packages,
            self.ws,
            self.scored,
            scratch,
            self.opts.timeout_s,
            self.opts.sandbox,
            self.progress,
        )
        verdicts: dict[str, Verdict] = {}
        for module, keys in self.plan.candidates.items():
            self.progress(
                f"  checking {module}: {len(keys)} new or changed tests, at the base and with the change"
            )
            verdicts.update(prober.check(module, (head / module).read_text(encoding="utf-8"), keys))
        for key, v in verdicts.items():
            if not is_hidden_test(v.transition):
                result.dropped[key] = v.reason()
                continue
            kind = severity.failure_kind(v.base.message, v.base.timed_out)
            result.kinds[key] = kind
            result.hidden[key] = severity.severity(self.smap, result.task_id, key, kind, self.plan.nodes[key])
        if not result.hidden:
            raise TaskError(
                _no_hidden(verdicts), "pick a commit or range whose tests fail before it and pass after it"
            )

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
        self.spec["long"] = _is_long(self.plan, self.trees, len(result.hidden))
        write_spec(folder, self.spec)

    def own_tests(self, folder: Path, result: ImportResult) -> None:
        """Score the assembled task on both sides with its own tests: own tests that fail at the base
        or with the reference solution are left out, and so are hidden tests that are no longer
        fail -> pass here (each with why); the modules are written again when one was left out."""
        sides, slowest = self.assembled(folder, result)
        at_base, changed = sides["base"], sides["change"]
        if not at_base.own.complete:
            trouble = (at_base.own.errors + at_base.own.tampered)[:2]
            result.notes.append(f"the own tests did not run cleanly at the base: {trouble}")
        for nodeid, (ok, message) in sorted(at_base.own.outcomes.items()):
            before = outcome_of(ok, message)
            ok2, message2 = changed.own.outcomes.get(nodeid, (None, "not run"))
            if before is Outcome.FAILED:
                result.deselected[nodeid] = f"fails at the base: {message[:120]}"
            elif is_regression(transition(before, outcome_of(ok2, message2))):
                result.deselected[nodeid] = f"fails with the reference solution: {message2[:120]}"
        for key in list(result.hidden):
            ok_base, _ = at_base.results.get(key, (False, ""))
            ok_change, message = changed.results.get(key, (False, "not run"))
            if ok_base or not ok_change:
                why = "passes at the base" if ok_base else message[:120]
                self._drop(result, key, f"in the assembled task: {why}")
        self.spec["limits"] = {"scoring_timeout_s": float(max(self.opts.timeout_s, math.ceil(slowest * 3)))}
        self.assemble(folder, result)

    def assembled(self, folder: Path, result: ImportResult) -> tuple[dict, float]:
        """The assembled task scored on both sides, and the slowest scoring that ended in time. When
        the base's session hangs -- today's scoring has no per-test time limit, so a hidden test that
        runs away at the base stops the whole session and would make every unsolved run tampered --
        the tests that ran past the limit in their probes are left out, and it is scored again."""
        for _ in range(2):
            sides, slowest = {}, 0.0
            for side in ("base", "change"):
                t = time.monotonic()
                ev = evaluate(
                    load_task(folder),
                    self.scored[side],
                    self.ws,
                    self.opts.timeout_s,
                    sandbox=self.opts.sandbox,
                )
                sides[side] = ev
                if not ev.acceptance.timed_out:
                    slowest = max(slowest, time.monotonic() - t)
            hangs = [k for k, kind in result.kinds.items() if kind == "hang"]
            if not (sides["base"].acceptance.timed_out and hangs):
                break
            for key in hangs:
                self._drop(
                    result,
                    key,
                    "runs past the time limit at the base, and the kit's scoring then stops the whole "
                    "session (no per-test time limit): every unsolved run would count as tampered",
                )
            self.assemble(folder, result)
        return sides, slowest

    def _drop(self, result: ImportResult, key: str, why: str) -> None:
        result.dropped[key] = why
        result.hidden.pop(key, None)
        result.kinds.pop(key, None)
        if not result.hidden:
            raise TaskError(
                "no hidden test is left in the assembled task:\n    "
                + "\n    ".join(f"{k}: {v}" for k, v in result.dropped.items())
            )


def _refuse_shadowed(packages: list[str]) -> None:
    found = layout.shadowed(packages)
    if found:
        where = "; ".join(f"{n} at {p}" for n, p in found.items())
        raise TaskError(
            f"the project's package is importable from the kit's own environment ({where}): the "
            "installed copy would shadow the task's code and hand the agent another release",
            "import the task with a kit whose environment does not hold that package (pip uninstall it there)",
        )


def _spec(opts: Options, repo: Repo, plan: Plan, task_id: str, packages: list[str], prompt: str) -> dict:
    base_commit, head_commit = repo.commit(plan.base), repo.commit(plan.head)
    title = (
        f"{repo.path.name}: {plan.commits[0].subject}"
        if opts.commit
        else f"{repo.path.name}: {opts.range} ({len(plan.commits)} commits)"
    )
    return {
        "id": task_id,
        "title": title[:120],
        "prompt": prompt,
        "language": "python",
        "test_command": "python -m pytest -q",
        "long": False,
        "limits": {"scoring_timeout_s": float(opts.timeout_s)},
        "tags": ["git-history", "commit" if opts.commit else "range"],
        "acceptance_layout": "repo",
        "packages": packages,
        "own_tests_deselect": sorted(plan.deselect),
        "source": {
            "kind": "git",
            "repo_url": opts.repo_url or repo.remote_url(),
            "base": plan.base,
            "head": plan.head,
            "commits": [c.sha for c in plan.commits],
            "base_date": base_commit.date,
            "head_date": head_commit.date,
            "licence": repo.licence(plan.base),
            "command": opts.command,
        },
    }


def _no_hidden(verdicts: dict[str, Verdict]) -> str:
    lines = [f"no test goes fail -> pass ({len(verdicts)} new or changed tests checked):"]
    lines += [f"    {k}: {v.reason()}" for k, v in list(verdicts.items())[:20]]
    if len(verdicts) > 20:
        lines.append(f"    ... and {len(verdicts) - 20} more")
    return "\n".join(lines)


def _prompt(plan: Plan, trees: dict[str, Path], result: ImportResult) -> str:
    """The commit message(s) and the interface the hidden tests call (see :mod:`.prompt`)."""
    sources = {}
    for change in plan.solution:
        if change.path.endswith(".py") and change.status != "D":
            sources[change.path] = (
                _text(trees["base"] / change.path),
                _text(trees["head"] / change.path) or "",
            )
    tests = [plan.nodes[k] for k in result.hidden]
    return build_prompt(plan.commits, interface(changed_names(sources), tests))


def _text(path: Path) -> str | None:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _is_long(plan: Plan, trees: dict[str, Path], hidden: int) -> bool:
    """At least 2 source files, 150 changed source lines and 8 hidden tests (source: the solution's
    Python files; lines: added + removed)."""
    py = [c for c in plan.solution if c.path.endswith(".py")]
    lines = 0
    for c in py:
        old = (_text(trees["base"] / c.path) or "").splitlines()
        new = (_text(trees["head"] / c.path) or "").splitlines() if c.status != "D" else []
        diff = difflib.unified_diff(old, new, lineterm="", n=0)
        lines += sum(1 for ln in diff if ln[:1] in "+-" and not ln.startswith(("+++", "---")))
    return len(py) >= 2 and lines >= 150 and hidden >= 8
