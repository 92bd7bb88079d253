"""``python -m kit tasks list | audit | validate | import-exercism | import-git | build-suite``."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from kit.errors import KitError
from kit.importers import suite_build
from kit.importers.exercism.importer import import_exercism, summary_table
from kit.importers.overlap import overlap_lines
from kit.importers.size import describe, long_problem, measure
from kit.importers.spec_audit import audit_task, report, report_line, unexplained
from kit.importers.validate import requirements_line, task_path_problems, validate_task
from kit.paths import REPO_ROOT, TASKS_DIR, built_tasks_dir
from kit.run.sandboxing import task_sandbox
from kit.secrets import public_text
from kit.tasks.task import (
    SUITE_PREFIX,
    TASK_FILE,
    Suite,
    Task,
    expand_tasks,
    list_tasks,
    load_suite,
    load_task,
    suite_names,
)
from kit.untrusted.terminal import visible


def _sandbox(args: argparse.Namespace, task: Task) -> str | None:
    """The sandbox spec a task's checks run in (podman, docker: the task's image, pinned by id)."""
    backend = getattr(args, "sandbox", None)
    return task_sandbox(backend, task).spec if backend else None


def cmd_list(args: argparse.Namespace) -> int:
    target = getattr(args, "path", None) or ""
    if target.startswith(SUITE_PREFIX):
        return _list_suite(load_suite(target[len(SUITE_PREFIX) :], check_tasks=False))
    folder = Path(target) if target else TASKS_DIR
    if (folder / TASK_FILE).is_file():
        entries = [folder]
    elif folder.is_dir():
        roots = [folder, built_tasks_dir()] if folder == TASKS_DIR else [folder]  # + the built suites
        entries = [
            d for root in roots if root.is_dir() for d in sorted(root.iterdir()) if (d / TASK_FILE).is_file()
        ]
    else:
        print(f"✗ {visible(folder)}: no such folder")
        return 1
    if not entries:
        print(f"no tasks in {visible(folder)}")
        return 0
    bad = _print_tasks(entries)[1]
    if folder == TASKS_DIR:
        for name in suite_names():
            suite = load_suite(name, check_tasks=False)
            print(f"suite {SUITE_PREFIX}{name}: {len(suite.tasks)} tasks: {', '.join(suite.tasks)}")
            unbuilt = [i.id for i in suite.imports if not (built_tasks_dir() / i.id / TASK_FILE).is_file()]
            if unbuilt:
                print(
                    f"  not built: {len(unbuilt)} of {len(suite.tasks)}: python -m kit tasks build-suite {name} --repos DIR"
                )
    return 1 if bad else 0


def _print_tasks(entries: list[Path]) -> tuple[list[Task], int]:
    """Each task's line -- requirements, title -- and under it its measured size, project, expert
    estimate, the tests it leaves out and its unexplained specification gaps; (the tasks, how many
    failed to load)."""
    width = max(len(visible(d.name)) for d in entries)
    bad, loaded = 0, []
    for d in entries:
        try:
            t = load_task(d)
            print(f"{t.id:<{width}}  {t.language:<7} {requirements_line(t)}  {visible(t.title)}")
        except KitError as e:
            bad += 1
            print(f"{visible(d.name):<{width}}  ✗ {visible(str(e).splitlines()[0])}")
            continue
        loaded.append(t)
        size = measure(t)
        line = (
            f"{'':<{width}}  size: {describe(size)}, base {size.base_code_lines} code lines, prompt "
            f"~{size.prompt_tokens} tokens, long: {'yes' if size.long else 'no'}"
        )
        line += f"; project: {t.project}" if t.project else ""
        line += f"; expert: {t.expert_minutes:g} min ({t.expert})" if t.expert_minutes else ""
        print(visible(line))  # (project and expert are a task folder's text: hostile)
        problem = long_problem(t, size)
        if problem:
            print(f"{'':<{width}}  ✗ {visible(problem)}")
        for e in t.exclude_tests:
            print(f"{'':<{width}}  excluded: {visible(e.test)}: {visible(e.reason)}")
        if t.spec_gaps:
            gaps = ", ".join(f"{n} {k}" for k, n in t.spec_gaps.items())
            print(f"{'':<{width}}  unexplained specification gaps: {gaps} (kit tasks audit {t.id})")
    return loaded, bad


def _list_suite(suite: Suite) -> int:
    """``kit tasks list suite:NAME``: its tasks as built, their projects and which overlap."""
    folders = [_suite_task_folder(i) for i in suite.tasks]
    built = [f for f in folders if f is not None]
    loaded, bad = _print_tasks(built) if built else ([], 0)
    projects = sorted({t.project for t in loaded if t.project})
    print(
        f"suite {SUITE_PREFIX}{suite.name}: {len(suite.tasks)} tasks, {len(built)} built, "
        f"{len(projects)} project(s){': ' + visible(', '.join(projects)) if projects else ''}, "
        f"{sum(measure(t).long for t in loaded)} long by the kit's measure"
    )
    for line in overlap_lines(loaded):
        print(visible(line))
    unbuilt = [i for i, f in zip(suite.tasks, folders, strict=True) if f is None]
    if unbuilt:
        print(f"  not built: {', '.join(unbuilt)}: python -m kit tasks build-suite {suite.name} --repos DIR")
    return 1 if bad else 0


def _suite_task_folder(task_id: str) -> Path | None:
    for root in (TASKS_DIR, built_tasks_dir()):
        if (root / task_id / TASK_FILE).is_file():
            return root / task_id
    return None


def cmd_audit(args: argparse.Namespace) -> int:
    """``kit tasks audit TASK|suite:NAME``: each hidden test's reliance on what the prompt never
    states (:mod:`kit.importers.spec_audit`); exit 1 when a gap is unexplained or a task folder is
    refused (as ``validate`` refuses it)."""
    try:
        tasks = [load_task(t) for t in expand_tasks([args.target])]
    except KitError as e:
        print(f"✗ {visible(str(e))}")
        return 1
    missing = refused = 0
    for task in tasks:
        try:
            gaps = audit_task(task)
        except KitError as e:  # a folder validate refuses: refused here too
            print(f"✗ {visible(e, lines=True)}")
            refused += 1
            continue
        n = len(unexplained(gaps))
        missing += n
        if not gaps:
            print(f"✓ {task.id}: no gaps -- nothing the hidden tests rely on is missing from the prompt")
            continue
        print(f"{'✗' if n else '✓'} {task.id}: test  line  kind  what")
        for row in report(gaps):
            print(f"    {visible(row)}")
    if len(tasks) > 1:
        print(
            f"{len(tasks)} tasks, {missing} unexplained gap(s)" + (f", {refused} refused" if refused else "")
        )
    return 1 if missing or refused else 0


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
        print(f"✗ {visible(e, lines=True)}")
        return 1
    failed = 0
    for task in tasks:
        report = validate_task(task, _sandbox(args, task))
        problem = long_problem(task, measure(task))
        if problem:
            report.problems.append(problem)
            report.ok = False
        mark = "✓" if report.ok else "✗"
        took = report.durations.get("total_s", 0)
        print(f"{mark} {task.id}  ({took:.1f} s)  {requirements_line(task)}", flush=True)
        for p in report.problems:
            print(f"    - {visible(p)}")
        gaps = unexplained(audit_task(task)) if report.ok or not task_path_problems(task) else []
        if gaps:  # shown, not a failure: build-suite refuses a suite task with one
            print(
                f"    specification audit: {visible(report_line(gaps))} (python -m kit tasks audit {task.id})"
            )
        failed += not report.ok
    if len(tasks) > 1:
        print(f"{len(tasks) - failed}/{len(tasks)} tasks valid")
    return 1 if failed else 0


def cmd_import_exercism(args: argparse.Namespace) -> int:
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
    print(visible(summary_table(results), lines=True))
    return 0 if all(r.ok or r.status == "skipped" for r in results) else 1


def cmd_import_git(args: argparse.Namespace) -> int:
    from kit.importers.git.importer import Options, import_git
    from kit.importers.git.report import import_summary

    opts = Options(
        repo=Path(args.repo),
        commit=args.commit,
        range=args.range,
        task_id=args.id,
        prompt_file=Path(args.prompt_file) if args.prompt_file else None,
        out=Path(args.out) if args.out else TASKS_DIR,
        tests=args.tests,
        severities=Path(args.severities) if args.severities else None,
        timeout_s=args.timeout,
        probe_budget_s=args.probe_budget,
        sandbox=args.sandbox,
        force=args.force,
        repo_url=args.repo_url,
        exclude=dict(args.exclude_test or []),
        command=shlex.join(["python", "-m", "kit", *map(public_text, sys.argv[1:])])  # (credentials cut)
        if sys.argv[1:2] == ["tasks"]
        else "",
    )
    result = import_git(opts, progress=lambda line: print(visible(line), flush=True))
    print(visible(import_summary(result), lines=True))  # (each item in it escaped on its own line)
    return 0 if result.ok else 1


def _run_import(argv: list[str]) -> int:
    """``python -m kit ARGV`` (a ``tasks import-git`` command line) in this process: build-suite's
    way to run the importer exactly as its README command lines do."""
    parser = argparse.ArgumentParser(prog="python -m kit")
    add_cli(parser.add_subparsers())
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # a value argparse refuses (a manifest's text): this task fails, not the build
        return int(e.code or 2)
    saved, sys.argv = sys.argv, ["kit", *argv]  # import-git records its own command line in task.yaml
    try:
        return int(args.func(args) or 0)
    except KitError as e:
        print(f"error: {visible(e, lines=True)}", file=sys.stderr)
        return 2
    finally:
        sys.argv = saved


def cmd_build_suite(args: argparse.Namespace) -> int:
    suite = load_suite(args.name, check_tasks=False)
    only = [i for i in (args.only or "").split(",") if i] or None
    if args.dry_run:
        return _print_import_commands(suite, args.repos, only)
    started, out = time.monotonic(), built_tasks_dir()
    results = suite_build.build_suite(
        suite, args.repos, _run_import, allow_clone=args.clone, only=only, force=args.force
    )
    for r in results if args.validate else []:  # a task import-git built was validated by it just now
        if r.status == "kept":
            report = validate_task(load_task(out / r.id), _sandbox(args, load_task(out / r.id)))
            print(
                f"{'✓' if report.ok else '✗'} {r.id} validated ({report.durations.get('total_s', 0):.0f} s)"
            )
            r.status, r.detail = ("kept", r.detail) if report.ok else ("invalid", "; ".join(report.problems))
    before, after = suite_build.share_identical_files(out) if out.is_dir() else (0, 0)
    _print_build_summary(results, out)
    ok = sum(r.status in ("built", "kept") for r in results)
    skipped = sum(r.status == "no-source" for r in results) if args.skip_missing else 0
    print(
        f"{ok}/{len(results)} tasks built in {out}{f', {skipped} skipped (no clone)' if skipped else ''} "
        f"({time.monotonic() - started:.0f} s); {before / 1e6:.1f} MB of files, "
        f"{after / 1e6:.1f} MB on disk after sharing identical files"
    )
    return 0 if ok + skipped == len(results) else 1


def _print_import_commands(suite: Suite, repos: str | None, only: list[str] | None) -> int:
    """The import-git command lines of the suite's tasks, with paths as the README shows them."""
    out = built_tasks_dir()
    shown = out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out
    folder = Path(repos) if repos else Path("DIR")
    for item in suite.imports:
        if not only or item.id in only:
            project = suite.projects[item.project]
            found = suite_build.find_clone(project, folder) if repos else None
            argv = suite_build.import_argv(item, project, str(found or folder / project.name), shown)
            print(visible(suite_build.command_line([_from_root(a) for a in argv])))
    return 0


def _from_root(arg: str) -> str:
    """A path inside the kit's checkout as a relative one (the README's commands run from its root)."""
    path = Path(arg)
    return str(path.relative_to(REPO_ROOT)) if path.is_absolute() and path.is_relative_to(REPO_ROOT) else arg


def _print_build_summary(results: list[suite_build.BuildResult], out: Path) -> None:
    print(f"\n{'task':<34} {'status':<9} {'hidden':>6} {'files':>5} {'code lines':>10}  long")
    for r in results:
        if r.status in ("built", "kept"):
            size = measure(load_task(out / r.id))
            long = "yes" if size.long else "no"
            print(
                f"{r.id:<34} {r.status:<9} {size.hidden_tests:>6} {size.files:>5} {size.code_lines:>10}  {long}"
            )
        else:
            print(f"{r.id:<34} {r.status:<9}  {visible(r.detail.splitlines()[0][:120])}")


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``tasks list | validate | import-exercism | import-git | build-suite`` (each leaf sets
    ``func``)."""
    tasks = subparsers.add_parser("tasks", help="list, validate and import tasks")
    sub = tasks.add_subparsers(
        dest="tasks_command", metavar="{list,audit,validate,import-exercism,import-git,build-suite}"
    )
    tasks.set_defaults(func=lambda _args: (tasks.print_help(), 2)[1])

    p = sub.add_parser(
        "list",
        help="the tasks in datasets/tasks (or PATH, or suite:NAME) with their requirements by severity "
        "and sealed, sizes, projects, excluded tests and (a suite) overlaps",
    )
    p.add_argument("path", nargs="?", help="a folder of task folders, one task folder, or suite:NAME")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "audit", help="what each hidden test relies on that the prompt never states (docs/tasks.md)"
    )
    p.add_argument("target", help="task id, task folder path, or suite:<name>")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("validate", help="check a task's contract (own tests, acceptance, solution)")
    p.add_argument("id", nargs="?", help="task id, task folder path, or suite:<name>")
    p.add_argument("--all", action="store_true", help="validate every task in datasets/tasks")
    p.add_argument(
        "--sandbox",
        choices=["bwrap", "podman", "docker", "none"],
        default=None,
        help="where the tests run (default: bwrap on Linux; podman, docker: in the task's image)",
    )
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("import-exercism", help="turn Exercism python-track exercises into tasks")
    p.add_argument("path", help="one exercise folder or a folder of them")
    p.add_argument("--dest", default=None, help=f"where to write the tasks (default {TASKS_DIR})")
    p.add_argument(
        "--severities",
        default=None,
        help="YAML mapping of test names to severities (see kit.importers.exercism.marks)",
    )
    p.add_argument("--no-validate", action="store_true", help="import only; do not validate each task")
    p.add_argument("--progress", action="store_true", help="print each exercise as it is done")
    p.set_defaults(func=cmd_import_exercism)

    _add_import_git(sub)

    _add_build_suite(sub)


def _add_build_suite(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build-suite", help="build a suite's tasks from clones of its projects (datasets/suites/<name>.yaml)"
    )
    p.add_argument("name", help="the suite, e.g. real-repos")
    p.add_argument(
        "--repos",
        default=None,
        help="folder of the projects' clones: DIR/<name> or DIR/<owner>+<name>/repo "
        f"(default with --clone: {built_tasks_dir() / '.clones'})",
    )
    p.add_argument("--clone", action="store_true", help="git clone a project missing from --repos")
    p.add_argument("--only", default=None, metavar="ID,ID", help="build these tasks only")
    p.add_argument("--force", action="store_true", help="rebuild tasks already built")
    p.add_argument(
        "--skip-missing", action="store_true", help="a project with no clone skips its tasks (exit 0)"
    )
    p.add_argument(
        "--validate",
        action="store_true",
        help="validate the tasks already built (import-git validates new ones)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the import-git command lines; build nothing")
    p.set_defaults(func=cmd_build_suite)


def _add_import_git(sub: argparse._SubParsersAction) -> None:
    """``tasks import-git`` (docs/tasks.md, "Bring your own task")."""
    p = sub.add_parser(
        "import-git",
        help="turn a commit or a range of a local git repository into a task (see docs/tasks.md)",
    )
    p.add_argument("repo", help="a local git repository (a clone, or a bare repository)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--commit", metavar="SHA", help="a fix commit: the base is its parent")
    which.add_argument("--range", metavar="BASE..HEAD", help="a span of history, e.g. v1.2.0..v1.3.0")
    p.add_argument("--id", default=None, help="the task id (default: the repo's name and the commit)")
    p.add_argument(
        "--prompt-file", default=None, help="the prompt (default: the commit message(s) and the interface)"
    )
    p.add_argument("--out", default=None, help=f"where to write the task folder (default {TASKS_DIR})")
    p.add_argument(
        "--tests",
        nargs="+",
        metavar="GLOB",
        default=None,
        help="which files are test modules (default: test_*.py and *_test.py)",
    )
    p.add_argument(
        "--severities",
        default=None,
        metavar="FILE",
        help="YAML mapping of test names to severities (datasets/severities/exercism-example.yaml's format)",
    )
    p.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="time limit of each check (default 120)"
    )
    p.add_argument(
        "--probe-budget",
        type=float,
        default=None,
        metavar="S",
        help="time budget of the probe sessions (the new tests checked at the base and with the change) "
        "together (default 10 x --timeout); the validation after them is bounded by --timeout a session",
    )
    p.add_argument(
        "--repo-url", default=None, help="the public URL recorded in source: (default: the origin remote)"
    )
    p.add_argument("--force", action="store_true", help="replace a task folder of the same id")
    p.add_argument(
        "--exclude-test",
        nargs=2,
        action="append",
        metavar=("NODE_ID", "REASON"),
        help="leave this new or changed test out of the hidden tests, saying why (recorded in task.yaml's "
        "exclude_tests); repeatable",
    )
    p.add_argument(
        "--sandbox",
        choices=["bwrap", "none"],
        default=None,
        help="where the checks run (default: bwrap on Linux)",
    )
    p.set_defaults(func=cmd_import_git)
