"""Building a suite's tasks from its manifest (:mod:`kit.tasks.suite_manifest`):
``python -m kit tasks build-suite NAME --repos DIR [--clone]``.

For each task of the manifest: find the project's clone in DIR -- ``DIR/<name>`` (a clone),
``DIR/<owner>+<name>/repo`` or ``DIR/<owner>+<name>`` (a bare git folder, as the workplace's fetch tool
leaves them) -- or, with ``--clone``, ``git clone`` its public URL into ``DIR/<name>``; then run
``kit tasks import-git`` on it with the manifest's commit or range and options, into
:func:`kit.paths.built_tasks_dir`. A task already built from the same commits is kept (``--force``
rebuilds it). Each built task carries the project's licence file, copied from the base tree
(``LICENSE-<project>`` beside ``task.yaml``).

Storage: tasks of one project share most of their base tree, so after a build identical files of the
built folder are hard-linked to one copy (:func:`share_identical_files`). Nothing writes into a task
folder in place -- a workspace copies ``repo/``, scoring copies ``acceptance/`` -- and a rebuild
removes a task folder before writing it again, so a shared file is never changed through another task.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from kit.errors import ConfigError, TaskError
from kit.importers.git.gitread import Repo
from kit.importers.size import LONG_CODE_LINES, LONG_FILES, LONG_HIDDEN_TESTS, describe, measure
from kit.importers.spec_audit import audit_task, gap_counts, unexplained
from kit.importers.validate import collection_checked, remember_checked
from kit.paths import built_tasks_dir
from kit.tasks.git import git, git_env
from kit.tasks.suite_manifest import SuiteImport, SuiteProject
from kit.tasks.task import SUITES_DIR, TASK_FILE, Suite, Task, load_task
from kit.tasks.taskyaml import write_task_file
from kit.untrusted.confine import confined
from kit.untrusted.terminal import visible

#: In a built task folder: the digest of the manifest entry it was built from (:func:`recipe`).
RECIPE_FILE = ".suite-recipe"
#: git clone of a public URL is stopped after this long.
CLONE_TIMEOUT_S = 900.0


@dataclass
class BuildResult:
    """What became of one task of the manifest."""

    id: str
    status: str  # built | kept | failed | no-source
    seconds: float = 0.0
    detail: str = ""


def find_clone(project: SuiteProject, repos: Path) -> Path | None:
    """The git folder of the project's clone in ``repos`` (see the module docstring), or None."""
    name = confined(repos, project.name, f"the project name of {project.url}").name
    mirror = confined(repos, f"{project.owner}+{name}", f"the project of {project.url}").name
    for candidate in (repos / name / ".git", repos / mirror / "repo", repos / mirror, repos / name):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def clone(project: SuiteProject, repos: Path) -> Path:
    """``git clone URL repos/<name>`` (full history: a task needs its base and head commits), over
    https only (no other transport: an ``ext::`` or ``file://`` URL in a manifest runs nothing)."""
    dest = confined(repos, project.name, f"the project name of {project.url}")
    if dest.exists():
        raise TaskError(
            f"{dest} exists but is not a git clone", "remove it, or point --repos at a folder of clones"
        )
    repos.mkdir(parents=True, exist_ok=True)
    print(visible(f"cloning {project.url} into {dest} ..."), flush=True)
    env = {**git_env(), "GIT_ALLOW_PROTOCOL": "https"}
    argv = ("clone", "--quiet", "--no-checkout", "--", project.url, str(dest))
    git(repos, *argv, env=env, timeout=CLONE_TIMEOUT_S)
    return dest / ".git"


def has_commit(git_dir: Path, sha: str) -> bool:
    """Whether the clone holds the commit ``sha``, read through a view of the kit's own
    (:mod:`kit.importers.git.gitview`): nothing of the clone's config runs, nothing is fetched."""
    return Repo(git_dir).has_commit(sha)


def import_argv(item: SuiteImport, project: SuiteProject, source: str, out: Path) -> list[str]:
    """The ``kit tasks import-git`` arguments that build ``item`` from the clone at ``source``."""
    argv = ["tasks", "import-git", source]
    argv += ["--commit", item.commit] if item.commit else ["--range", item.range or ""]
    argv += ["--id", item.id, "--out", str(out), "--repo-url", project.url]
    if item.prompt:
        argv += ["--prompt-file", str(confined(SUITES_DIR, item.prompt, f"task {item.id!r}: prompt"))]
    for excluded in item.exclude_tests:
        argv += ["--exclude-test", excluded.test, excluded.reason]
    return argv + allowed_options(item)


#: the import-git options a manifest may give: a manifest is hostile input -- no sandbox, output
#: folder, id, ``--force`` or file (prompt, severities) of its choosing (attack round 39c)
MANIFEST_OPTIONS = ("--tests", "--timeout", "--probe-budget")


def allowed_options(item: SuiteImport) -> list[str]:
    """``item.options``, each of :data:`MANIFEST_OPTIONS` with its value (``--flag V`` or
    ``--flag=V``); anything else is one TaskError naming it, before anything is built."""
    options, i = list(item.options), 0
    while i < len(options):
        flag = options[i].split("=", 1)[0]
        if flag not in MANIFEST_OPTIONS or ("=" not in options[i] and i + 1 == len(options)):
            raise TaskError(
                f"task {item.id!r}: the manifest's options give {visible(options[i][:80])!r}: a manifest may "
                f"give only {', '.join(MANIFEST_OPTIONS)}, each with its value",
                "the sandbox, --out, --id, --force and the prompt file are build-suite's own",
            )
        value = options[i].split("=", 1)[1] if "=" in options[i] else options[i + 1]
        if flag != "--tests" and not _seconds(value):
            raise TaskError(
                f"task {item.id!r}: the manifest's {flag} is {visible(value[:40])!r}: give seconds"
            )
        i += 1 if "=" in options[i] else 2
    return options


def _seconds(value: str) -> bool:
    """A time limit a manifest may give: a number of seconds, finite, over 0, at most a day."""
    try:
        return 0 < float(value) <= 24 * 3600
    except ValueError:
        return False


def command_line(argv: list[str]) -> str:
    return "python -m kit " + shlex.join(argv)


def recipe(item: SuiteImport) -> str:
    """A digest of what builds ``item``: its commit or range, options, excluded tests and prompt
    file's text (not its note, spec notes or expert estimate: :func:`finish` writes those). A built task whose recorded recipe differs is built again."""
    data = item.model_dump(exclude={"note", "spec_notes", "expert_minutes", "expert", "exclude_tests"})
    if item.exclude_tests:  # (added only when given: recipes from before the option stay valid)
        data["exclude_tests"] = [e.model_dump() for e in item.exclude_tests]
    prompt = confined(SUITES_DIR, item.prompt, f"task {item.id!r}: prompt") if item.prompt else None
    data["prompt_text"] = prompt.read_text(encoding="utf-8") if prompt else None
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def is_current(item: SuiteImport, folder: Path) -> bool:
    """Whether ``folder`` holds ``item`` built by this recipe (:data:`RECIPE_FILE`)."""
    marker = folder / RECIPE_FILE
    return (folder / TASK_FILE).is_file() and marker.is_file() and marker.read_text().strip() == recipe(item)


def finish(item: SuiteImport, project: SuiteProject, folder: Path) -> None:
    """Copy the project's licence file from the base tree beside task.yaml (a task without one is
    refused: its code could not be passed on); write the manifest's project, spec notes and expert
    estimate into task.yaml; check the manifest's ``long`` against the kit's measure
    (:mod:`kit.importers.size`) and refuse a task whose hidden tests rely on what its prompt never states
    (:mod:`kit.importers.spec_audit`) unless a spec note explains it."""
    licence = confined(folder / "repo", project.licence_file, f"the licence file of {project.url}")
    if not licence.is_file():
        raise TaskError(
            f"task {item.id!r}: the base tree has no {project.licence_file}",
            f"set the project's `licence_file` in the suite's manifest ({project.url})",
        )
    copy = confined(folder, f"LICENSE-{project.name}", f"the licence copy of {project.url}")
    if not (copy.is_file() and copy.read_bytes() == licence.read_bytes()):
        copy.unlink(missing_ok=True)  # never written in place: it may be a link shared with other tasks
        shutil.copyfile(licence, copy)
    spec = yaml.safe_load((folder / TASK_FILE).read_text(encoding="utf-8")) or {}
    spec.update(project=item.project, spec_notes=[n.model_dump() for n in item.spec_notes])
    if item.expert_minutes is not None:
        spec.update(expert_minutes=item.expert_minutes, expert=item.expert)
    task = Task(**spec, path=folder)
    size = measure(task)
    if size.long != item.long:
        raise TaskError(
            f"task {item.id!r}: the manifest says long: {str(item.long).lower()}, the kit's measure says "
            f"long: {str(size.long).lower()} ({describe(size)}; long = {LONG_CODE_LINES}+ code lines, "
            f"{LONG_FILES}+ files, {LONG_HIDDEN_TESTS}+ hidden tests)",
            "correct the manifest's `long` and its README table (the measure is kit.importers.size's)",
        )
    gaps = audit_task(task)
    spec.update(long=size.long, spec_gaps=gap_counts(gaps))
    (folder / TASK_FILE).unlink()  # never written in place
    write_task_file(folder, spec)
    missing = unexplained(gaps)
    if missing:
        rows = "\n".join(f"    {g.row()}" for g in missing[:40])
        more = f"\n    ... and {len(missing) - 40} more" if len(missing) > 40 else ""
        raise TaskError(
            f"task {item.id!r}: {len(missing)} hidden-test requirement(s) the prompt never states "
            f"(test  line  kind  what):\n{rows}{more}",
            "state each in the prompt file, leave the test out (`exclude_tests:` with a reason), or "
            "explain it (`spec_notes:` with test, what and note) in the suite's manifest",
        )


def build_suite(
    suite: Suite,
    repos: Path | None,
    run_import: Callable[[list[str]], int],
    *,
    allow_clone: bool = False,
    only: list[str] | None = None,
    force: bool = False,
    out: Path | None = None,
) -> list[BuildResult]:
    """Build the manifest's tasks (``only``: these ids) into ``out`` (default the built folder);
    ``run_import(argv)`` runs ``kit tasks import-git`` with ``argv`` and returns its exit status."""
    if not suite.imports:
        raise ConfigError(
            f"suite {suite.name!r} has no manifest to build", "its tasks ship in datasets/tasks"
        )
    out = Path(out or built_tasks_dir())
    unknown = sorted(set(only or []) - {i.id for i in suite.imports})
    if unknown:
        raise ConfigError(
            f"not in suite {suite.name!r}: {', '.join(unknown)}", f"pick from: {', '.join(suite.tasks)}"
        )
    items = [i for i in suite.imports if not only or i.id in only]
    for item in items:  # before anything is built: a manifest's options are hostile input
        allowed_options(item)
    repos = Path(repos) if repos else out / ".clones"
    results: list[BuildResult] = []
    for n, item in enumerate(items, 1):
        project = suite.projects[item.project]
        folder = out / item.id
        head = f"[{n}/{len(items)}] {item.id}"
        started = time.monotonic()
        try:
            if not force and is_current(item, folder):
                finish(item, project, folder)  # the licence and the manifest's `long` still hold
                results.append(BuildResult(item.id, "kept", detail="already built from these commits"))
                print(
                    visible(f"{head}: kept (already built from {item.commit or item.range})"), flush=True
                )  # (a manifest's text: hostile)
                continue
            git_dir = find_clone(project, repos)
            if git_dir is None and allow_clone:
                git_dir = clone(project, repos)
            if git_dir is None:
                raise TaskError(
                    f"no clone of {project.url} in {repos} (looked for {project.name}/, "
                    f"{project.owner}+{project.name}/repo)",
                    f"git clone {project.url} {repos / project.name}, or pass --clone",
                )
            wanted = [item.commit] if item.commit else (item.range or "").split("..")
            missing = [sha for sha in wanted if not has_commit(git_dir, sha)]
            if missing:
                raise TaskError(
                    f"the clone {git_dir} lacks commit {', '.join(missing)}",
                    f"update it: git --git-dir={git_dir} fetch {project.url}",
                )
            argv = import_argv(item, project, str(git_dir), out)
            print(visible(f"{head}: {command_line(argv)}"), flush=True)
            if folder.exists():
                shutil.rmtree(folder)  # never write over a folder whose files may be shared
            status = run_import(argv)
            if status != 0 or not (folder / TASK_FILE).is_file():
                raise TaskError(f"import-git exited with status {status}", "see its output above")
            # built: kept from now on; the manifest's checks (finish) run again on each build
            validated = collection_checked(load_task(folder))  # import-git's validation, remembered
            finish(item, project, folder)
            (folder / RECIPE_FILE).write_text(recipe(item) + "\n", encoding="utf-8")
            if validated:  # the licence copy and the recipe change no test: the dry run knows it
                remember_checked(load_task(folder))
        except (TaskError, ConfigError) as e:
            status = "no-source" if "no clone of" in str(e) else "failed"
            results.append(BuildResult(item.id, status, time.monotonic() - started, str(e)))
            print(visible(f"{head}: {status}: {e}"), flush=True)
            continue
        results.append(BuildResult(item.id, "built", time.monotonic() - started))
        print(visible(f"{head}: built in {results[-1].seconds:.0f} s"), flush=True)
    return results


def _task_files(root: Path) -> list[Path]:
    return sorted(
        path
        for task in root.iterdir()
        if task.is_dir() and not task.name.startswith(".")
        for path in task.rglob("*")
        if path.is_file() and not path.is_symlink()
    )


def disk_bytes(root: Path) -> int:
    """The bytes of the task folders under ``root``, each file (inode) counted once."""
    inodes = {(st.st_dev, st.st_ino): st.st_size for st in (p.stat() for p in _task_files(root))}
    return sum(inodes.values())


def share_identical_files(root: Path) -> tuple[int, int]:
    """Hard-link identical regular files (same bytes and mode) under ``root``'s task folders to one
    copy (the clones folder left out); (bytes before, bytes after), each inode counted once."""
    before = disk_bytes(root)
    first: dict[tuple[int, int, str], Path] = {}
    for path in _task_files(root):
        st = path.stat()
        with open(path, "rb") as f:  # streamed: a file of a task's tree may be 64 MB
            key = (st.st_size, st.st_mode, hashlib.file_digest(f, "sha256").hexdigest())
        kept = first.setdefault(key, path)
        if kept != path and not os.path.samefile(kept, path):
            tmp = path.with_name(f".orchbench-{secrets.token_hex(8)}")  # (short: names may be 255 bytes)
            os.link(kept, tmp)
            os.replace(tmp, path)
    return before, disk_bytes(root)
