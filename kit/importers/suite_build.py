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
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from kit.errors import ConfigError, TaskError
from kit.importers.validate import collection_checked, remember_checked
from kit.paths import built_tasks_dir
from kit.tasks.git import git, git_env
from kit.tasks.suite_manifest import SuiteImport, SuiteProject
from kit.tasks.task import SUITES_DIR, TASK_FILE, Suite, load_task

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
    for candidate in (
        repos / project.name / ".git",
        repos / f"{project.owner}+{project.name}" / "repo",
        repos / f"{project.owner}+{project.name}",
        repos / project.name,
    ):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def clone(project: SuiteProject, repos: Path) -> Path:
    """``git clone URL repos/<name>`` (full history: a task needs its base and head commits)."""
    dest = repos / project.name
    if dest.exists():
        raise TaskError(
            f"{dest} exists but is not a git clone", "remove it, or point --repos at a folder of clones"
        )
    repos.mkdir(parents=True, exist_ok=True)
    print(f"cloning {project.url} into {dest} ...", flush=True)
    git(repos, "clone", "--quiet", "--no-checkout", project.url, str(dest), timeout=CLONE_TIMEOUT_S)
    return dest / ".git"


def has_commit(git_dir: Path, sha: str) -> bool:
    env = {**git_env(), "GIT_DIR": str(git_dir)}
    return git(git_dir, "cat-file", "-e", f"{sha}^{{commit}}", env=env, check=False).returncode == 0


def import_argv(item: SuiteImport, project: SuiteProject, source: str, out: Path) -> list[str]:
    """The ``kit tasks import-git`` arguments that build ``item`` from the clone at ``source``."""
    argv = ["tasks", "import-git", source]
    argv += ["--commit", item.commit] if item.commit else ["--range", item.range or ""]
    argv += ["--id", item.id, "--out", str(out), "--repo-url", project.url]
    if item.prompt:
        argv += ["--prompt-file", str(SUITES_DIR / item.prompt)]
    return argv + list(item.options)


def command_line(argv: list[str]) -> str:
    return "python -m kit " + shlex.join(argv)


def recipe(item: SuiteImport) -> str:
    """A digest of what builds ``item``: its commit or range, options and prompt file's text (not
    its note). A built task whose recorded recipe differs is built again."""
    data = item.model_dump(exclude={"note"})
    data["prompt_text"] = (SUITES_DIR / item.prompt).read_text(encoding="utf-8") if item.prompt else None
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def is_current(item: SuiteImport, folder: Path) -> bool:
    """Whether ``folder`` holds ``item`` built by this recipe (:data:`RECIPE_FILE`)."""
    marker = folder / RECIPE_FILE
    return (folder / TASK_FILE).is_file() and marker.is_file() and marker.read_text().strip() == recipe(item)


def finish(item: SuiteImport, project: SuiteProject, folder: Path) -> None:
    """Copy the project's licence file from the base tree beside task.yaml (a task without one is
    refused: its code could not be passed on), and check the manifest's ``long`` against the
    importer's (at least 2 source files, 150 changed lines and 8 hidden tests)."""
    licence = folder / "repo" / project.licence_file
    if not licence.is_file():
        raise TaskError(
            f"task {item.id!r}: the base tree has no {project.licence_file}",
            f"set the project's `licence_file` in the suite's manifest ({project.url})",
        )
    copy = folder / f"LICENSE-{project.name}"
    if not (copy.is_file() and copy.read_bytes() == licence.read_bytes()):
        copy.unlink(missing_ok=True)  # never written in place: it may be a link shared with other tasks
        shutil.copyfile(licence, copy)
    long = bool((yaml.safe_load((folder / TASK_FILE).read_text(encoding="utf-8")) or {}).get("long"))
    if long != item.long:
        raise TaskError(
            f"task {item.id!r}: the manifest says long: {str(item.long).lower()}, the import found "
            f"long: {str(long).lower()}",
            "the project's history or the importer changed: correct the manifest and its README table",
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
                print(f"{head}: kept (already built from {item.commit or item.range})", flush=True)
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
            print(f"{head}: {command_line(argv)}", flush=True)
            if folder.exists():
                shutil.rmtree(folder)  # never write over a folder whose files may be shared
            status = run_import(argv)
            if status != 0 or not (folder / TASK_FILE).is_file():
                raise TaskError(f"import-git exited with status {status}", "see its output above")
            validated = collection_checked(load_task(folder))  # import-git's validation, remembered
            finish(item, project, folder)
            (folder / RECIPE_FILE).write_text(recipe(item) + "\n", encoding="utf-8")
            if validated:  # the licence copy and the recipe change no test: the dry run knows it
                remember_checked(load_task(folder))
        except (TaskError, ConfigError) as e:
            status = "no-source" if "no clone of" in str(e) else "failed"
            results.append(BuildResult(item.id, status, time.monotonic() - started, str(e)))
            print(f"{head}: {status}: {e}", flush=True)
            continue
        results.append(BuildResult(item.id, "built", time.monotonic() - started))
        print(f"{head}: built in {results[-1].seconds:.0f} s", flush=True)
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
        key = (st.st_size, st.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
        kept = first.setdefault(key, path)
        if kept != path and not os.path.samefile(kept, path):
            tmp = path.with_name(path.name + ".orchbench-link")
            os.link(kept, tmp)
            os.replace(tmp, path)
    return before, disk_bytes(root)


def solution_size(folder: Path) -> tuple[int, int]:
    """(Python files, changed lines) of the task's reference change: each solution ``.py`` file
    against the base's (added + removed lines; a new file counts whole), and the deleted ones."""
    import difflib

    solution, repo = folder / "solution", folder / "repo"
    files = lines = 0
    for path in sorted(solution.rglob("*.py")) if solution.is_dir() else []:
        rel = path.relative_to(solution)
        old = (repo / rel).read_text("utf-8", "replace").splitlines() if (repo / rel).is_file() else []
        new = path.read_text("utf-8", "replace").splitlines()
        diff = difflib.unified_diff(old, new, lineterm="", n=0)
        changed = sum(1 for ln in diff if ln[:1] in "+-" and not ln.startswith(("+++", "---")))
        files, lines = files + bool(changed), lines + changed
    deleted = solution / "DELETED.txt"
    for rel in deleted.read_text("utf-8").split() if deleted.is_file() else []:
        if rel.endswith(".py") and (repo / rel).is_file():
            files, lines = files + 1, lines + len((repo / rel).read_text("utf-8", "replace").splitlines())
    return files, lines
