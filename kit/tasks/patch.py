"""The diff of a snapshot against the base commit: :func:`snapshot_diff` runs git in a git folder of
the kit's own next to the snapshot (its index holds every file of the snapshot, hashed as it is; it
borrows the cached base's objects), and :func:`capped_patch` keeps what the kit holds of a patch
from growing with what the agent wrote.

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
import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from kit.errors import TaskError
from kit.tasks.git import GIT_OPTS, GIT_TIMEOUT_S, SAFE_SETTINGS, git_env

if TYPE_CHECKING:
    from kit.tasks.snapshot import Snapshot


class Based(Protocol):
    """What a diff needs of a workspace (:class:`kit.tasks.workspace.Workspace`): the base commit
    and the kit's cached base repository's git folder."""

    base_commit: str
    base_git_dir: Path | None


def _tree_files(tree: Path) -> list[tuple[str, str]]:
    """(mode, path relative to ``tree``) of every regular file of a snapshot tree, sorted."""
    out = []
    for folder, dirs, files in os.walk(tree):
        dirs.sort()
        for name in sorted(files):
            st = os.lstat(os.path.join(folder, name))
            if stat.S_ISREG(st.st_mode):
                rel = os.path.relpath(os.path.join(folder, name), tree)
                out.append(("100755" if st.st_mode & 0o100 else "100644", rel))
    return out


_HASH_BATCH = 500
#: Every diff git runs with these (and :data:`kit.tasks.git.SAFE_SETTINGS`); paths git's defaults
#: would refuse (NTFS / HFS look-alikes of .git) are still recorded.
DIFF_OPTS = ["-c", "core.protectNTFS=false", "-c", "core.protectHFS=false"]
DIFF_OPTS += [arg for key, value in SAFE_SETTINGS.items() for arg in ("-c", f"{key}={value}")]


def _plain_git(cwd: Path, env: dict[str, str], *args: str, input: bytes | None = None) -> bytes:
    """git in a git folder of the kit's own making (nothing of the agent's config, hooks or
    attributes exists there); stdout; TaskError when it fails or takes over GIT_TIMEOUT_S."""
    try:
        proc = subprocess.run(
            ["git", *GIT_OPTS, *DIFF_OPTS, *args],
            cwd=cwd,
            env=env,
            input=input,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise TaskError(f"git {args[0]} on a snapshot took longer than {GIT_TIMEOUT_S:g} s") from None
    if proc.returncode != 0:
        raise TaskError(
            f"git {args[0]} on a snapshot failed: {proc.stderr.decode('utf-8', 'replace')[-500:]}"
        )
    return proc.stdout


def snapshot_env(ws: Based, snap: Snapshot) -> dict[str, str]:
    """The environment of a git folder next to the snapshot's tree (made once per snapshot) whose
    index holds every file of the tree, hashed as it is (``--no-filters``: no ``.gitattributes``
    conversion), and which borrows the cached base's objects."""
    home = snap.tree.parent / "kit-git"
    env = git_env()
    env.update(
        GIT_DIR=str(home / "git"),
        GIT_WORK_TREE=str(snap.tree),
        GIT_INDEX_FILE=str(home / "index"),
        GIT_ALTERNATE_OBJECT_DIRECTORIES=str(Path(ws.base_git_dir or "") / "objects"),
        GIT_CEILING_DIRECTORIES=str(snap.tree.parent),
    )
    if (home / "index").is_file():
        return env
    for sub in ("objects", "refs/heads"):
        (home / "git" / sub).mkdir(parents=True, exist_ok=True)
    (home / "git" / "HEAD").write_text("ref: refs/heads/main\n")
    (home / "git" / "info").mkdir(
        exist_ok=True
    )  # the tree's own .gitattributes (binary, -diff) decide nothing
    (home / "git" / "info" / "attributes").write_text("* !diff !text !eol !merge\n")
    (home / "git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = false\n")
    files = _tree_files(snap.tree)
    entries = []
    for i in range(0, len(files), _HASH_BATCH):
        batch = files[i : i + _HASH_BATCH]
        out = _plain_git(
            snap.tree, env, "hash-object", "-w", "--no-filters", "--", *(rel for _, rel in batch)
        )
        shas = out.split()
        if len(shas) != len(batch):
            raise TaskError(f"git hash-object gave {len(shas)} ids for {len(batch)} files")
        for (mode, rel), sha in zip(batch, shas, strict=True):
            entries.append(b"%s %s\t%s\0" % (mode.encode(), sha, os.fsencode(rel)))
    _plain_git(snap.tree, env, "update-index", "-z", "--add", "--index-info", input=b"".join(entries))
    return env


def snapshot_diff(ws: Based, snap: Snapshot, *diff_args: str) -> bytes:
    """``git diff --cached ARGS <base>`` of the snapshot's tree, as bytes: every file the snapshot
    holds (ignored ones included) against the base commit, in a git folder of the kit's that borrows
    the cached base's objects -- no config, hook, attribute or nested repository of the agent's."""
    if ws.base_git_dir is None or not ws.base_git_dir.is_dir():
        raise TaskError(f"the cached base of {ws.root} is gone: no diff against {ws.base_commit[:12]}")
    env = snapshot_env(ws, snap)
    args = ["diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv", *diff_args, ws.base_commit]
    return _plain_git(snap.tree, env, *args)


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
    ws: Based,
    snap: Snapshot,
    max_bytes: int = MAX_PATCH_BYTES,
    max_file_bytes: int = MAX_FILE_PATCH_BYTES,
) -> Patch:
    """``git diff --binary`` of the snapshot against the base (:func:`kit.tasks.workspace.snapshot_diff`'s
    git folder), capped as the module says. TaskError when git fails."""
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
