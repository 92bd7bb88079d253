"""The base commit's tree for scoring: read from the kit's cached base repository only (never from the
clone, whose ``.git`` the agent may have rewritten), and kept for the process after the first scoring.

Every scoring reads the base's tree (its test side for the own-tests session, its code to tell the
agent's from the base's). Extracting it was a third of a second of each scoring of tomlkit-0-15-1
(git's archive, unpacked by :mod:`tarfile`), before any session could start. A scoring that only
reads it (:func:`base_tree` with ``private`` None) now gets one extraction per base commit and
process, shared; a scoring that runs the base's own tests in it (the first of a task: its sessions
write there) gets a copy of its own, as before. The kept trees live in a kit-owned temporary folder
(``orchbench-base-<pid>-...``, swept with the others if the process dies); no sandbox writes there.
At most :data:`KEEP` are kept: the least recently used one not in use goes first.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import tarfile
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from kit.errors import TaskError
from kit.tasks.git import PLAIN_ATTRIBUTES, git_env, git_stream, safety_env
from kit.tasks.workspace import Workspace

#: base trees kept per process (a real-repos experiment scores one task's runs after another)
KEEP = 4
PREFIX = "orchbench-base-"


class _Kept:
    def __init__(self, path: Path) -> None:
        self.path, self.users = path, 0


_LOCK = threading.Lock()
_KEPT: OrderedDict[tuple[str, str], _Kept] = OrderedDict()
_ROOT: list[Path] = []


@contextlib.contextmanager
def base_tree(ws: Workspace, private: Path | None = None) -> Iterator[Path]:
    """The base commit's tree: extracted into ``private`` (a folder the caller may write in), or the
    process's shared copy (``private`` None: read it, never write it)."""
    if private is not None:
        extract_commit(ws, private)
        yield private
        return
    key = (str(ws.base_git_dir), ws.base_commit)
    with _LOCK:
        kept = _KEPT.get(key)
        if kept is not None:
            kept.users += 1
            _KEPT.move_to_end(key)
    if kept is None:
        path = _root() / secrets.token_hex(8)
        try:  # (outside the lock: two scorings may extract at once; one copy stays)
            extract_commit(ws, path)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        with _LOCK:
            kept = _KEPT.get(key)
            if kept is None:
                kept = _KEPT[key] = _Kept(path)
            else:
                shutil.rmtree(path, ignore_errors=True)
            kept.users += 1
    try:
        yield kept.path
    finally:
        with _LOCK:
            kept.users -= 1
            _evict()


def forget() -> None:
    """Remove the kept trees not in use (the tests; and at exit)."""
    with _LOCK:
        for key in [k for k, v in _KEPT.items() if v.users == 0]:
            shutil.rmtree(_KEPT.pop(key).path, ignore_errors=True)


def _evict() -> None:
    for key in [k for k, v in _KEPT.items() if v.users == 0][: max(0, len(_KEPT) - KEEP)]:
        shutil.rmtree(_KEPT.pop(key).path, ignore_errors=True)


def _root() -> Path:
    with _LOCK:
        if not _ROOT:
            _ROOT.append(Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")))  # (pid: swept if it dies)
            atexit.register(_remove_root)
        return _ROOT[0]


def _remove_root() -> None:
    forget()
    if _ROOT:
        shutil.rmtree(_ROOT[0], ignore_errors=True)


def extract_commit(ws: Workspace, dest: Path) -> None:
    """The base commit's tree into ``dest``, from the kit's cached base repository only."""
    git_dirs = [d for d in (ws.base_git_dir,) if d is not None and d.is_dir()]
    last = "no git folder holds it"
    for git_dir in git_dirs:  # streamed: a tree of up to 256 MB is never held in memory
        _plain_archive(git_dir)
        env = git_env() | {"GIT_DIR": str(git_dir)} | safety_env(git_dir)
        try:
            with git_stream(git_dir.parent, "archive", "--format=tar", ws.base_commit, env=env) as out:
                dest.mkdir(parents=True, exist_ok=True)
                with tarfile.open(fileobj=out, mode="r|") as tar:
                    tar.extractall(dest, filter="data")
                while out.read(1 << 16):  # the archive's padding after its end: unread, git died of SIGPIPE
                    pass
            return
        except (TaskError, tarfile.TarError) as e:
            last = str(e)
    raise RuntimeError(f"cannot read the base commit {ws.base_commit[:12]}: {last}")


def _plain_archive(git_dir: Path) -> None:
    info = git_dir / "info" / "attributes"
    if not info.is_file() or info.read_text(encoding="utf-8") != PLAIN_ATTRIBUTES:
        info.parent.mkdir(parents=True, exist_ok=True)
        tmp = info.with_name(f"attributes.{threading.get_ident()}")
        tmp.write_text(PLAIN_ATTRIBUTES, encoding="utf-8")
        tmp.replace(info)
