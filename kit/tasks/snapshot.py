"""A snapshot of a clone, taken through the sandbox: after the agent's last step the clone is data.

The kit never reads the live clone from its own process: :func:`take` runs :data:`SCRIPT` (``python -I
-S``, the standard library only) in the run's sandbox as the sandbox user, with the clone bound
read-only and a fresh kit folder as its only writable place. The script walks the clone without
following links and copies into ``<folder>/tree``:

- regular files only (a symlink to a regular file inside the clone is copied as that file, as the
  scoring copy always did); FIFOs, sockets, devices, links pointing elsewhere are dropped;
- never ``.git`` (at any depth, any case), ``__pycache__``, ``.pytest_cache``, ``.ruff_cache``,
  compiled ``*.pyc`` / ``*.pyo``, nor ``.pdca/status`` (the pdca strategy's status folder);
- never a compiled extension module (:data:`BINARY_SUFFIXES`: ``*.so``, ``*.pyd`` ...), noted as
  dropped -- the tasks are pure Python, and one would be imported ahead of the ``.py`` it shadows;
- within caps: :class:`Limits` -- entry count, folder depth, path length, bytes per file (apparent
  *and* allocated size) and bytes in total (apparent size), taken breadth first (what is nearest the top of the clone is kept when a
  cap is reached: a vendored environment deep down goes first). Sparse files stay sparse (holes are skipped with ``SEEK_DATA`` /
  ``SEEK_HOLE``), so a huge sparse file costs nothing, and one over a cap is dropped, not densified;
- nothing the clone holds stops the walk: an entry that cannot be read or copied is noted and
  skipped, and once the entry cap is reached the rest is not even listed;
- what was dropped, and why, goes to ``<folder>/notes.json`` (at most :data:`MAX_NOTES` entries),
  which the kit reads with a size cap; it becomes ``Score.dropped_files``.

The diff (:func:`kit.tasks.workspace.snapshot_diff`), the scoring copy and the strategies' mid-run
diffs all work from a snapshot; nothing in it is a link, a special file or a git repository, so no
git configuration, hook, filter or nested repository of the agent's reaches the kit.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import TaskError
from kit.paths import IGNORED_DIRS, IGNORED_SUFFIXES, STRATEGY_FILES
from kit.records.schema import file_name
from kit.sandbox.backends import default_sandbox, get_sandbox, sandbox_env

#: Kit state kept in the clone, never part of the agent's work (the pdca strategy's status folder):
#: paths a task's repo/ may not hold (a base is refused one), so that a repository's other files
#: under ``.pdca/`` are files like any other. (The strategies' other working files are in every snapshot:
#: the agents read them, and the mid-run diffs show them; scoring sets them back: kit.paths.owned_paths.)
TOP_LEVEL_SKIP = (STRATEGY_FILES["pdca"]["status"],)
#: Compiled extension modules and shared libraries (the tasks are pure Python): one the agent built
#: would be imported ahead of its ``.py`` by the tests and never show in the diff, so it is dropped.
BINARY_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
MAX_NOTES = 200
MAX_LINKS = 2000  # links followed (each resolved: 2040-part targets cost ~12 ms each)
MAX_NOTES_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    files: int = 50_000  # regular files and folders
    file_bytes: int = 64 * 1024 * 1024
    total_bytes: int = 256 * 1024 * 1024
    depth: int = 48
    path_bytes: int = 1024  # a path (relative to the clone) longer than this is dropped
    timeout_s: float = 300.0


DEFAULT_LIMITS = Limits()

#: Run in the sandbox as ``python -I -S -c SCRIPT clone limits-json``, cwd = the kit's snapshot folder.
SCRIPT = r"""
import collections, json, os, stat, sys
src = sys.argv[1]
cfg = json.loads(sys.argv[2])
skip_dirs, skip_suffixes = set(cfg["skip_dirs"]), tuple(cfg["skip_suffixes"])
notes, count, total = [], 0, 0

def note(rel, why):
    if len(notes) < cfg["max_notes"]:  # a path is cut: 200 notes stay far below the kit's cap
        rel = rel if len(rel) <= 240 else rel[:120] + "..." + rel[-100:]
        notes.append(f"{rel}: {why}")
    elif len(notes) == cfg["max_notes"]:
        notes.append("... more dropped entries not listed")

def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]

def copy(fd, size, mode, dest):
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break  # only a hole is left
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            os.lseek(fd, start, os.SEEK_SET)
            os.lseek(out, start, os.SEEK_SET)
            left = end - start
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                write_all(out, chunk)
                left -= len(chunk)
            pos = max(end, start + 1)
        os.ftruncate(out, size)
    finally:
        os.close(out)

def take_file(path, rel, dest):
    global count, total
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        return note(rel, f"unreadable ({e.strerror})")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return note(rel, "not a regular file")
        size, allocated = st.st_size, st.st_blocks * 512
        if size > cfg["file_bytes"] or allocated > cfg["file_bytes"]:
            return note(rel, f"larger than {cfg['file_bytes']} bytes (size {size}, allocated {allocated})")
        if total + size > cfg["total_bytes"]:
            return note(rel, f"over the snapshot's total of {cfg['total_bytes']} bytes")
        if count >= cfg["files"]:
            return note(rel, f"over the snapshot's {cfg['files']} entries")
        count += 1
        total += size
        copy(fd, size, 0o755 if st.st_mode & 0o100 else 0o644, dest)
    except OSError as e:
        note(rel, f"could not be copied ({e.strerror})")
    finally:
        os.close(fd)

links = [0]

def resolved(path):
    # where a link leads, resolved by the kernel (at most 40 links, ELOOP past them), or None
    # (os.path.realpath recurses once per link in a chain: a chain of 1,500 raised RecursionError)
    if hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd"):
        try:
            fd = os.open(path, os.O_PATH)
        except OSError:
            return None
        try:
            return os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            return None
        finally:
            os.close(fd)
    try:
        return os.path.realpath(path)
    except (RecursionError, OSError, ValueError):
        return None

def link_target(path):
    links[0] += 1  # each is resolved (realpath): their number and length are bounded
    if links[0] > cfg["links"] or len(os.readlink(path)) > 1024:
        return None
    real = resolved(path)
    if real is None or not real.startswith("/"):  # "net:[4026531992]", "pipe:[..]": no file of the clone
        return None
    if os.path.commonpath([real, src]) != src or os.path.islink(real) or not os.path.isfile(real):
        return None
    return real

os.mkdir("tree")
queue = collections.deque([(src, "tree", 0)])  # breadth first: near the top is taken first
while queue:
    if count >= cfg["files"]:  # nothing more is taken: what is left is not even listed
        note(os.path.relpath(queue[0][0], src), f"and all that follows: over the snapshot's {cfg['files']} entries")
        break
    folder, out, depth = queue.popleft()
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        note(os.path.relpath(folder, src), f"folder unreadable ({e.strerror})")
        continue
    for entry in entries:
        if count >= cfg["files"]:
            note(os.path.relpath(entry.path, src), f"and the rest of its folder: over the snapshot's {cfg['files']} entries")
            break
        rel = os.path.relpath(entry.path, src)
        name = entry.name
        if name in skip_dirs or name.endswith(skip_suffixes) or rel in cfg["top_skip"]:
            continue
        if name.lower() == ".git":
            note(rel, "a name git reserves")
            continue
        if name.lower().endswith(tuple(cfg["binary_suffixes"])):
            note(rel, "compiled extension module: not scored")
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as e:
            note(rel, f"unreadable ({e.strerror})")
            continue
        target = os.path.join(out, name)
        if len(os.fsencode(rel)) > cfg["path_bytes"]:
            note(rel, f"path longer than {cfg['path_bytes']} bytes")
        elif stat.S_ISDIR(st.st_mode):
            if depth + 1 > cfg["depth"]:
                note(rel, f"folder nested deeper than {cfg['depth']} levels")
            else:
                try:
                    os.mkdir(target)
                except OSError as e:
                    note(rel, f"could not be copied ({e.strerror})")
                    continue
                count += 1
                queue.append((entry.path, target, depth + 1))
        elif stat.S_ISREG(st.st_mode):
            take_file(entry.path, rel, target)
        elif stat.S_ISLNK(st.st_mode):
            try:
                real = link_target(entry.path)
            except (OSError, ValueError, RecursionError):  # whatever a link leads to: never the snapshot's end
                real = None
            if real is None:
                note(rel, "symlink pointing outside the clone or to a folder, too long, or one too many")
            else:
                take_file(real, rel, target)
        else:
            kind = "FIFO" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode) else "device"
            note(rel, f"{kind}, not a regular file")
with open("notes.json.tmp", "w") as fh:
    json.dump({"files": count, "bytes": total, "dropped": notes}, fh)
os.rename("notes.json.tmp", "notes.json")
print("snapshot ok")
"""


@dataclass
class Snapshot:
    """The clone's files as the kit took them (``tree``, kit-owned) and what was left out."""

    tree: Path
    dropped: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0


def _read_notes(path: Path) -> dict:
    with open(path, "rb") as fh:
        raw = fh.read(MAX_NOTES_BYTES + 1)
    if len(raw) > MAX_NOTES_BYTES:
        raise TaskError(f"the snapshot's notes are larger than {MAX_NOTES_BYTES} bytes")
    data = json.loads(raw)
    if not isinstance(data, dict) or not isinstance(data.get("dropped"), list):
        raise TaskError("the snapshot's notes are not what the snapshot script writes")
    return data


def take(clone: Path, folder: Path, sandbox: str | None = None, limits: Limits = DEFAULT_LIMITS) -> Snapshot:
    """Snapshot ``clone`` into the empty kit folder ``folder`` through the sandbox called ``sandbox``
    (default: the platform's). TaskError when the snapshot could not be taken."""
    clone = Path(clone).resolve()
    if not clone.is_dir():
        raise TaskError(f"cannot snapshot {clone}: not a folder")
    cfg = {
        "files": limits.files,
        "file_bytes": limits.file_bytes,
        "total_bytes": limits.total_bytes,
        "depth": limits.depth,
        "path_bytes": limits.path_bytes,
        "max_notes": MAX_NOTES,
        "links": MAX_LINKS,
        "skip_dirs": list(IGNORED_DIRS),
        "skip_suffixes": list(IGNORED_SUFFIXES),
        "top_skip": list(TOP_LEVEL_SKIP),
        "binary_suffixes": list(BINARY_SUFFIXES),
    }
    argv = [sys.executable, "-I", "-S", "-c", SCRIPT, str(clone), json.dumps(cfg)]
    box = get_sandbox(sandbox or default_sandbox())
    res = box.run(
        argv, folder, writable=True, timeout_s=limits.timeout_s, env=sandbox_env(), ro_binds=[clone]
    )
    notes = folder / "notes.json"
    if res.timed_out or res.exit_code != 0 or notes.is_symlink() or not notes.is_file():
        why = "timed out" if res.timed_out else f"exit {res.exit_code}: {res.output.strip()[-500:]}"
        raise TaskError(f"the snapshot of {clone} failed ({why})")
    data = _read_notes(notes)
    tree = folder / "tree"
    if tree.is_symlink() or not tree.is_dir():
        raise TaskError(f"the snapshot of {clone} left no tree")
    dropped = [file_name(str(d))[:500] for d in data["dropped"][: MAX_NOTES + 1]]
    return Snapshot(
        tree=tree, dropped=dropped, files=int(data.get("files", 0)), bytes=int(data.get("bytes", 0))
    )


@contextlib.contextmanager
def snapshot(clone: Path, sandbox: str | None = None, limits: Limits = DEFAULT_LIMITS) -> Iterator[Snapshot]:
    """:func:`take` into a temporary kit folder, removed on exit."""
    folder = Path(
        tempfile.mkdtemp(prefix=f"orchbench-snapshot-{os.getpid()}-")
    )  # (pid: swept if the kit dies)
    try:
        yield take(clone, folder, sandbox, limits)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
