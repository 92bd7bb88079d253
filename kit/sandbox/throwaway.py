"""``writable="throwaway"``: a command may write anywhere in its folder (``cwd``) -- a test suite's
caches, the files its tests write -- and everything it wrote is discarded when it ends. The folder
itself is never written: what the command sees there is a layer over it that lives only as long as
the command (docs/sandbox.md, "Throwaway writes").

How each backend makes the layer:

- ``bwrap``: an overlay mounted over ``cwd`` inside the sandbox (bubblewrap's ``--overlay-src`` and
  ``--overlay``), its upper layer in a tmpfs of its own that the kit mounts for the one command
  (:func:`layer`: ``scratch_mb`` big, so a command cannot write more there than in its ``/tmp``),
  unmounted -- and so emptied -- when the command ends. Where the kit may not mount (it is not
  root), bwrap's ``--tmp-overlay``: the upper layer lives in bwrap's own private tmpfs, gone with the
  sandbox; memory, bounded by the command's memory cgroup where the kit has one
  (:func:`kit.sandbox.processes.memory_limit_mechanism`), each file by ``file_size_mb``.
- ``podman``: an overlay volume (``-v cwd:cwd:O``), with the same kit tmpfs as its upper layer when the
  kit runs as root (rootless: podman's own per-container folder, removed with the container).
- ``docker`` (no overlay volumes): ``cwd`` is mounted read-only at :data:`PRISTINE` and a tmpfs is
  mounted at ``cwd`` (the folder's size plus ``scratch_mb``); the container's shell copies the
  folder into it before the command starts.
- ``none``: a copy of the folder in a folder of :func:`layer` (a capped tmpfs as root, else a
  temporary folder); the command runs there, and environment values naming the folder name the copy.

A layer never shares a file with the folder (overlay copies a file up before writing it; the copies
are copies), and it is gone before ``run`` returns, so nothing a command writes there reaches the
clone, a snapshot of it or scoring.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Union

from kit import trees

THROWAWAY = "throwaway"
#: What a command may do to its folder: write it (True), nothing (False), or write a throwaway layer.
Writable = Union[bool, Literal["throwaway"]]  # noqa: UP007 - a type alias evaluated at runtime
#: Where the docker backend shows the untouched folder, to copy it from.
PRISTINE = "/orchbench-pristine"
_PREFIX = "orchbench-throwaway-"
#: other temporary folders of a kit process named ``<prefix><pid>-...``, swept with the layers when
#: their process is gone: scoring's scratch space (a tmpfs), the snapshot (up to 256 MB of disk), a
#: Ray worker's run folder (its clone's quota file system is mounted inside it) and the base trees
#: scoring keeps (``kit/scoring/basetree.py``)
SWEPT_PREFIXES = ("orchbench-score-", "orchbench-snapshot-", "orchbench-ray-", "orchbench-base-")
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


def check(writable: object, pins: Sequence[Path] = ()) -> Writable:
    """``writable`` if it is True, False or ``"throwaway"``; ValueError saying so otherwise, or when a
    throwaway folder is given ``pins`` (folders of the real folder bound into it: scoring's, on its
    writable copies, never a throwaway's)."""
    if writable is True or writable is False or writable == THROWAWAY:
        if writable == THROWAWAY and pins:
            raise ValueError(f"a throwaway folder cannot hold pinned folders (got {pins[0]})")
        return writable  # type: ignore[return-value]
    raise ValueError(f"writable must be True, False or {THROWAWAY!r} (got {writable!r})")


def refuse_binds_inside(cwd: Path, ro_binds: Sequence[Path], backend: str) -> None:
    """A throwaway layer made by copying (docker, none) cannot keep a read-only bind inside ``cwd``."""
    inside = [p for p in ro_binds if Path(p).resolve().is_relative_to(Path(cwd).resolve())]
    if inside:
        raise ValueError(f"{backend}: a throwaway folder cannot hold the read-only bind {inside[0]}")


@dataclass(frozen=True)
class Layer:
    """One command's throwaway space: ``root`` holds ``upper`` (the writes; it takes the owner and
    mode of the folder it lies over, as overlayfs shows its root) and ``work`` (overlayfs's own)."""

    root: Path
    capped: bool  # a tmpfs of its own (True), or a plain temporary folder on the kit's disk

    @property
    def upper(self) -> Path:
        return self.root / "upper"

    @property
    def work(self) -> Path:
        return self.root / "work"


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(folder: Path, size_mb: int) -> bool:
    """Mount a tmpfs of ``size_mb`` on ``folder`` (only root may see into it); False where it cannot."""
    if os.geteuid() != 0 or sys.platform != "linux":
        return False
    options = f"size={size_mb}m,mode=0700,uid=0,gid=0".encode()
    done = _libc().mount(b"tmpfs", str(folder).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options)
    return done == 0


def _unmount(folder: Path) -> None:
    _libc().umount2(str(folder).encode(), _MNT_DETACH)  # the command has ended: detach frees it


_MOUNTED: set[Path] = set()  # layers of this process still mounted (unmounted at exit)


@contextlib.contextmanager
def layer(size_mb: int, like: Path, *, always: bool = False) -> Iterator[Layer | None]:
    """A fresh throwaway layer for one command, removed when the block ends: a tmpfs of ``size_mb``
    where the kit may mount one (root on Linux), else -- only with ``always`` (the ``none``
    backend needs a folder) or as root (overlayfs needs an upper layer the sandbox user owns) -- a
    plain temporary folder; None otherwise (bwrap's ``--tmp-overlay``, podman's ``:O`` take over).
    ``upper`` gets ``like``'s owner and mode."""
    root = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
    capped = _mount_tmpfs(root, size_mb)
    if capped:
        _MOUNTED.add(root)
    elif not (always or os.geteuid() == 0):
        root.rmdir()
        yield None
        return
    try:
        made = Layer(root, capped)
        st = os.stat(like)
        for folder in (made.upper, made.work):
            folder.mkdir()
        os.chown(made.upper, st.st_uid, st.st_gid)
        os.chmod(made.upper, st.st_mode & 0o7777)
        yield made
    finally:
        if capped:
            _unmount(root)
            _MOUNTED.discard(root)
            with contextlib.suppress(OSError):
                root.rmdir()
        else:
            trees.remove_tree(root)


@atexit.register
def release_all() -> None:
    """Unmount and remove this process's layers (at exit; the CLI calls it before ``os._exit``)."""
    for root in list(_MOUNTED):
        _unmount(root)
        with contextlib.suppress(OSError):
            root.rmdir()


def sweep() -> list[Path]:
    """Remove the layers a kit process that died left behind -- unmount each tmpfs (it holds at most
    its ``size_mb`` of memory until then), remove each folder -- and return them; so too its scoring
    scratch spaces and snapshots (:data:`SWEPT_PREFIXES`). Called when a
    backend is checked (:func:`kit.sandbox.backends.check_available`: an experiment starts with it)."""
    prefixes = "|".join(re.escape(p) for p in (_PREFIX, *SWEPT_PREFIXES))
    pattern = re.compile(rf"/(?:{prefixes})(\d+)-[^/]*$")
    within = re.compile(rf"/(?:{prefixes})(\d+)-[^/]*(?:/|$)")  # the folder or a mount inside it
    found: set[Path] = set()
    mounts: list[Path] = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            point = line.split()[4].replace("\\040", " ")
            if (match := within.search(point)) and not _alive(int(match.group(1))):
                mounts.append(Path(point))
    for point in sorted(mounts, key=lambda p: len(p.parts), reverse=True):  # inner mounts first
        _unmount(point)
        if pattern.search(str(point)):
            found.add(point)
    for root in Path(tempfile.gettempdir()).glob("orchbench-*"):
        if (match := pattern.search(str(root))) and not _alive(int(match.group(1))):
            found.add(root)
            with contextlib.suppress(OSError):  # a mount that would not go stays (never walked)
                trees.remove_tree(root)
    return sorted(found)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def bwrap_args(folder: Path, layer: Layer | None, dest: Path | None = None) -> list[str]:
    """bwrap's arguments for a throwaway overlay over ``folder`` (seen at ``dest``, default the same
    path): ``layer`` as its upper layer, or (None) bwrap's own ``--tmp-overlay``."""
    to = str(dest or folder)
    if layer is None:
        return ["--overlay-src", str(folder), "--tmp-overlay", to]
    return ["--overlay-src", str(folder), "--overlay", str(layer.upper), str(layer.work), to]


def tree_bytes(folder: Path) -> int:
    """What ``folder`` takes in a tmpfs: its regular files' sizes, each rounded up to a page."""
    total = [0]

    def add(_fd: int, _name: str, st: os.stat_result) -> None:
        total[0] += -(-st.st_size // 4096) * 4096

    trees.visit(Path(folder), add)
    return total[0]


def copy_into(folder: Path, target: Path) -> None:
    """Copy ``folder``'s contents into the existing ``target`` (links as links, modes and times
    kept); what cannot be read is left out, as the command could not have read it either."""
    subprocess.run(
        ["cp", "-a", f"{folder}/.", f"{target}/"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )


def moved_env(env: dict[str, str], folder: Path, copy: Path) -> dict[str, str]:
    """``env`` with every mention of ``folder`` (a path prefix) pointing at ``copy`` instead."""
    old, new = str(folder), str(copy)
    pattern = re.compile(re.escape(old) + r"(?=$|[/:])")
    return {k: pattern.sub(new.replace("\\", "\\\\"), v) for k, v in env.items()}
