"""File access for the agent's tools that an agent cannot turn against the kit.

- Only regular files are read or written: a FIFO, device or socket is refused after ``fstat`` on the
  opened descriptor (opened ``O_NONBLOCK``, so opening a FIFO cannot hang), never followed.
- Writes, creations and deletions walk the path one component at a time from a descriptor of the
  clone's root with ``O_NOFOLLOW``: a symlink swapped in after the kit checked the path fails the
  call instead of redirecting it outside the clone. Callers pass the already-resolved relative path.
- What the kit creates in the clone belongs to whoever owns the folder it is made in (the sandbox
  user: :func:`kit.sandbox.base.hand_over`), so the agent's shell can still change it.
- Every walk and read checks a :class:`Deadline`; searching (where Python's ``re`` holds the GIL and a
  catastrophic pattern cannot be interrupted) runs in a separate, killable process -- see ``SEARCH``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from kit import trees


class NotRegular(OSError):
    """The path is not a regular file (FIFO, device, socket, folder), or too large to load whole."""


class TimeUp(Exception):
    """A tool call ran past its time limit."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise TimeUp(f"took longer than {self.seconds:g} s")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _own_like(fd: int, parent: int) -> None:
    """Give what the kit (as root) just made -- ``fd`` -- to the owner of the folder ``parent``."""
    if os.geteuid() != 0:
        return
    owner, st = os.fstat(parent), os.fstat(fd)
    if st.st_uid == 0 and (owner.st_uid, owner.st_gid) != (st.st_uid, st.st_gid):
        os.fchown(fd, owner.st_uid, owner.st_gid)


def open_dir(root: Path, rel_parts: tuple[str, ...], *, create: bool = False) -> int:
    """A descriptor of ``root/rel_parts`` reached without following any symlink (made if ``create``,
    owned like the folder it is made in)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in rel_parts:
            made = False
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                    made = True
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            if made:
                _own_like(nxt, fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_regular(root: Path, rel: Path, flags: int, *, create_parents: bool = False) -> int:
    parent = open_dir(root, rel.parts[:-1], create=create_parents)
    try:
        fd = os.open(rel.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=parent)
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise NotRegular(f"{rel.as_posix()} is {_kind(mode)}; only regular files are read or written")
        if flags & os.O_CREAT:
            _own_like(fd, parent)
    finally:
        os.close(parent)
    return fd


def open_read(root: Path, rel: Path):
    """A binary reader of the regular file ``root/rel`` (no symlink followed on the way)."""
    return os.fdopen(_open_regular(root, rel, os.O_RDONLY), "rb")


#: Files larger than this are not loaded whole (edit_file, replace_definitions); read_file pages.
MAX_WHOLE_BYTES = 20 * 1024 * 1024


def read_text(root: Path, rel: Path, max_bytes: int = MAX_WHOLE_BYTES) -> str:
    with open_read(root, rel) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise NotRegular(f"{rel.as_posix()} is {size} bytes; files over {max_bytes} are not edited whole")
        return fh.read(max_bytes + 1).decode("utf-8", "replace")


def write_text(root: Path, rel: Path, text: str, *, append: bool = False) -> None:
    """Create or overwrite (or append to) the regular file ``root/rel`` (parent folders made),
    race-free."""
    fd = _open_regular(
        root, rel, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0), create_parents=True
    )
    with os.fdopen(fd, "wb") as fh:
        if not append:
            fh.truncate(0)
        fh.write(text.encode("utf-8"))


def unlink(root: Path, rel: Path) -> None:
    """Delete ``root/rel`` itself (a symlink is removed, not followed); folders are refused."""
    parent = open_dir(root, rel.parts[:-1])
    try:
        mode = os.stat(rel.name, dir_fd=parent, follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"{rel.as_posix()} is a folder; delete the files in it")
        os.unlink(rel.name, dir_fd=parent)
    finally:
        os.close(parent)


def remove(root: Path, rel: Path) -> None:
    """Delete ``root/rel`` whatever it is -- a folder with all it holds too, by
    :func:`kit.trees.remove_at` (descriptors only, no link followed, any depth) -- where the agent
    left something in the place of a file the kit writes; nothing there is fine."""
    try:
        parent = open_dir(root, rel.parts[:-1])
    except FileNotFoundError:
        return
    try:
        trees.remove_at(parent, rel.name)
    except FileNotFoundError:
        pass
    finally:
        os.close(parent)


def walk(base: Path, deadline: Deadline) -> Iterator[Path]:
    """Every entry under ``base`` (files, symlinks, pipes ...; not folders), sorted, skipping .git;
    symlinked folders are not entered."""
    if not base.is_dir() or base.is_symlink():
        yield base
        return
    stack = [base]
    while stack:
        deadline.check()
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != ".git":
                    subdirs.append(Path(entry.path))
            else:
                yield Path(entry.path)
        stack.extend(reversed(subdirs))


#: The search tool's body, run as ``python -I -S -c SEARCH pattern base regex limit`` in the run's
#: sandbox with the clone read-only: the kit can kill it on timeout, and it can see nothing else.
#: Exit 2 with a message on an invalid regex. Regular files only, no symlinks, binary files skipped.
SEARCH = r"""
import os, re, stat, sys
pattern, base, regex, limit = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
if regex:
    try:
        match = re.compile(pattern).search
    except (re.error, OverflowError, RecursionError) as e:
        print(f"invalid regex {pattern!r}: {e}")
        sys.exit(2)
else:
    match = lambda line: pattern in line
def files(base):
    if not os.path.isdir(base) or os.path.islink(base):
        yield base
        return
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for fn in sorted(filenames):
            yield os.path.join(dirpath, fn)
size = dropped = 0
for path in files(base):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        continue
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or b"\0" in fh.read(8192):
            continue
        fh.seek(0)
        rel = os.path.relpath(path, ".")
        for i, raw in enumerate(fh, 1):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if match(line):
                entry = f"{rel}:{i}: {line[:300]}"
                if size + len(entry) > limit:
                    dropped += 1
                else:
                    sys.stdout.write(entry + "\n")
                    size += len(entry) + 1
if dropped:
    print(f"[... {dropped} more matches not shown; narrow the pattern or path ...]")
"""
