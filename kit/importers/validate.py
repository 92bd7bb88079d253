"""Validating a task's contract on a fresh workspace: its own tests pass at the start, every acceptance
test fails at the start (unless marked ``@pytest.mark.baseline_pass``), and with the reference solution
applied every acceptance and own test passes."""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from pydantic import BaseModel, Field

from kit import pyast
from kit.errors import KitError, TaskError
from kit.paths import is_ignored
from kit.records.schema import SEVERITIES
from kit.scoring.inject import inject_folder
from kit.scoring.scorer import evaluate
from kit.tasks.requirements import read_requirements, test_files
from kit.tasks.snapshot import TOP_LEVEL_SKIP
from kit.tasks.task import DELETED_FILE, TASK_FILE, Task, apply_solution, deleted_lines
from kit.tasks.workspace import COPY_IGNORE, create_workspace
from kit.untrusted.confine import confined, link_problem, special_file
from kit.untrusted.terminal import visible

#: Why a pytest usage error stops every session of a task, and what it means for the user.
USAGE_HINT = (
    "the pytest configuration (its addopts) or the test command asks for an option this pytest does not "
    "know: the kit runs pytest with plugin autoload off (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1), so a "
    "plugin's options (pytest-cov's --cov, ...) stop every session, the agent's own test command's too"
)


class ValidationReport(BaseModel):
    task_id: str
    ok: bool
    problems: list[str] = Field(default_factory=list)
    durations: dict[str, float] = Field(default_factory=dict)


def validate_task(
    task: Task, sandbox: str | None = None, evaluations: dict | None = None
) -> ValidationReport:
    """Check the task contract on a fresh workspace (see the module docstring); ``sandbox`` is the
    scoring sandbox (a spec: ``bwrap``, ``none``, ``podman@IMAGE`` ...; default the platform's). ``evaluations``, when given,
    receives the two scorings (``start``, ``solution``: :class:`~kit.scoring.scorer.Evaluation`)."""
    evaluations = {} if evaluations is None else evaluations
    problems: list[str] = []
    durations: dict[str, float] = {}
    started = time.monotonic()
    problems += task_path_problems(task)  # a path out of the task's folders: nothing is run
    if problems:
        return ValidationReport(task_id=task.id, ok=False, problems=problems, durations=durations)
    with tempfile.TemporaryDirectory(prefix="orchbench-validate-") as tmp:
        try:
            t = time.monotonic()
            ws = create_workspace(task, Path(tmp) / "repo")
            durations["workspace_s"] = time.monotonic() - t

            problems += uncollected_test_files(task) + unknown_exclusions(task)
            t = time.monotonic()
            start = evaluations["start"] = evaluate(task, ws.root, ws, sandbox=sandbox)
            durations["start_s"] = time.monotonic() - t
            problems += _refused(start)
            problems += start.problems
            if start.tampered or start.unscored_reason:
                problems.append(f"scoring the start failed: {start.unscored_reason or start.tampered}")
            if not start.own.complete or start.own_failed:
                problems.append(
                    f"own tests fail at the start: {', '.join(start.own_failed) or _tail(start.own)}"
                )
            if not start.own.outcomes:
                problems.append("own tests: none ran at the start")
            for req in start.requirements:
                if req.skip_mark:
                    problems.append(
                        f"acceptance test {req.key} is marked {req.skip_mark}: a hidden test is credited "
                        "only when it plainly passes"
                    )
                passed, _ = start.results[req.key]
                if passed and not req.baseline_pass:
                    problems.append(
                        f"acceptance test passes at the start: {req.key} "
                        "(mark it @pytest.mark.baseline_pass if that is intended)"
                    )

            if not task.solution_dir.is_dir():
                problems.append("no solution/ folder")
            else:
                t = time.monotonic()
                apply_solution(task, ws.root)
                end = evaluations["solution"] = evaluate(task, ws.root, ws, sandbox=sandbox)
                durations["solution_s"] = time.monotonic() - t
                for req in end.failed_requirements:
                    problems.append(
                        f"with the solution, acceptance test fails: {req.key}: {end.results[req.key][1]}"
                    )
                if end.acceptance.errors:
                    problems.append(
                        f"with the solution, acceptance run errors: {'; '.join(end.acceptance.errors)}"
                    )
                if end.tampered or end.unscored_reason:
                    problems.append(f"scoring the solution failed: {end.unscored_reason or end.tampered}")
                if end.suspicious:  # the audit hook must not see legitimate code as introspection
                    problems.append(f"with the solution, scoring saw introspection: {end.suspicious[:3]}")
                if not end.own.complete or end.own_failed:
                    problems.append(
                        f"with the solution, own tests fail: {', '.join(end.own_failed) or _tail(end.own)}"
                    )
        except KitError as e:
            problems.append(str(e))
    durations["total_s"] = time.monotonic() - started
    durations = {k: round(v, 3) for k, v in durations.items()}
    if not problems:
        remember_checked(task)  # the hidden tests collect with the solution: no check before a run
    return ValidationReport(task_id=task.id, ok=not problems, problems=problems, durations=durations)


def uncollected_test_files(task: Task) -> list[str]:
    """Python files under acceptance/ that define ``test*`` functions but that pytest would never
    collect (their name is not ``test_*.py`` / ``*_test.py``): requirements that silently never run."""
    if task.acceptance_layout == "repo":
        return []  # laid helpers (a test package's __init__.py with mixins) hold test methods legitimately
    collected = set(test_files(task.acceptance_dir))
    problems = []
    for path in sorted(task.acceptance_dir.rglob("*.py")):
        if (
            path in collected
            or path.name == "conftest.py"
            or is_ignored(path.relative_to(task.acceptance_dir))
        ):
            continue
        try:  # (its size first: never read whole past what is parsed)
            if path.stat().st_size > pyast.MAX_SOURCE_BYTES:
                continue
            tree = pyast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue  # not a test file by name; its import errors show when a test file imports it
        if any(isinstance(n, ast.FunctionDef) and n.name.startswith("test") for n in ast.walk(tree)):
            rel = path.relative_to(task.acceptance_dir).as_posix()
            problems.append(
                f"acceptance/{rel} defines tests but pytest will not collect it (name it test_*.py)"
            )
    return problems


def unknown_exclusions(task: Task) -> list[str]:
    """``exclude_tests`` entries that name no test of ``acceptance/`` (a typo would leave the test in).
    An imported task (``repo`` layout) has none to check: import-git left its excluded tests out."""
    if task.acceptance_layout == "repo" or not task.excluded:
        return []
    keys = {r.key for r in read_requirements(task.acceptance_dir)[0]}
    return [
        f"exclude_tests: {key} names no test of acceptance/ (give a node id such as test_x.py::test_y)"
        for key in sorted(task.excluded - keys)
    ]


def usage_error(exit_code: int | None, output: str, reported: bool) -> str:
    """pytest's own words when a session stopped on a usage error -- status 4 before any test was
    reported (unrecognized arguments, a missing plugin, a bad ``-o``) -- else "". Its scratch folder
    is cut from the ``inifile:`` and ``rootdir:`` lines: the configuration is named inside the tree."""
    if exit_code != 4 or reported:
        return ""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    root = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("rootdir:")), "")
    said = []
    for line in lines:
        if line.startswith("rootdir:") or line.startswith("ERROR: usage:"):
            continue
        if root and line.startswith("inifile:"):
            line = "inifile: " + line.split(":", 1)[1].strip().removeprefix(root + "/")
        said.append(line.removeprefix("ERROR: "))
    return "; ".join(said)[:600] or "pytest said nothing"


def _refused(ev) -> list[str]:  # noqa: ANN001 - a kit.scoring.scorer.Evaluation
    """A session of ``ev`` that pytest stopped on a usage error, in pytest's own words: it stops every
    other check too, whose messages (a canary missing, exit code 4) do not say why."""
    out = []
    for label, run in (("the hidden tests", ev.acceptance), ("the own tests", ev.own)):
        said = usage_error(run.exit_code, run.output, bool(run.outcomes))
        if said:
            out.append(f"pytest refused to start {label} (status 4, a usage error): {said} -- {USAGE_HINT}")
    return out


def _tail(run) -> str:  # noqa: ANN001 - a kit.scoring.scorer.PytestRun
    lines = [ln for ln in run.output.strip().splitlines() if ln.strip()]
    return f"exit code {run.exit_code}: {lines[-1] if lines else '(no output)'}"


# --------------------------------------------------------------------------- what a task requires


def requirements_line(task: Task) -> str:
    """``N requirements (a critical, b major, c minor), s sealed`` (+ baseline-pass tests and problems
    reading them): what ``kit tasks list`` and ``validate`` print. Sealed: requirements with at least
    one check whose expected value never enters the scoring session (:mod:`kit.scoring.seal`),
    found by preparing a copy of ``acceptance/`` as scoring does. Nothing is read from a task folder
    whose paths are refused (:func:`task_path_problems`)."""
    if task_path_problems(task):
        return "requirements not read: the task folder's paths are refused"
    reqs, problems = read_requirements(task.acceptance_dir, task.excluded)
    counted = [r for r in reqs if not r.baseline_pass]
    by_sev = {s: sum(r.severity == s for r in counted) for s in SEVERITIES}
    sev = ", ".join(f"{n} {s}" for s, n in by_sev.items() if n) or "none"
    with tempfile.TemporaryDirectory(prefix="orchbench-sealed-") as tmp:
        copy = Path(tmp) / "acceptance"
        shutil.copytree(task.acceptance_dir, copy, ignore=COPY_IGNORE)
        sealed = {site.key for site in inject_folder(copy).sealed.values()}
    line = f"{len(counted)} requirements ({sev}), {len(sealed & {r.key for r in counted})} sealed"
    if len(reqs) > len(counted):
        line += f", {len(reqs) - len(counted)} baseline-pass"
    return line + (f"; {len(problems)} problem(s): {problems[0]}" if problems else "")


# --------------------------------------------------------------------------- before a run


def task_hash(task: Task) -> str:
    """A hash of every file of the task folder (paths and bytes; git and cache litter left out), kept
    per process while no file's size or mtime changes."""
    root = Path(task.path)
    files = sorted(p for p in root.rglob("*") if p.is_file() and not is_ignored(p.relative_to(root)))
    signature = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    with _LOCK:
        if (str(root), signature) in _HASHES:
            return _HASHES[(str(root), signature)]
    h = hashlib.sha256()
    for p in files:  # streamed: a task's tree may hold files of up to 64 MB (never read whole)
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        h.update(b"\0")
    value = h.hexdigest()[:16]
    with _LOCK:
        _HASHES[(str(root), signature)] = value
    return value


_HASHES: dict[tuple[str, tuple], str] = {}
_LOCK = threading.Lock()


def check_cache_dir() -> Path:
    """Where passed collection checks are remembered, by task content: ``$ORCHBENCH_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/orchbench`` (``~/.cache/orchbench``), ``task-checks/``."""
    base = os.environ.get("ORCHBENCH_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "orchbench"
    )
    return Path(base) / "task-checks"


def collection_checked(task: Task) -> bool:
    """Whether the task's content already passed :func:`collection_problems` (or a whole validation:
    :func:`remember_checked`)."""
    return (check_cache_dir() / f"{task_hash(task)}.ok").is_file()


def remember_checked(task: Task) -> None:
    """Remember that the task's content, as it is now, passed the check before a run: its hidden
    tests collect with the reference solution. :func:`validate_task` (``kit tasks validate``,
    ``import-git``, ``build-suite``) proves more than that, so a task it passed is not checked again
    and the dry run does not call it unchecked. No cache folder: nothing remembered."""
    marker = check_cache_dir() / f"{task_hash(task)}.ok"
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(task.id + "\n", encoding="utf-8")
    except OSError:
        pass  # no cache: the check runs again next time


def collection_problems(task: Task, sandbox: str | None = None, static_only: bool = False) -> list[str]:
    """Why the task's hidden tests would not give a score ([] when they do): acceptance files pytest
    would not collect or cannot parse, and -- with the reference solution applied, as ``tasks
    validate`` does -- a collection error or no result from the acceptance session. A pass is
    remembered per task content (:func:`check_cache_dir`), so a task is checked once. ``static_only``:
    the file checks alone (they write nothing; the session builds a clone and remembers a pass).
    A task folder whose paths are refused (:func:`task_path_problems`) fails first."""
    problems = task_path_problems(task)  # (before any file of the task is read or hashed)
    if problems:
        return problems
    marker = check_cache_dir() / f"{task_hash(task)}.ok"
    if marker.is_file():
        return []
    problems = uncollected_test_files(task)
    for path in test_files(task.acceptance_dir):
        try:
            if path.stat().st_size > pyast.MAX_SOURCE_BYTES:
                raise SyntaxError(f"{path.stat().st_size:,} bytes, over {pyast.MAX_SOURCE_BYTES:,}")
            pyast.parse(path.read_bytes())
        except (SyntaxError, ValueError) as e:
            problems.append(
                f"acceptance/{path.relative_to(task.acceptance_dir).as_posix()}: does not parse: {e}"
            )
    if static_only:
        return problems
    if not problems and task.solution_dir.is_dir():
        with tempfile.TemporaryDirectory(prefix="orchbench-collect-") as tmp:
            ws = create_workspace(task, Path(tmp) / "repo")
            apply_solution(task, ws.root)
            end = evaluate(task, ws.root, ws, sandbox=sandbox)
        if end.unscored_reason or end.acceptance.errors:
            problems.append(
                "with the reference solution, the acceptance tests do not collect: "
                + (end.unscored_reason or "; ".join(end.acceptance.errors))[:400]
            )
    if not problems:
        remember_checked(task)
    return problems


def _image_parts(task: Task) -> list[Path]:
    return [task.path / "Containerfile", task.path / "container"]


def task_path_problems(task: Task) -> list[str]:
    """Why the task folder's paths are unsafe ([] when they are not): a name with a control
    character, a link in ``acceptance/`` or ``solution/``, a link in ``repo/`` that leads outside
    it, a special file (a named pipe, socket or device: a run's cached base refuses one too), a
    ``DELETED.txt`` line that is no plain path inside ``repo/``, a path the kit keeps for its own
    state in every clone (``repo/.pdca/status``, the pdca strategy's status folder: left out of every
    snapshot, so it could never be the repository's; the rest of ``.pdca/`` is a folder like any other,
    and the cached base's own marker lives in its ``.git``). ``kit tasks validate`` and
    ``kit tasks audit`` check this first, on any task folder. The task folder's own entries
    (``task.yaml``, ``repo/``, ``acceptance/``, ``solution/``, a ``Containerfile`` and its
    ``container/`` context) are never links, nor is anything in ``container/``: a link there would
    make the folder's content a host folder's (copied into the run's clone, validated, hashed, or
    built into the image every command of a run runs in).
    Hard links are allowed (``build-suite`` links a project's identical files across its tasks): a
    hard link is a file the folder's author could already read and copy, and the kit copies task
    files, never writes through them -- a run's clone, the probes and validation write to copies."""
    problems = [
        f"task {task.id!r}: {part.name} is a symbolic link (to {visible(os.readlink(part))}): a task "
        "folder's own entries must be real files and folders"
        for part in (
            task.path / TASK_FILE,
            task.repo_dir,
            task.acceptance_dir,
            task.solution_dir,
            *_image_parts(task),
        )
        if part.is_symlink()
    ]
    if problems:
        return problems
    for sub in (task.repo_dir, task.acceptance_dir, task.solution_dir, task.path / "container"):
        for dirpath, dirnames, filenames in os.walk(sub):
            for name in [*dirnames, *filenames]:
                path = Path(dirpath, name)
                rel = path.relative_to(sub)
                try:
                    if name.encode("utf-8", "surrogateescape").decode("utf-8", "replace") != name:
                        raise TaskError(
                            f"task {task.id!r}: {sub.name}/ holds a name that is not UTF-8: {name!r}"
                        )
                    confined(sub, rel, f"task {task.id!r}: {sub.name}/ file", leaf_link=True)
                    special_file(sub, rel, f"task {task.id!r}")
                    if path.is_symlink() and sub != task.repo_dir:
                        raise TaskError(f"task {task.id!r}: {sub.name}/{rel.as_posix()} is a symbolic link")
                    if path.is_symlink():  # in repo/: relative, and inside repo/ as written and resolved
                        link_problem(sub, rel, f"task {task.id!r}: repo/{rel.as_posix()}")
                except TaskError as e:
                    problems.append(str(e))
    problems += [  # the kit's own state in every clone (kit.tasks.snapshot.TOP_LEVEL_SKIP)
        f"task {task.id!r}: repo/{name} is a name the kit reserves in clones: rename it"
        for name in TOP_LEVEL_SKIP
        if os.path.lexists(task.repo_dir / name)
    ]
    try:
        for line in deleted_lines(task):
            confined(task.repo_dir, line, f"task {task.id!r}: {DELETED_FILE} line", leaf_link=True)
    except TaskError as e:
        problems.append(str(e))
    return problems
