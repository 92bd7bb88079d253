"""The one check of a path the kit did not make itself -- a tree entry or ``git diff`` path of a
user's repository, a line of ``DELETED.txt``, a file of a task folder, a suite manifest's file names,
a path a scoring session reports -- before the kit reads, copies, writes or removes anything there.

A path is refused, named, when it is empty, absolute, holds a NUL or another control character (C0,
DEL, the C1 controls U+0080-U+009F with U+0085, and the line and paragraph separators U+2028 /
U+2029, which some readers take as line breaks), has
an empty, ``.`` or ``..`` segment, is longer than the file system takes (a name of 255 bytes, a
path of :data:`MAX_PATH_BYTES`), or -- joined to the folder it belongs to -- goes through a
symbolic link (a folder on its way, or the file itself unless the caller removes the link, not its
target) or resolves outside that folder. Both the importers and the task contract use it
(``kit.tasks`` < ``kit.importers``), so a repository or a task folder, hand-made ones included,
that carries such a path is refused before anything is done with it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePath

from kit.errors import TaskError

#: Longer paths are refused (the file system's limit is 4,096 bytes with the folder they join).
MAX_PATH_BYTES = 1024
_CONTROL = frozenset(chr(c) for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029))


def path_problem(rel: str | PurePath) -> str | None:
    """Why ``rel`` is no plain relative path (None when it is one): the checks that need no folder."""
    text = rel.as_posix() if isinstance(rel, PurePath) else rel
    if not isinstance(text, str) or not text:
        return "an empty path"
    if any(c in _CONTROL for c in text):
        return "a path holding a NUL or control character"
    if text.startswith("/"):
        return "an absolute path"
    if any(part in ("", ".", "..") for part in text.split("/")):
        return "a path with an empty, '.' or '..' segment"
    if len(text.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        return f"a path longer than {MAX_PATH_BYTES} bytes"
    if any(len(part.encode("utf-8", "surrogateescape")) > 255 for part in text.split("/")):
        return "a path with a name longer than 255 bytes"
    return None


def confined(root: Path, rel: str | PurePath, what: str = "path", *, leaf_link: bool = False) -> Path:
    """``root / rel`` once ``rel`` is shown to stay inside ``root`` (see the module docstring):
    no folder on the way from ``root`` is a symbolic link, nor ``rel`` itself unless ``leaf_link``
    (the caller removes the link, never its target), and the result resolves inside ``root``.
    ``what`` names where the path came from in the error (TaskError, the path shown escaped)."""
    problem = path_problem(rel)
    text = rel.as_posix() if isinstance(rel, PurePath) else str(rel)
    if problem is None:
        parts = text.split("/")
        here = Path(root)
        for i, part in enumerate(parts):
            here = here / part
            last = i == len(parts) - 1
            if here.is_symlink() and not (last and leaf_link):
                problem = "a path through a symbolic link" if not last else "a symbolic link"
                break
        else:
            real_root = os.path.realpath(root)
            real = os.path.realpath(here.parent if leaf_link else here)
            if real != real_root and not real.startswith(real_root + os.sep):
                problem = "a path that leads outside its folder"
    if problem is not None:
        shown = text if len(text) <= 200 else f"{text[:200]}... ({len(text):,} characters)"
        raise TaskError(
            f"{what} {shown!r} is {problem}: refused (it would reach outside {root})",
            "a repository or task folder that names such a path is not imported, validated or applied",
        )
    return Path(root) / text


#: The largest listing file the kit reads whole (``DELETED.txt``): a hostile task folder's 3 GB one
#: took ``kit tasks validate`` to 24 GB.
MAX_LISTING_BYTES = 1024 * 1024


def read_capped(path: Path, what: str, limit: int = MAX_LISTING_BYTES) -> str:
    """The UTF-8 text of ``path``, refused (one :class:`TaskError` naming ``what``) when it is over
    ``limit`` bytes or not UTF-8 -- its size is read before its text."""
    size = path.stat().st_size
    if size > limit:
        raise TaskError(f"{what} is {size:,} bytes (at most {limit:,}): refused")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise TaskError(f"{what} is not UTF-8 (byte {e.start:,}): refused") from None


def special_file(folder: Path, rel: Path, what: str) -> None:
    """Refuse (TaskError naming it, ``what`` first) ``folder/rel`` when it is neither a file, a folder
    nor a symbolic link: a named pipe would block a copy or a read, a device would read the host's."""
    mode = os.lstat(folder / rel).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
        kind = "a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise TaskError(
            f"{what}: {folder.name}/{rel.as_posix()} is {kind}, not a file: refused (a task "
            "folder holds only files, folders and symbolic links: remove it)"
        )


def link_problem(root: Path, rel: Path, what: str) -> None:
    """Refuse (TaskError, ``what`` first) the symbolic link ``root/rel`` unless following it -- each
    link on the way resolved in turn, as the OS does, but inside ``root`` only -- never leaves
    ``root``: an absolute target, a ``..`` above ``root`` (also after a link to ``.``: ``here/..``),
    or more than 40 links (a loop) is refused. The folder is copied and renamed (the base, every
    clone, scoring's copy), so a link that leaves it and comes back in through its name breaks, or
    reads the host (attack rounds 39e, 39f); a link to nothing inside is allowed."""
    target = os.readlink(Path(root, rel))
    todo, stack, hops = [*rel.parent.parts, *target.split("/")], [], 0
    inside = not os.path.isabs(target)
    while todo and inside:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            inside = bool(stack)
            stack = stack[:-1]
            continue
        stack.append(part)
        here = Path(root, *stack)
        if here.is_symlink():
            hops, step = hops + 1, os.readlink(here)
            inside = hops <= 40 and not os.path.isabs(step)
            todo, stack = [*step.split("/"), *todo], stack[:-1]
    if not inside:
        raise TaskError(f"{what} is a symbolic link to {target[:200]!r}, leading outside its folder: refused")
