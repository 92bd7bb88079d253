"""A byte and file quota on each run's clone (the experiment's ``limits.disk_quota_mb`` and
``disk_quota_files``), so one agent cannot fill the results disk and stop the experiment.

Two mechanisms; :func:`quota_mechanism` says which holds here:

- ``loop`` (the kit runs as root on Linux with loop devices, ``mkfs.ext4`` and ``mount``): the clone
  lives on a file system of its own -- an ext4 image (``<run>/repo.img``, sparse: it takes on disk
  what the clone holds) loop-mounted on the clone's folder, of exactly the quota's bytes and files.
  A write past it fails (``ENOSPC``) whatever writes it: a command, a tool, the kit's own file
  tools. When the run ends, :func:`release` unmounts it: the image stays in the run folder as the
  clone (read it with ``debugfs -R 'rdump / OUT' repo.img`` as any user, or mount it read-only),
  and removing a run is removing one file -- never a walk of what the agent made.
- ``checked`` (anything else): the clone stays a plain folder; its size and file count are measured
  (a walk of at most the quota's files, nothing read) before every model call of the run. A single
  command can write past the quota before that check (each file stays under
  ``ProcessLimits.file_size_mb``).

Either way, :meth:`Quota.over` says when the clone reached its quota; the run's budget then ends the
run (stop reason ``disk-quota``, docs/strategies.md) and it is scored on what it has. The sandbox's
own scratch space (``/tmp``, ``/dev/shm``) is a size-capped tmpfs per command
(``ProcessLimits.scratch_mb``), gone when the command ends.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kit import trees
from kit.errors import KitError

IMAGE_SUFFIX = ".img"
#: A clone counts as full when less than this is left (a write that needs more fails already).
SLACK_BYTES = 256 * 1024
SLACK_FILES = 16
_TOOLS = "/usr/sbin:/usr/bin:/sbin:/bin"


@functools.cache
def quota_mechanism() -> str:
    """``loop`` where the kit can give each clone a file system of its own, else ``checked``."""
    if platform.system() != "Linux" or os.geteuid() != 0 or not Path("/dev/loop-control").exists():
        return "checked"
    if not all(shutil.which(tool, path=_TOOLS) for tool in ("mkfs.ext4", "mount", "umount")):
        return "checked"
    return "loop"


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={"PATH": _TOOLS})
    if proc.returncode != 0:
        raise KitError(f"{' '.join(argv[:2])} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")


@dataclass
class Quota:
    """The quota of one clone: ``folder`` is the clone, ``image`` its file system's image (``loop``)."""

    folder: Path
    max_bytes: int
    max_files: int
    image: Path | None = None

    def usage(self) -> tuple[int, int]:
        """(bytes, files and folders) the clone takes now; a ``checked`` walk stops past the quota."""
        if self.image is not None:
            st = os.statvfs(self.folder)
            return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree
        used = [0, 0]

        def count(_fd: int, _name: str, st: os.stat_result) -> None:
            used[0] += st.st_blocks * 512
            used[1] += 1
            if used[1] > self.max_files or used[0] > self.max_bytes:
                raise _Full

        try:
            trees.visit(self.folder, count)
        except _Full:
            pass
        except OSError:
            pass  # a folder the agent locked: counted up to there
        return used[0], used[1]

    def over(self) -> str | None:
        """Why the clone is at its quota, or None."""
        if self.image is not None:
            st = os.statvfs(self.folder)
            if st.f_bavail * st.f_frsize < SLACK_BYTES or st.f_favail < SLACK_FILES:
                return self._why(*self.usage())
            return None
        used, files = self.usage()
        if used > self.max_bytes - SLACK_BYTES or files > self.max_files - SLACK_FILES:
            return self._why(used, files)
        return None

    def _why(self, used: int, files: int) -> str:
        return (
            f"the clone reached its disk quota ({used // 2**20} of {self.max_bytes // 2**20} MB, "
            f"{files} of {self.max_files} files and folders)"
        )


class _Full(Exception):
    pass


def image_of(folder: Path) -> Path:
    return folder.with_name(folder.name + IMAGE_SUFFIX)


def provide(folder: Path, max_bytes: int, max_files: int, owner: tuple[int, int] | None) -> Quota:
    """An empty clone folder at ``folder`` under a quota: with ``loop``, a fresh file system of
    ``max_bytes`` and ``max_files`` mounted there (its root owned by ``owner``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if quota_mechanism() != "loop":
        return Quota(folder, max_bytes, max_files)
    image = image_of(folder)
    with open(image, "wb") as fh:
        fh.truncate(max_bytes)
    uid, gid = owner or (os.getuid(), os.getgid())
    options = f"root_owner={uid}:{gid},lazy_itable_init=1,nodiscard"
    _run(
        "mkfs.ext4",
        "-q",
        "-F",
        "-O",
        "^has_journal",
        "-m",
        "0",
        "-N",
        str(max_files),
        "-E",
        options,
        str(image),
    )
    _run("mount", "-o", "loop,nosuid,nodev,noatime", str(image), str(folder))
    _MOUNTED.add(folder)
    (folder / "lost+found").rmdir()
    return Quota(folder, max_bytes, max_files, image)


_MOUNTED: set[Path] = set()  # quota mounts this process made and has not released


def release(quota: Quota) -> None:
    """End a clone's quota (``loop``): hand the blocks of files the agent deleted back to the results
    disk (``fstrim``: the image stays sparse), unmount it, leaving the image beside the run's records
    as the clone (``repo.img``: read it with ``debugfs -R 'rdump / OUT' repo.img`` as any user, or
    mount it read-only), and remove the empty mount point. Safe to call twice."""
    if quota.image is not None:
        if os.path.ismount(quota.folder) and shutil.which("fstrim", path=_TOOLS):
            with contextlib.suppress(KitError, OSError, subprocess.SubprocessError):
                _run("fstrim", str(quota.folder))
        unmount(quota.folder)


#: A finished run keeps its clone (``repo.img``, or ``repo/`` where the clone has no file system of its
#: own) only when it takes at most this much of the results disk; a larger one -- an agent that filled
#: its quota -- is removed once the run is scored (its change is in diff.patch). So a finished run
#: takes at most its records and this, which the pre-run space check counts
#: (:data:`kit.run.results.RECORDS_PER_RUN_MB`), never its whole quota.
KEPT_CLONE_BYTES = 16 * 2**20


def clone_bytes(quota: Quota) -> int:
    """What the released clone takes on the results disk now (its image's allocated blocks, or the
    folder's, counted up to its quota)."""
    if quota.image is not None:
        with contextlib.suppress(OSError):
            return quota.image.stat().st_blocks * 512
        return 0
    return quota.usage()[0] if quota.folder.is_dir() else 0


def drop_clone(quota: Quota) -> None:
    """Remove the released clone: its image (and mount point), or its folder whatever the agent
    made there (:func:`kit.trees.remove_tree`)."""
    if quota.image is not None:
        unmount(quota.folder)
        quota.image.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            quota.folder.rmdir()
    elif quota.folder.is_dir():
        with contextlib.suppress(OSError, trees.TreeChanged):
            trees.remove_tree(quota.folder)


def settle_clone(quota: Quota, keep_bytes: int = KEPT_CLONE_BYTES) -> str | None:
    """After a run is scored: its clone released, and removed when it takes more than ``keep_bytes``
    of the results disk (:data:`KEPT_CLONE_BYTES`); why it was removed, or None when it is kept."""
    release(quota)
    size = clone_bytes(quota)
    if size <= keep_bytes:
        return None
    drop_clone(quota)
    return (
        f"the clone took {size / 2**20:.0f} MB of the results disk (more than the "
        f"{keep_bytes // 2**20} MB a finished run keeps): removed once the run was scored; its "
        "change is in diff.patch"
    )


def unmount(folder: Path) -> None:
    """Unmount the quota file system at ``folder`` if one is there (a run torn by a killed kit
    leaves one), then remove the empty mount point; nothing there is fine."""
    folder = Path(folder)
    if os.path.ismount(folder):
        try:
            _run("umount", str(folder))
        except KitError:
            _run("umount", "-l", str(folder))  # something still holds it: detach it now
    _MOUNTED.discard(folder)
    if image_of(folder).is_file():
        with contextlib.suppress(OSError):
            folder.rmdir()


@contextlib.contextmanager
def kept_clone(folder: Path) -> Iterator[Path]:
    """The clone a finished run kept at ``folder`` (``<run>/repo``), to read: its image mounted
    read-only in a temporary folder while the block runs (the kit as root), or the folder itself."""
    folder, image = Path(folder), image_of(Path(folder))
    if not image.is_file() or os.path.ismount(folder):
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="orchbench-clone-") as tmp:
        _run("mount", "-o", "loop,ro,nosuid,nodev,noexec", str(image), tmp)
        try:
            yield Path(tmp)
        finally:
            _run("umount", tmp)


#: The kit's scratch space for scoring (:func:`scratch`): the clean copies of a snapshot and what the
#: code under test writes while the tests run.
SCRATCH_BYTES = 1024 * 2**20
SCRATCH_FILES = 200_000
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


@contextlib.contextmanager
def scratch(prefix: str, max_bytes: int = SCRATCH_BYTES, max_files: int = SCRATCH_FILES) -> Iterator[Path]:
    """A temporary folder for the kit's own copies of agent files (scoring's clean copies), removed
    when the block ends. With ``loop`` (root on Linux) it is a tmpfs of ``max_bytes`` and
    ``max_files``: code under test cannot fill the disk or the inode table through it, and unmounting
    drops whatever it made -- a 3,000-deep folder chain, a million files -- at once, no walk (one
    ``mount`` call, well under a millisecond; it holds RAM only for what is written). Otherwise a
    plain temporary folder, removed without recursion (:func:`kit.trees.remove_tree`)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))  # (pid: swept if this process dies)
    mounted = False
    try:
        if quota_mechanism() == "loop":
            _mount_tmpfs(folder, max_bytes, max_files)
            mounted = True
            _SCRATCH.add(folder)
        yield folder
    finally:
        if mounted:
            _libc().umount2(os.fsencode(folder), _MNT_DETACH)
            _SCRATCH.discard(folder)
        with contextlib.suppress(OSError, trees.TreeChanged):
            trees.remove_tree(folder)


_SCRATCH: set[Path] = set()  # scratch spaces mounted and not yet released


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(folder: Path, max_bytes: int, max_files: int) -> None:
    options = f"size={max_bytes},nr_inodes={max_files},mode=0700".encode()
    flags = _MS_NOSUID | _MS_NODEV
    if _libc().mount(b"tmpfs", os.fsencode(folder), b"tmpfs", flags, options) != 0:
        err = ctypes.get_errno()
        raise KitError(f"could not mount the scoring scratch space at {folder}: {os.strerror(err)}")


@atexit.register
def release_all() -> None:
    """Unmount every quota this process mounted and has not released (at exit; and before an
    ``os._exit`` that skips atexit, e.g. a second Ctrl-C), so no run leaves a mount behind."""
    for folder in list(_MOUNTED):
        with contextlib.suppress(Exception):
            unmount(folder)
    for folder in list(_SCRATCH):  # (a scoring in flight: its session reads an empty folder now)
        with contextlib.suppress(Exception):
            _libc().umount2(os.fsencode(folder), _MNT_DETACH)
            os.rmdir(folder)
        _SCRATCH.discard(folder)
