"""Lines changed since the base commit: (files touched, lines added, lines removed, files counted
whole) from a snapshot of the clone (:mod:`kit.tasks.snapshot`), as every score records them.

The kit counts the lines itself, so that the number moves with the content only, never with how the
agent chose to write the same bytes. ``git diff --numstat`` was that number and could be moved: it
counts LF-ended lines only (a 406-line module written with CR line ends, which Python reads as
406 lines, was one line), and it calls a file with a NUL byte in its first 8,000 bytes binary and
counts it 0 added, 0 removed (one NUL byte in front of a 500-line rewrite of a data file hid it).

- **Which files**: the files of the patch (``git diff --raw --no-renames`` of the snapshot against
  the base: added, deleted and changed files, a mode change included), each a file touched -- but
  the strategies' own working files (:func:`kit.paths.owned_paths`: linear's ``PLAN.md``, harness's
  ``feature_list.json`` ...), which the score leaves out as scoring's copy holds them as at the base:
  whatever strategy ran, its bookkeeping is no line of the agent's work.
- **A line** ends at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (what Python's own reader takes as a line
  end); its end is part of it (a line whose end changed from ``\\n`` to ``\\r\\n`` is a line
  changed). A line longer than :data:`MAX_LINE_BYTES` counts as one line per
  :data:`MAX_LINE_BYTES` bytes, so a file without line ends -- minified, or binary -- counts by its
  size, not as one line. Every file is counted so, whatever its bytes: a NUL makes no file binary
  here (random binary content has a line end every 128 bytes or so; it is counted by the same rule).
- **Lines added / removed**: git's own line diff (``git diff --no-index --numstat``: the same
  algorithm as the patch's) of the two sides rewritten one line to a line of text -- each line end
  and each NUL spelled out as two-byte escapes (``\\x01`` escaped too, so no two different files
  look alike), and a cut long line marked -- so git sees text it counts line for line.
- **Bounded**: both sides are read from git (``cat-file --batch``), one at a time. A side over
  :data:`MAX_SIDE_BYTES` is never held whole: it is read in 1 MB chunks and every one of its lines
  counts (added for the new side, removed for the old), its path listed in
  ``Score.lines_counted_whole``; its lines are counted as its line ends plus one per
  :data:`MAX_LINE_BYTES` bytes, plus one. The diff runs outside any repository (no attributes,
  drivers or config of anyone's).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from typing import IO

from kit.errors import TaskError
from kit.paths import is_owned
from kit.tasks.git import GIT_OPTS, GIT_TIMEOUT_S, git_env
from kit.tasks.patch import DIFF_OPTS, snapshot_diff, snapshot_env
from kit.tasks.snapshot import Snapshot, snapshot
from kit.tasks.workspace import Workspace

MAX_LINE_BYTES = 256
MAX_SIDE_BYTES = 8 * 2**20
_EMPTY = "0" * 40
_UNIT = rb"(?:\x01[\x01-\x04]|[^\x01\n])"  # an escaped byte pair or one plain byte of a line
_LONG = re.compile(_UNIT + b"{%d}(?=[^\\n])" % MAX_LINE_BYTES)


@dataclass
class LineStats:
    files: int = 0
    added: int = 0
    removed: int = 0
    counted_whole: list[str] = field(default_factory=list)  # a side over MAX_SIDE_BYTES


def as_lines(data: bytes) -> bytes:
    """``data`` as text git counts line for line: ``\\x01`` and NUL escaped, every line end (``\\r\\n``,
    a lone ``\\r``) spelled out before a ``\\n``, a line cut every :data:`MAX_LINE_BYTES` bytes."""
    data = data.replace(b"\x01", b"\x01\x01").replace(b"\0", b"\x01\x02")
    data = data.replace(b"\r\n", b"\x01\x03\n").replace(b"\r", b"\x01\x04\n")
    lines = data.split(b"\n")  # (the cut within each long line alone: over the whole text, the
    # pattern was tried from every byte of every short line -- a third of a second of tomlkit's scorings)
    if any(len(line) > MAX_LINE_BYTES for line in lines):
        data = b"\n".join(_cut(line) if len(line) > MAX_LINE_BYTES else line for line in lines)
    return data


def _cut(line: bytes) -> bytes:
    return _LONG.sub(lambda m: m.group(0) + b"\x01\x05\n", line)  # escaped pairs are never cut


def _count_whole(out: IO[bytes], size: int) -> int:
    """The lines of a side over :data:`MAX_SIDE_BYTES`, read in chunks (an upper bound)."""
    ends, left = 0, size
    while left > 0:
        chunk = out.read(min(left, 1 << 20))
        if not chunk:
            raise TaskError("git cat-file ended early")
        ends += chunk.count(b"\n") + chunk.count(b"\r") - chunk.count(b"\r\n")
        left -= len(chunk)
    return ends + size // MAX_LINE_BYTES + 1


def _changed(raw: bytes) -> list[tuple[str, str, str]]:
    """(old blob, new blob, path) of each file of ``git diff --raw -z --no-abbrev`` output."""
    fields = raw.split(b"\0")
    out = []
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].split()  # :old-mode new-mode old-blob new-blob status
        if len(meta) < 5:
            raise TaskError(f"git diff --raw gave {fields[i][:200]!r}")
        out.append((meta[2].decode(), meta[3].decode(), fields[i + 1].decode("utf-8", "surrogateescape")))
    return out


def line_stats(ws: Workspace, snap: Snapshot, own_files: tuple[str, ...] = ()) -> LineStats:
    """The lines changed from the base to the snapshot, counted as the module says; a file at or under
    one of ``own_files`` (:func:`kit.paths.owned_paths`) is not counted."""
    raw = snapshot_diff(ws, snap, "--raw", "-z", "--no-renames", "--no-abbrev")
    changed = [c for c in _changed(raw) if not is_owned(c[2], own_files)]
    stats = LineStats(files=len(changed))
    if not changed:
        return stats
    work = snap.tree.parent / "kit-lines"
    shutil.rmtree(work, ignore_errors=True)
    (work / "a").mkdir(parents=True)
    (work / "b").mkdir()
    shas = [sha for old, new, _ in changed for sha in (old, new) if sha != _EMPTY]
    argv = ["git", *GIT_OPTS, *DIFF_OPTS, "cat-file", "--batch"]
    proc = subprocess.Popen(
        argv, cwd=snap.tree, env=snapshot_env(ws, snap), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    feeder = threading.Thread(target=_feed, args=(proc, shas), daemon=True)
    feeder.start()
    timer = threading.Timer(GIT_TIMEOUT_S, proc.kill)  # a stuck git ends as "ended early"
    timer.daemon = True
    timer.start()
    try:
        assert proc.stdout is not None
        for i, (old, new, path) in enumerate(changed):
            for side, sha in (("a", old), ("b", new)):
                data, whole = _side(proc.stdout, sha)
                if whole is not None:
                    stats.added += whole if side == "b" else 0
                    stats.removed += whole if side == "a" else 0
                    if path not in stats.counted_whole:
                        stats.counted_whole.append(path)
                (work / side / str(i)).write_bytes(as_lines(data))
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    added, removed = _numstat(work)
    stats.added, stats.removed = stats.added + added, stats.removed + removed
    shutil.rmtree(work, ignore_errors=True)
    return stats


def _feed(proc: subprocess.Popen, shas: list[str]) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write("".join(f"{sha}\n" for sha in shas).encode())
        proc.stdin.close()
    except OSError:  # git ended first: its reader says why
        pass


def _side(out: IO[bytes], sha: str) -> tuple[bytes, int | None]:
    """(the blob's bytes, None), or (b"", its lines) when it is over :data:`MAX_SIDE_BYTES`."""
    if sha == _EMPTY:
        return b"", None
    header = out.readline().split()
    if len(header) != 3 or header[1] != b"blob":
        raise TaskError(f"git cat-file gave no blob for {sha}: {b' '.join(header)[:200]!r}")
    size = int(header[2])
    if size > MAX_SIDE_BYTES:
        whole = _count_whole(out, size)
        out.read(1)
        return b"", whole
    data = out.read(size)
    if len(data) != size or out.read(1) != b"\n":
        raise TaskError(f"git cat-file ended early in {sha}")
    return data, None


def _numstat(work) -> tuple[int, int]:
    """Lines added and removed between ``work/a`` and ``work/b`` by git's line diff (no repository)."""
    argv = ["git", *GIT_OPTS, *DIFF_OPTS, "diff", "--no-index", "--numstat", "--no-renames", "--no-color"]
    argv += ["--no-ext-diff", "--no-textconv", "a", "b"]
    env = git_env() | {"GIT_CEILING_DIRECTORIES": str(work.parent)}  # no repository's attributes
    try:
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise TaskError(f"git diff of the lines took longer than {GIT_TIMEOUT_S:g} s") from None
    if proc.returncode not in (0, 1):  # 1: the sides differ
        raise TaskError(f"git diff of the lines failed: {proc.stderr.decode('utf-8', 'replace')[-500:]}")
    added = removed = 0
    for m in re.finditer(rb"^(\d+)\t(\d+)\t", proc.stdout, re.M):
        added, removed = added + int(m.group(1)), removed + int(m.group(2))
    return added, removed


def diff_stats_of(ws: Workspace, snap: Snapshot) -> tuple[int, int, int]:
    """(files touched, lines added, lines removed) from the base to the snapshot (:func:`line_stats`)."""
    stats = line_stats(ws, snap)
    return stats.files, stats.added, stats.removed


def diff_stats(ws: Workspace) -> tuple[int, int, int]:
    """(files touched, lines added, lines removed) since the base commit, from a fresh snapshot."""
    with snapshot(ws.root, ws.sandbox) as snap:
        return diff_stats_of(ws, snap)
