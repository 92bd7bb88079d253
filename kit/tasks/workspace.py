"""A fresh git repository per run: the task's ``repo/`` committed as the base commit.

Only ``repo/`` is copied: the acceptance tests and the reference solution never enter the clone.
The base commit is built with a fixed author, committer and date, so the same task always gives the
same base commit id. A clone shares nothing with the cached base or another run (its objects are
copied, not hard-linked) and belongs to the sandbox user (:func:`kit.sandbox.base.hand_over`).

:func:`diff` (and :mod:`kit.scoring.diffstats`) compare a snapshot of the clone (:mod:`kit.tasks.snapshot`:
regular files only, taken through the sandbox) with the base commit, in a git folder of the kit's
own that borrows the cached base's objects (:mod:`kit.tasks.patch`): no git runs in the clone, and
nothing of the clone's ``.git`` is read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kit.config import default_sandbox
from kit.errors import TaskError
from kit.paths import IGNORED_DIRS, IGNORED_SUFFIXES, is_ignored, results_root
from kit.sandbox.base import hand_over
from kit.sandbox.commands import run_command
from kit.tasks.git import PLAIN_ATTRIBUTES, git, git_env, run_git
from kit.tasks.patch import DIFF_OPTS, capped_patch, snapshot_diff, snapshot_env  # noqa: F401 - re-exported
from kit.tasks.snapshot import TOP_LEVEL_SKIP, snapshot
from kit.untrusted.confine import link_problem, special_file

if TYPE_CHECKING:
    from kit.tasks.task import Task

#: Never copied into a clone (build litter of the task folder itself): the kit's one ignore list.
COPY_IGNORE = shutil.ignore_patterns(*IGNORED_DIRS, *(f"*{s}" for s in IGNORED_SUFFIXES))
#: Written to .git/info/exclude: litter that running the tests creates must not show up in diffs,
#: nor the kit's own state in the clone (the pdca strategy's status folder, a name repo/ may not hold).
GIT_EXCLUDE = "".join(
    [*(f"{d}/\n" for d in IGNORED_DIRS if d != ".git"), *(f"*{s}\n" for s in IGNORED_SUFFIXES)]
) + "".join(f"/{name}/\n" for name in TOP_LEVEL_SKIP)

READY = Path(".git", "orchbench-base-ready")  # marks a finished cached base (in .git: no repo/ name)


@dataclass
class Workspace:
    root: Path
    base_commit: str
    #: The kit's cached base repository's git folder (the agent cannot touch it): diffs and scoring
    #: read the base from here, so a deleted or rigged ``.git`` in the clone changes nothing.
    base_git_dir: Path | None = None
    #: The sandbox backend the clone's snapshots are taken through (None: the platform's default).
    sandbox: str | None = None


def create_workspace(task: Task, dest: Path, sandbox: str | None = None) -> Workspace:
    """A fresh clone of the task's base repository at ``dest`` (missing or empty), owned by the
    sandbox user; ``sandbox``: the backend its snapshots are taken through.

    The base (``repo/`` copied, ``task.setup`` run, committed) is built once per task content and
    kept under ``<results>/.cache/bases/``; each workspace is a local clone of it with its own copy of
    every object (``--no-hardlinks``: an object rewritten in place in a clone changes no other run,
    nor the base scoring reads), with no remote left behind.
    """
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise TaskError(f"workspace folder {dest} already exists and is not empty")
    dest.parent.mkdir(parents=True, exist_ok=True)  # (an empty dest stays: it may be a quota mount)
    base = base_repository(task)
    env = git_env()
    clone = ["clone", "-q", "-n", "--local", "--no-hardlinks", "--template=", str(base), str(dest)]
    run_git(dest.parent, *clone, env=env)
    run_git(dest, "remote", "remove", "origin", env=env)
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text(GIT_EXCLUDE, encoding="utf-8")
    (dest / ".git" / "info" / "attributes").write_text(PLAIN_ATTRIBUTES, encoding="utf-8")
    run_git(dest, "checkout", "-q", "main", env=env)  # (after the attributes: no eol/ident conversion)
    hand_over(dest)
    commit = (base / ".git" / "refs" / "heads" / "main").read_text(encoding="utf-8").strip()
    return Workspace(root=dest, base_commit=commit, base_git_dir=base / ".git", sandbox=sandbox)


_bases_lock = threading.Lock()


def base_repository(task: Task) -> Path:
    """The cached base repository of ``task``, built on first use, keyed by the task id, its setup and
    every repo/ file's path, executable bit and bytes, and every link's path and target (never sizes
    and times, which a copy keeps across an edit; a link is never followed)."""
    digest = hashlib.sha256(json.dumps([task.setup, GIT_EXCLUDE, 2]).encode())  # new excludes: new base
    for path in sorted(p for p in task.repo_dir.rglob("*") if p.is_symlink() or p.is_file()):
        rel = path.relative_to(task.repo_dir)
        if is_ignored(rel):
            continue
        if path.is_symlink():  # (copied as the link it is: its target is what the base holds)
            digest.update(os.fsencode(rel) + b"\0L" + os.fsencode(os.readlink(path)) + b"\0")
            continue
        with open(path, "rb") as f:  # each file's bytes (read in chunks): any edit gives a new base
            mode = b"x" if os.fstat(f.fileno()).st_mode & 0o100 else b"-"  # (git keeps the bit)
            digest.update(os.fsencode(rel) + b"\0" + mode + hashlib.file_digest(f, "sha256").digest())
    folder = results_root() / ".cache" / "bases" / f"{task.id}-{digest.hexdigest()[:16]}"
    if (folder / READY).exists():
        return folder
    with _bases_lock:
        if (folder / READY).exists():
            return folder
        tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        if tmp.exists():
            shutil.rmtree(tmp)
        try:
            _build_base(task, tmp)
            (tmp / READY).write_text("ok\n", encoding="utf-8")
        except BaseException:  # nothing half-built is left in the cache
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            os.replace(tmp, folder)
        except OSError:  # another process built it first
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _build_base(task: Task, dest: Path) -> None:
    """Copy ``task.repo_dir`` to ``dest``, run ``task.setup`` there (sandboxed: hostile input), commit it
    (fixed identity, date: same content, same id). A FIFO/socket/device in repo/ is refused (:func:`kit.untrusted.confine.special_file`)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    for path in task.repo_dir.rglob("*"):
        special_file(task.repo_dir, path.relative_to(task.repo_dir), f"task {task.id!r}")
    for name in (n for n in TOP_LEVEL_SKIP if os.path.lexists(task.repo_dir / n)):  # the kit's state
        raise TaskError(f"task {task.id!r}: repo/{name} is a name the kit reserves in clones: rename it")
    shutil.copytree(task.repo_dir, dest, symlinks=True, ignore=COPY_IGNORE)
    for command in task.setup:  # the task folder's own commands: hostile input, sandboxed like an agent's
        res = run_command(command, dest, task.limits.command_timeout_s, sandbox=default_sandbox())
        if res.timed_out or res.exit_code != 0:
            raise TaskError(f"task {task.id!r}: setup command {command!r} failed:\n{res.output[-2000:]}")
    for link in [p for p in dest.rglob("*") if p.is_symlink()] if task.setup else []:  # made by setup
        link_problem(dest, link.relative_to(dest), f"task {task.id!r}: setup made {link.relative_to(dest)}")
    env = git_env()
    run_git(dest, "init", "-q", "-b", "main", "--template=", env=env)
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text(GIT_EXCLUDE, encoding="utf-8")
    (dest / ".git" / "info" / "attributes").write_text(PLAIN_ATTRIBUTES, encoding="utf-8")  # bytes as is
    run_git(dest, "add", "-A", env=env)
    hidden = run_git(dest, "ls-files", "-z", "-o", "-i", "--exclude-per-directory=.gitignore", env=env)
    kept = [
        p for p in hidden.split("\0") if p and not is_ignored(Path(p))
    ]  # repo/'s .gitignore hides nothing
    if kept:  # (literal: a name like ':!x' is a name, not a pattern)
        add = ["add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"]
        git(dest, *add, input="\0".join(kept), env=env | {"GIT_LITERAL_PATHSPECS": "1"})
    run_git(dest, "commit", "-q", "--allow-empty", "--no-verify", "-m", f"base: task {task.id}", env=env)


def diff(ws: Workspace) -> str:
    """Unified diff from the base commit to the clone as it is now (a fresh snapshot), new untracked
    and ignored files included, capped (:func:`kit.tasks.patch.capped_patch`: what was left out is
    listed at its end); bytes that are not UTF-8 are replaced."""
    with snapshot(ws.root, ws.sandbox) as snap:
        return capped_patch(ws, snap).with_trailer().decode("utf-8", "replace")
