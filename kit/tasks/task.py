"""Tasks: a starting repo, a prompt, hidden acceptance tests and a reference solution.

A task is a folder (``datasets/tasks/<id>/`` or any folder of a task author's own)::

    task.yaml      id, title, prompt, language, setup, test_command, long, limits, tags
    repo/          the starting code, with its own README and tests (they pass)
    acceptance/    hidden pytest tests, one requirement each, with @pytest.mark.severity("...")
    solution/      the files of the reference change, laid over repo/ (full copies, same paths);
                   solution/DELETED.txt may list files (one a line) the change deletes

``python -m kit tasks validate`` checks the contract: the own tests pass at the start, every
acceptance test fails at the start (unless marked ``@pytest.mark.baseline_pass``), and with the
solution applied every acceptance and own test passes.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kit.config import SafeName, load_yaml_model
from kit.errors import ConfigError, KitError, TaskError
from kit.paths import TASKS_DIR
from kit.records.schema import SEVERITIES

TASK_FILE = "task.yaml"
DELETED_FILE = "DELETED.txt"


class TaskLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_steps: int | None = Field(
        None, ge=1, description="Overrides the experiment's step cap for this task."
    )
    command_timeout_s: float = Field(120.0, gt=0, description="Timeout of one command the agent runs.")
    scoring_timeout_s: float = Field(120.0, gt=0, description="Timeout of each pytest run while scoring.")


class TaskFile(BaseModel):
    """What task.yaml holds."""

    model_config = ConfigDict(extra="forbid")

    id: SafeName = Field(description="Short name; the folder name for tasks under datasets/tasks/.")
    title: str
    prompt: str = Field(description="Given as is to every strategy.")
    language: str = "python"
    setup: list[str] = Field(default_factory=list, description="Commands run in a fresh clone first.")
    test_command: str = Field("python -m pytest -q", description="Runs the repo's own tests.")
    long: bool = Field(False, description="Takes long to solve; experiments may skip long tasks.")
    limits: TaskLimits = Field(default_factory=TaskLimits)
    tags: list[str] = Field(default_factory=list)


class Task(TaskFile):
    path: Path = Field(exclude=True, description="The task folder (set by the loader).")

    @property
    def repo_dir(self) -> Path:
        return self.path / "repo"

    @property
    def acceptance_dir(self) -> Path:
        return self.path / "acceptance"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"


# --------------------------------------------------------------------------- loading


def _task_folder(id_or_path: str | Path) -> Path:
    p = Path(id_or_path)
    if p.name == TASK_FILE and p.is_file():
        return p.parent
    if p.is_dir() and (p / TASK_FILE).is_file():
        return p
    candidate = TASKS_DIR / str(id_or_path)
    if (candidate / TASK_FILE).is_file():
        return candidate
    if p.is_dir():
        raise ConfigError(
            f"{p} is a folder but has no {TASK_FILE}", "a task folder holds task.yaml, repo/, acceptance/"
        )
    known = ", ".join(_task_ids()) or "(none)"
    raise ConfigError(
        f"unknown task {str(id_or_path)!r}", f"pick one of: {known}, or give a task folder path"
    )


def _task_ids() -> list[str]:
    if not TASKS_DIR.is_dir():
        return []
    return sorted(d.name for d in TASKS_DIR.iterdir() if (d / TASK_FILE).is_file())


def load_task(id_or_path: str | Path) -> Task:
    """A task by id (a folder of datasets/tasks/) or by folder path."""
    folder = _task_folder(id_or_path).resolve()
    spec = load_yaml_model(folder / TASK_FILE, TaskFile, "task")
    if folder.parent == TASKS_DIR.resolve() and spec.id != folder.name:
        raise ConfigError(
            f"{folder / TASK_FILE}: field `id`: {spec.id!r} differs from the folder name {folder.name!r}",
            "make them equal",
        )
    task = Task(**spec.model_dump(), path=folder)
    for sub in (task.repo_dir, task.acceptance_dir):
        if not sub.is_dir():
            raise TaskError(f"task {task.id!r}: missing folder {sub}", "a task needs repo/ and acceptance/")
    return task


def list_tasks() -> list[Task]:
    return [load_task(TASKS_DIR / i) for i in _task_ids()]


# --------------------------------------------------------------------------- suites

SUITES_DIR = TASKS_DIR.parent / "suites"
SUITE_PREFIX = "suite:"


class Suite(BaseModel):
    """A named, fixed list of task ids (``datasets/suites/<name>.yaml``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The file name without .yaml.")
    description: str = ""
    source: str = Field("", description="Where the tasks come from (repository, commit, licence).")
    tasks: list[str] = Field(min_length=1)


def suite_names() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.yaml")) if SUITES_DIR.is_dir() else []


def load_suite(name: str) -> Suite:
    """The suite ``name`` (or a path to a suite file); every task it names must exist."""
    path = Path(name) if str(name).endswith((".yaml", ".yml")) else SUITES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown suite {name!r}", f"pick one of: {', '.join(suite_names()) or '(none)'}")
    suite = load_yaml_model(path, Suite, "suite")
    if suite.name != path.stem:
        raise ConfigError(
            f"{path}: field `name`: {suite.name!r} differs from the file name", "make them equal"
        )
    for task_id in suite.tasks:
        _task_folder(task_id)  # an unknown task fails here, naming the valid ones
    return suite


def expand_tasks(entries: list[str]) -> list[str]:
    """Task entries of an experiment with each ``suite:<name>`` replaced by the suite's task ids, in
    order; a task named twice (directly or through two suites) is kept once, where it first appears."""
    out: list[str] = []
    for entry in entries:
        ids = load_suite(entry[len(SUITE_PREFIX) :]).tasks if entry.startswith(SUITE_PREFIX) else [entry]
        out += [i for i in ids if i not in out]
    return out


def apply_solution(task: Task, root: Path) -> None:
    """Lay the reference solution over ``root`` (files copied; DELETED.txt entries removed)."""
    if not task.solution_dir.is_dir():
        raise TaskError(f"task {task.id!r} has no solution/ folder")
    for src in sorted(task.solution_dir.rglob("*")):
        rel = src.relative_to(task.solution_dir)
        if src.is_dir() or rel.as_posix() == DELETED_FILE or "__pycache__" in rel.parts:
            continue
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
    deleted = task.solution_dir / DELETED_FILE
    if deleted.is_file():
        for line in deleted.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                (root / line.strip()).unlink(missing_ok=True)


def severity_counts(task: Task) -> dict[str, int]:
    from kit.tasks.scoring.scorer import read_requirements

    reqs, _ = read_requirements(task.acceptance_dir)
    counts = {s: 0 for s in SEVERITIES}
    for r in reqs:
        key = r.severity if r.severity in counts else "undeclared"
        counts[key] = counts.get(key, 0) + 1
    return counts


# --------------------------------------------------------------------------- validation


class ValidationReport(BaseModel):
    task_id: str
    ok: bool
    problems: list[str] = Field(default_factory=list)
    durations: dict[str, float] = Field(default_factory=dict)


def validate_task(task: Task, sandbox: str | None = None) -> ValidationReport:
    """Check the task contract on a fresh workspace (see the module docstring); ``sandbox`` is the
    scoring sandbox (``bwrap`` or ``none``; default the platform's)."""
    from kit.tasks.scoring.scorer import evaluate
    from kit.tasks.workspace import create_workspace

    problems: list[str] = []
    durations: dict[str, float] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="orchbench-validate-") as tmp:
        try:
            t = time.monotonic()
            ws = create_workspace(task, Path(tmp) / "repo")
            durations["workspace_s"] = time.monotonic() - t

            problems += uncollected_test_files(task)
            t = time.monotonic()
            start = evaluate(task, ws.root, ws, sandbox=sandbox)
            durations["start_s"] = time.monotonic() - t
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
                end = evaluate(task, ws.root, ws, sandbox=sandbox)
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
                if not end.own.complete or end.own_failed:
                    problems.append(
                        f"with the solution, own tests fail: {', '.join(end.own_failed) or _tail(end.own)}"
                    )
        except KitError as e:
            problems.append(str(e))
    durations["total_s"] = time.monotonic() - started
    durations = {k: round(v, 3) for k, v in durations.items()}
    return ValidationReport(task_id=task.id, ok=not problems, problems=problems, durations=durations)


def uncollected_test_files(task: Task) -> list[str]:
    """Python files under acceptance/ that define ``test*`` functions but that pytest would never
    collect (their name is not ``test_*.py`` / ``*_test.py``): requirements that silently never run."""
    from kit.tasks.scoring.scorer import test_files

    collected = set(test_files(task.acceptance_dir))
    problems = []
    for path in sorted(task.acceptance_dir.rglob("*.py")):
        if path in collected or path.name == "conftest.py" or "__pycache__" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue  # not a test file by name; its import errors show when a test file imports it
        if any(isinstance(n, ast.FunctionDef) and n.name.startswith("test") for n in ast.walk(tree)):
            rel = path.relative_to(task.acceptance_dir).as_posix()
            problems.append(
                f"acceptance/{rel} defines tests but pytest will not collect it (name it test_*.py)"
            )
    return problems


def _tail(run) -> str:  # noqa: ANN001 - a kit.tasks.scoring.scorer.PytestRun
    lines = [ln for ln in run.output.strip().splitlines() if ln.strip()]
    return f"exit code {run.exit_code}: {lines[-1] if lines else '(no output)'}"


# --------------------------------------------------------------------------- CLI


def cmd_list(args: argparse.Namespace) -> int:
    tasks = list_tasks()
    if not tasks:
        print(f"no tasks in {TASKS_DIR}")
        return 0
    width = max(len(t.id) for t in tasks)
    for t in tasks:
        counts = severity_counts(t)
        sev = " ".join(f"{n} {s}" for s, n in counts.items() if n)
        total = sum(counts.values())
        print(f"{t.id:<{width}}  {t.language:<7} {total:>2} acceptance ({sev})  {t.title}")
    for name in suite_names():
        suite = load_suite(name)
        print(f"suite {SUITE_PREFIX}{name}: {len(suite.tasks)} tasks: {', '.join(suite.tasks)}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    target = getattr(args, "id", None) or getattr(args, "path", None)
    try:
        if getattr(args, "all", False):
            tasks = list_tasks()
        elif target:
            tasks = [load_task(t) for t in expand_tasks([target])]
        else:
            print("give a task id or folder, or --all")
            return 2
    except KitError as e:
        print(f"✗ {e}")
        return 1
    failed = 0
    for task in tasks:
        report = validate_task(task, getattr(args, "sandbox", None))
        mark = "✓" if report.ok else "✗"
        print(f"{mark} {task.id}  ({report.durations.get('total_s', 0):.1f} s)", flush=True)
        for p in report.problems:
            print(f"    - {p}")
        failed += not report.ok
    if len(tasks) > 1:
        print(f"{len(tasks) - failed}/{len(tasks)} tasks valid")
    return 1 if failed else 0


def cmd_import_exercism(args: argparse.Namespace) -> int:
    from kit.tasks.exercism.importer import import_exercism, summary_table

    dest = Path(args.dest) if getattr(args, "dest", None) else TASKS_DIR
    results = import_exercism(
        Path(args.path),
        dest,
        severities=getattr(args, "severities", None),
        validate=not getattr(args, "no_validate", False),
        progress=getattr(args, "progress", False),
    )
    if not results:
        print(f"no exercises found in {args.path}")
        return 1
    print(summary_table(results))
    return 0 if all(r.ok or r.status == "skipped" for r in results) else 1


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``tasks list | validate | import-exercism`` (each leaf sets ``func``)."""
    tasks = subparsers.add_parser("tasks", help="list, validate and import tasks")
    sub = tasks.add_subparsers(dest="tasks_command", metavar="{list,validate,import-exercism}")
    tasks.set_defaults(func=lambda _args: (tasks.print_help(), 2)[1])

    p = sub.add_parser("list", help="the tasks in datasets/tasks with their acceptance tests by severity")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("validate", help="check a task's contract (own tests, acceptance, solution)")
    p.add_argument("id", nargs="?", help="task id, task folder path, or suite:<name>")
    p.add_argument("--all", action="store_true", help="validate every task in datasets/tasks")
    p.add_argument(
        "--sandbox",
        choices=["bwrap", "none"],
        default=None,
        help="where the tests run (default: bwrap on Linux)",
    )
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("import-exercism", help="turn Exercism python-track exercises into tasks")
    p.add_argument("path", help="one exercise folder or a folder of them")
    p.add_argument("--dest", default=None, help=f"where to write the tasks (default {TASKS_DIR})")
    p.add_argument(
        "--severities",
        default=None,
        help="YAML mapping of test names to severities (see kit.tasks.exercism.marks)",
    )
    p.add_argument("--no-validate", action="store_true", help="import only; do not validate each task")
    p.add_argument("--progress", action="store_true", help="print each exercise as it is done")
    p.set_defaults(func=cmd_import_exercism)
