"""Walking and removing file trees an agent may have made: any depth, any names, links and special
files, without recursion and without path names.

``shutil.rmtree`` and ``os.fwalk`` recurse once per folder level (a 2,500-deep chain raises
``RecursionError``) and ``os.walk`` builds path names (past 4,096 bytes they fail). :func:`visit`
goes folder by folder from descriptors (``dir_fd`` system calls, names only), holding a few
descriptors whatever the depth: it climbs back through ``..`` and checks each folder it reaches is
the one it left (device and inode), so a folder moved meanwhile stops the walk instead of leading it
elsewhere. No link is followed and no other file system is entered (a mount point inside the tree
is an error, never walked). :func:`remove_tree` empties and removes a tree this way; where the kit is
not root, a folder the agent made unreadable or unwritable is made so first (it is the kit user's).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

_KEEP_OPEN = 8  # descriptors held for the deepest levels; the ones above are reopened through ".."
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TreeChanged(OSError):
    """The tree changed under the walk (a folder moved), or it holds another file system."""


#: called for every entry (folders included, before their contents): (folder fd, name, lstat)
Visit = Callable[[int, str, os.stat_result], None]
#: called for every folder below the top after its contents: (parent fd, name)
Leave = Callable[[int, str], None]


def _open_dir(parent: int, name: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        if os.geteuid() == 0:
            raise
        os.chmod(name, 0o700, dir_fd=parent, follow_symlinks=False)  # the agent's chmod 000 (ours)
        return os.open(name, _DIR_FLAGS, dir_fd=parent)


def _entries(fd: int) -> list[os.DirEntry]:
    with os.scandir(fd) as it:
        return list(it)


class _Level:
    """One folder on the way down: its descriptor, identity and the subfolders still to enter."""

    def __init__(self, fd: int, name: str, ident: tuple[int, int], todo: list[str]) -> None:
        self.fd, self.name, self.ident, self.todo = fd, name, ident, todo


def visit(top: Path, on_entry: Visit | None = None, on_leave: Leave | None = None) -> None:
    """Walk the folder ``top`` depth first: ``on_entry`` for each entry below it (a folder before its
    contents), ``on_leave`` for each folder below it once its contents were visited. Nothing is
    followed; a link is an entry like any other."""
    top = Path(top)
    parent = os.open(top.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        visit_at(parent, top.name, on_entry, on_leave)
    finally:
        os.close(parent)


def visit_at(parent: int, name: str, on_entry: Visit | None = None, on_leave: Leave | None = None) -> None:
    """:func:`visit` of the folder ``name`` in the folder open as ``parent`` (not followed if a link)."""
    fd = _open_dir(parent, name)
    st = os.fstat(fd)
    levels = [_Level(fd, name, (st.st_dev, st.st_ino), [])]
    try:
        levels[0].todo = _scan(levels[0], on_entry)
        while levels:
            here = levels[-1]
            if here.todo:
                name = here.todo.pop()
                child = _open_dir(here.fd, name)
                cst = os.fstat(child)
                if cst.st_dev != here.ident[0]:
                    os.close(child)
                    raise TreeChanged(errno.EXDEV, f"{name!r} is another file system (a mount point)")
                level = _Level(child, name, (cst.st_dev, cst.st_ino), [])
                levels.append(level)
                if len(levels) > _KEEP_OPEN and levels[-_KEEP_OPEN - 1].fd >= 0:
                    os.close(levels[-_KEEP_OPEN - 1].fd)  # reopened through ".." on the way back
                    levels[-_KEEP_OPEN - 1].fd = -1
                level.todo = _scan(level, on_entry)
                continue
            levels.pop()
            if not levels:
                os.close(here.fd)
                break
            up = levels[-1]
            if up.fd < 0:  # closed on the way down: climb back through ".." and check it is the same
                up.fd = os.open("..", _DIR_FLAGS & ~os.O_NOFOLLOW, dir_fd=here.fd)
                ust = os.fstat(up.fd)
                if (ust.st_dev, ust.st_ino) != up.ident:
                    raise TreeChanged(errno.ESTALE, f"the folder above {here.name!r} moved during the walk")
            os.close(here.fd)
            here.fd = -1
            if on_leave is not None:
                on_leave(up.fd, here.name)
    finally:
        for level in levels:
            if level.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(level.fd)


def _scan(level: _Level, on_entry: Visit | None) -> list[str]:
    """Visit the entries of one folder; the names of its subfolders (to enter, last first)."""
    subdirs = []
    for entry in _entries(level.fd):
        st = entry.stat(follow_symlinks=False)
        if on_entry is not None:
            on_entry(level.fd, entry.name, st)
        if stat.S_ISDIR(st.st_mode):
            subdirs.append(entry.name)
    return subdirs


def _unlink(parent: int, name: str, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        return
    try:
        os.unlink(name, dir_fd=parent)
    except PermissionError:
        if os.geteuid() == 0:
            raise
        os.chmod(parent, 0o700)  # a folder the agent made unwritable (ours)
        os.unlink(name, dir_fd=parent)


def _rmdir(parent: int, name: str) -> None:
    try:
        os.rmdir(name, dir_fd=parent)
    except PermissionError:
        if os.geteuid() == 0:
            raise
        os.chmod(parent, 0o700)
        os.rmdir(name, dir_fd=parent)


def remove_tree(path: Path, missing_ok: bool = True) -> None:
    """Remove ``path`` and everything below it (a file or link: just it), whatever the agent made
    there. FileNotFoundError only when ``missing_ok`` is false; TreeChanged when the tree holds
    another file system (unmount it first) or changes under the walk."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    if not stat.S_ISDIR(st.st_mode):
        path.unlink()
        return
    if os.path.ismount(path):
        raise TreeChanged(errno.EBUSY, f"{path} is a mount point: unmount it first")
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        remove_at(parent, path.name)
    finally:
        os.close(parent)


def remove_at(parent: int, name: str) -> None:
    """Remove ``name`` in the folder open as ``parent``: a folder with everything below it (see
    :func:`remove_tree`), anything else just itself (a link is removed, not followed)."""
    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        _unlink(parent, name, st)
        return
    here = os.fstat(parent)
    if st.st_dev != here.st_dev:
        raise TreeChanged(errno.EXDEV, f"{name!r} is another file system (a mount point)")
    visit_at(parent, name, _unlink, _rmdir)
    _rmdir(parent, name)
