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
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kit.errors import TaskError
from kit.paths import results_root
from kit.sandbox.backends import sandbox_env
from kit.sandbox.commands import run_command

if TYPE_CHECKING:
    from kit.tasks.task import Task

#: Never copied into a clone (build litter of the task folder itself).
COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".git")
#: Written to .git/info/exclude: litter that running the tests creates must not show up in diffs,
#: nor the kit's own state in the clone (.pdca/: the pdca strategy's status file).
GIT_EXCLUDE = "__pycache__/\n*.pyc\n.pytest_cache/\n.ruff_cache/\n*.egg-info/\n.pdca/\n"

_FIXED_DATE = "2024-01-01T00:00:00+0000"
READY = ".orchbench-base-ready"  # marks a finished cached base (never committed)


def git_env() -> dict[str, str]:
    """An environment for the kit's own git calls: no user/system config, fixed identity and dates.
    Built from the sandbox's allow-list, not os.environ: whatever git runs never sees a key."""
    env = sandbox_env()
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="orchbench",
        GIT_AUTHOR_EMAIL="orchbench@localhost",
        GIT_COMMITTER_NAME="orchbench",
        GIT_COMMITTER_EMAIL="orchbench@localhost",
        GIT_AUTHOR_DATE=_FIXED_DATE,
        GIT_COMMITTER_DATE=_FIXED_DATE,
        GIT_TERMINAL_PROMPT="0",
    )
    return env


_GIT_OPTS = ["-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-c", "core.hooksPath=/dev/null"]
#: Repo-config keys that name a command git would run on the kit's side (clean/smudge filters on
#: `git add`, textconv on `git diff` ...). The agent's shell can write .git/config in its clone.
_COMMAND_KEYS = r"^(filter|diff|merge)\..*\.(clean|smudge|process|textconv|command|driver)$"


def git_safety_args(root: Path) -> list[str]:
    """``-c`` options that stop a clone's own config from making the kit's git calls run commands:
    no fsmonitor, no hooks, no pager, every filter / diff / merge driver command it names emptied
    (a textconv becomes ``cat``)
    (command-line ``-c`` beats the repo's config). Reading the config runs nothing."""
    names = subprocess.run(
        ["git", "config", "--name-only", "--get-regexp", _COMMAND_KEYS],
        cwd=root,
        env=git_env(),
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    args = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat"]
    for name in names:  # an empty textconv would fail the diff; `cat FILE` is the identity
        args += ["-c", f"{name}=cat" if name.endswith(".textconv") else f"{name}="]
    return args


def _git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", *_GIT_OPTS, *(git_safety_args(root) if (root / ".git").exists() else []), *args],
        cwd=root,
        env=env or git_env(),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise TaskError(f"git {' '.join(args)} failed in {root}: {proc.stderr.strip()}")
    return proc.stdout


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
    _git(dest.parent, "clone", "-q", "--local", "--template=", str(base), str(dest), env=env)
    _git(dest, "remote", "remove", "origin", env=env)
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
        if any(part in ("__pycache__", ".pytest_cache", ".git") for part in rel.parts):
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
    _git(dest, "init", "-q", "-b", "main", "--template=", env=env)
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text(GIT_EXCLUDE + READY + "\n", encoding="utf-8")
    _git(dest, "add", "-A", env=env)
    _git(dest, "commit", "-q", "--allow-empty", "--no-verify", "-m", f"base: task {task.id}", env=env)


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
        _git(ws.root, "add", "-A", env=env)
        return _git(
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
