"""A fresh git repository per run: the task's ``repo/`` committed as the base commit.

Only ``repo/`` is copied: the acceptance tests and the reference solution never enter the clone.
The base commit is built with a fixed author, committer and date, so the same task always gives the
same base commit id. :func:`diff` compares the working tree (new untracked files included) with the
base commit through a temporary index, so it never touches the clone's own index or history.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kit.errors import TaskError
from kit.paths import IGNORED_DIRS, IGNORED_SUFFIXES, is_ignored, results_root
from kit.sandbox.commands import run_command
from kit.tasks.git import git_env, run_git

if TYPE_CHECKING:
    from kit.tasks.task import Task

#: Never copied into a clone (build litter of the task folder itself): the kit's one ignore list.
COPY_IGNORE = shutil.ignore_patterns(*IGNORED_DIRS, *(f"*{s}" for s in IGNORED_SUFFIXES))
#: Written to .git/info/exclude: litter that running the tests creates must not show up in diffs,
#: nor the kit's own state in the clone (.pdca/: the pdca strategy's status file).
GIT_EXCLUDE = "".join(
    [*(f"{d}/\n" for d in IGNORED_DIRS if d != ".git"), *(f"*{s}\n" for s in IGNORED_SUFFIXES), ".pdca/\n"]
)

READY = ".orchbench-base-ready"  # marks a finished cached base (never committed)


@dataclass
class Workspace:
    root: Path
    base_commit: str
    #: The kit's cached base repository's git folder (the agent cannot touch it): diffs and scoring
    #: read the base from here, so a deleted or rigged ``.git`` in the clone changes nothing.
    base_git_dir: Path | None = None


def create_workspace(task: Task, dest: Path) -> Workspace:
    """A fresh clone of the task's base repository at ``dest`` (missing or empty).

    The base (``repo/`` copied, ``task.setup`` run, committed) is built once per task content and
    kept under ``<results>/.cache/bases/``; each workspace is a local clone of it (git objects are
    hard-linked, which is safe: they are immutable), with no remote left behind.
    """
    dest = Path(dest)
    if dest.exists():
        if not dest.is_dir() or any(dest.iterdir()):
            raise TaskError(f"workspace folder {dest} already exists and is not empty")
        dest.rmdir()
    dest.parent.mkdir(parents=True, exist_ok=True)
    base = base_repository(task)
    env = git_env()
    run_git(dest.parent, "clone", "-q", "--local", "--template=", str(base), str(dest), env=env)
    run_git(dest, "remote", "remove", "origin", env=env)
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text(GIT_EXCLUDE, encoding="utf-8")
    commit = (base / ".git" / "refs" / "heads" / "main").read_text(encoding="utf-8").strip()
    return Workspace(root=dest, base_commit=commit, base_git_dir=base / ".git")


_bases_lock = threading.Lock()


def base_repository(task: Task) -> Path:
    """The cached base repository of ``task``, built on first use (keyed by the repo's content)."""
    digest = hashlib.sha256(json.dumps([task.setup, GIT_EXCLUDE]).encode())  # new excludes: new base
    for path in sorted(p for p in task.repo_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(task.repo_dir)
        if is_ignored(rel):
            continue
        st = path.stat()  # size + mtime: an edited task file gives a new base
        digest.update(f"{rel.as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    folder = results_root() / ".cache" / "bases" / f"{task.id}-{digest.hexdigest()[:16]}"
    if (folder / READY).exists():
        return folder
    with _bases_lock:
        if (folder / READY).exists():
            return folder
        tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        if tmp.exists():
            shutil.rmtree(tmp)
        _build_base(task, tmp)
        (tmp / READY).write_text("ok\n", encoding="utf-8")
        try:
            os.replace(tmp, folder)
        except OSError:  # another process built it first
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _build_base(task: Task, dest: Path) -> None:
    """Copy ``task.repo_dir`` to ``dest``, run ``task.setup`` there, and commit it (fixed identity
    and date, so the same content always gives the same commit id)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(task.repo_dir, dest, symlinks=True, ignore=COPY_IGNORE)
    for command in task.setup:
        res = run_command(command, dest, task.limits.command_timeout_s)
        if res.timed_out or res.exit_code != 0:
            raise TaskError(f"task {task.id!r}: setup command {command!r} failed:\n{res.output[-2000:]}")
    env = git_env()
    run_git(dest, "init", "-q", "-b", "main", "--template=", env=env)
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text(GIT_EXCLUDE + READY + "\n", encoding="utf-8")
    run_git(dest, "add", "-A", env=env)
    run_git(dest, "commit", "-q", "--allow-empty", "--no-verify", "-m", f"base: task {task.id}", env=env)


def _with_temp_index(ws: Workspace, *diff_args: str) -> str:
    """``git diff --cached`` of the working tree against the base, through a temporary index.

    With the kit's base repository at hand, git runs on ITS git folder (config, refs) with the clone
    as work tree and new objects written to a temporary folder: the clone's ``.git`` -- which the
    agent could delete, or rig with ``core.fsmonitor`` or filter commands git would run -- is not read.
    """
    env = git_env()
    with tempfile.TemporaryDirectory(prefix="orchbench-index-") as tmp:
        index = Path(tmp) / "index"
        if ws.base_git_dir is not None and ws.base_git_dir.is_dir():
            git_dir = ws.base_git_dir
            (Path(tmp) / "objects").mkdir()
            env.update(
                GIT_DIR=str(git_dir),
                GIT_WORK_TREE=str(ws.root),
                GIT_OBJECT_DIRECTORY=str(Path(tmp) / "objects"),
                GIT_ALTERNATE_OBJECT_DIRECTORIES=str(git_dir / "objects"),
            )
        else:
            real = ws.root / ".git" / "index"
            if real.exists():
                shutil.copyfile(real, index)  # a head start: only changed files get re-hashed
        env["GIT_INDEX_FILE"] = str(index)
        run_git(ws.root, "add", "-A", env=env)
        return run_git(
            ws.root,
            "diff",
            "--cached",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            *diff_args,
            ws.base_commit,
            env=env,
        )


def diff(ws: Workspace) -> str:
    """Unified diff from the base commit to the working tree, new untracked files included."""
    return _with_temp_index(ws, "--binary")


def diff_stats(ws: Workspace) -> tuple[int, int, int]:
    """(files touched, lines added, lines removed) since the base commit; binary files count 0 lines."""
    out = _with_temp_index(ws, "--numstat")
    files = added = removed = 0
    for line in out.splitlines():
        parts = line.split("\t", 2)
        if len(parts) < 3:
            continue
        files += 1
        added += int(parts[0]) if parts[0].isdigit() else 0
        removed += int(parts[1]) if parts[1].isdigit() else 0
    return files, added, removed
