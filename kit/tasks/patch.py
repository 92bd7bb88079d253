"""The diff of a snapshot against the base commit, capped: what the kit keeps of a patch never grows
with what the agent wrote.

``git diff --binary`` of 160 MB of random files is a 206 MB patch; read whole, the kit's process grew
by 0.7 GB to hold and redact it. :func:`capped_patch` streams git's output and keeps each file's
patch whole or not at all, in git's order: a file whose own patch is over
:data:`MAX_FILE_PATCH_BYTES`, or that would take the patch past :data:`MAX_PATCH_BYTES`, is left out
(a smaller one after it may still fit) and listed -- its path, its new blob id (so a change to a
left-out file still changes the listing) and why. The kit holds at most one file's allowance and
1 MB of git's output on top of the patch it keeps.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from kit.errors import TaskError
from kit.tasks.git import GIT_OPTS, GIT_TIMEOUT_S

if TYPE_CHECKING:
    from kit.tasks.snapshot import Snapshot
    from kit.tasks.workspace import Workspace

MAX_PATCH_BYTES = 8 * 2**20
MAX_FILE_PATCH_BYTES = 2 * 2**20
MAX_LISTED = 200  # left-out files listed by name; the rest are counted
_BASE = ["diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames"]


@dataclass
class Patch:
    """A capped patch: ``data`` (whole file patches only) and the files left out of it."""

    data: bytes
    omitted: list[str] = field(default_factory=list)  # "path (blob 1234567): why", at most MAX_LISTED + 1
    omitted_count: int = 0

    def with_trailer(self) -> bytes:
        """``data`` followed by a ``#`` comment listing what was left out (git apply skips it)."""
        if not self.omitted_count:
            return self.data
        lines = [f"# orchbench: {self.omitted_count} file(s) left out of this diff (over its caps):"]
        lines += [f"#   {entry}" for entry in self.omitted]
        return self.data + ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")


def _changed_files(raw: bytes) -> list[tuple[str, str]]:
    """(path, new blob id) of each file of ``git diff --raw -z`` output, in git's order."""
    fields = raw.split(b"\0")
    out = []
    for i in range(0, len(fields) - 1, 2):
        meta, path = fields[i].split(), fields[i + 1]
        blob = meta[3].decode()[:12] if len(meta) > 3 else "?"
        out.append((path.decode("utf-8", "surrogateescape"), blob))
    return out


_MARK = b"\ndiff --git "  # a file's section starts at a line beginning "diff --git " (no hunk line does)


class _Section:
    """One file's section as it streams in: kept while it stays within ``cap`` bytes."""

    def __init__(self, cap: int) -> None:
        self.cap, self.size, self.data = cap, 0, bytearray()

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size <= self.cap:
            self.data += piece
        elif self.data:
            self.data = bytearray()  # over the cap: nothing more of it is kept


def _sections(stream: IO[bytes], cap: int) -> Iterator[tuple[bytes | None, int]]:
    """The file sections of a patch as they come, in pieces of 1 MB: (the section, or None when
    over ``cap`` bytes; its size)."""
    pending, section = b"\n", None  # a newline before the first header makes every header a _MARK
    while True:
        chunk = stream.read(1 << 20)
        data = pending + chunk
        end = len(data) - (len(_MARK) - 1) if chunk else len(data)  # a mark cut in two waits
        pos = 0
        while (i := data.find(_MARK, pos)) != -1 and i < end:
            if section is not None:
                section.add(data[pos : i + 1])
                yield (bytes(section.data) if section.size <= cap else None), section.size
            section, pos = _Section(cap), i + 1
        if section is not None:
            section.add(data[pos:end])
        pending = data[end:]
        if not chunk:
            break
    if section is not None:
        yield (bytes(section.data) if section.size <= cap else None), section.size


def capped_patch(
    ws: Workspace,
    snap: Snapshot,
    max_bytes: int = MAX_PATCH_BYTES,
    max_file_bytes: int = MAX_FILE_PATCH_BYTES,
) -> Patch:
    """``git diff --binary`` of the snapshot against the base (:func:`kit.tasks.workspace.snapshot_diff`'s
    git folder), capped as the module says. TaskError when git fails."""
    from kit.tasks.workspace import DIFF_OPTS, snapshot_diff, snapshot_env

    files = _changed_files(snapshot_diff(ws, snap, "--raw", "-z", "--no-renames"))
    env = snapshot_env(ws, snap)
    argv = ["git", *GIT_OPTS, *DIFF_OPTS, *_BASE, "--binary", ws.base_commit]
    patch = Patch(b"")
    kept: list[bytes] = []
    total = 0
    proc = subprocess.Popen(argv, cwd=snap.tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    timer = _kill_after(proc, GIT_TIMEOUT_S)
    try:
        assert proc.stdout is not None
        for i, (section, size) in enumerate(_sections(proc.stdout, max_file_bytes)):
            path, blob = files[i] if i < len(files) else ("?", "?")
            if section is None:
                _omit(patch, path, blob, f"its patch is {size} bytes, over {max_file_bytes}")
            elif total + size > max_bytes:
                _omit(patch, path, blob, f"{size} bytes more would pass the diff's {max_bytes}")
            else:
                kept.append(section)
                total += size
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        timer.cancel()
    if proc.returncode != 0:
        late = f"took longer than {GIT_TIMEOUT_S:g} s" if proc.returncode < 0 else f"exit {proc.returncode}"
        raise TaskError(f"git diff on a snapshot failed ({late})")
    patch.data = b"".join(kept)
    return patch


def _omit(patch: Patch, path: str, blob: str, why: str) -> None:
    patch.omitted_count += 1
    if len(patch.omitted) < MAX_LISTED:
        shown = path if len(path) <= 300 else path[:150] + "..." + path[-100:]
        patch.omitted.append(f"{shown!r} (blob {blob}): {why}")
    elif len(patch.omitted) == MAX_LISTED:
        patch.omitted.append("... more files left out, not listed")


def _kill_after(proc: subprocess.Popen, seconds: float) -> threading.Timer:
    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()

    timer = threading.Timer(seconds, kill)
    timer.daemon = True
    timer.start()
    return timer
