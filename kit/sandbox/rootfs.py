"""The kit's default container image, built from this machine's files without any registry.

:func:`write_rootfs` writes a root file system as a tar stream that ``podman import`` (or ``docker
import``) turns into an image:

- the host's **Debian packages** :data:`PACKAGES` (Python 3, a shell and the userland an agent's
  commands use: coreutils, grep, sed, find, diff, patch, git, procps ...) with everything they depend
  on, file by file as ``dpkg`` lists them (documentation, manual pages and translations left out);
- **pytest** and what it needs, copied from the kit's own interpreter (pure Python, the versions the
  kit is tested with) into ``/usr/local/lib/python3.X/dist-packages``, and ``python`` as a name for
  ``python3``;
- a minimal ``/etc``: a ``passwd`` and ``group`` naming root and the sandbox user only, the loader's
  cache, ``hosts``, ``nsswitch.conf`` -- no shadow, no keys, nothing of the host's accounts.

Every entry belongs to root; files keep their host modification time (the compiled ``__pycache__``
files of Python's standard library and of pytest come along and stay valid: no module is compiled at
each start), folders and the kit's own files have one fixed time, so the same host files give the same
tar (the image's content hash names it: :mod:`kit.sandbox.images`). Needs a Debian-like host (``dpkg``);
elsewhere build from the kit's Containerfile instead (``kit sandbox build-image --from containerfile``).
"""

from __future__ import annotations

import io
import os
import re
import stat
import subprocess
import sys
import tarfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from kit.errors import KitError
from kit.sandbox.base import SANDBOX_GID, SANDBOX_HOME, SANDBOX_UID

#: The Debian packages the image holds (with their dependencies).
PACKAGES = (
    "python3", "dash", "bash", "coreutils", "grep", "sed", "findutils", "diffutils", "mawk", "patch",
    "git", "util-linux", "procps", "tar", "gzip", "base-files", "libc-bin", "tzdata",
)  # fmt: skip
#: The Python distributions copied from the kit's interpreter (with their requirements).
PYTHON_DISTS = ("pytest",)
SKIPPED_TREES = (
    "/usr/share/doc/",
    "/usr/share/man/",
    "/usr/share/locale/",
    "/usr/share/info/",
    "/usr/share/lintian/",
)
MTIME = 1_700_000_000
FORMAT = 2  # bumped when what write_rootfs puts in the image changes


class RootfsError(KitError):
    """The image cannot be built from this machine's files."""


def _installed() -> dict[str, tuple[list[str], list[str]]]:
    """Installed package -> (its dependency groups, each a list of alternatives; what it provides)."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package}\t${db:Status-Abbrev}\t${Pre-Depends}, ${Depends}\t${Provides}\n"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        raise RootfsError(
            f"building the image from this machine needs a Debian-like host with dpkg ({exc}); build it "
            "from the kit's Containerfile instead: `python -m kit sandbox build-image --from containerfile`"
        ) from exc
    packages: dict[str, tuple[list[str], list[str]]] = {}
    for line in out.splitlines():
        name, status, depends, provides = line.split("\t")
        if status.startswith("ii"):
            packages[name] = (
                [g.strip() for g in depends.split(",") if g.strip()],
                [_bare(p) for p in provides.split(",") if p.strip()],
            )
    return packages


def _bare(spec: str) -> str:
    """``libfoo:any (>= 1.2)`` -> ``libfoo``."""
    return re.split(r"[\s(:]", spec.strip(), maxsplit=1)[0]


def package_closure(roots: Iterable[str] = PACKAGES) -> list[str]:
    """``roots`` and every installed package they depend on (the first installed alternative)."""
    installed = _installed()
    providers: dict[str, str] = {}
    for name, (_, provides) in installed.items():
        for virtual in provides:
            providers.setdefault(virtual, name)
    missing = [r for r in roots if r not in installed]
    if missing:
        raise RootfsError(
            f"the host lacks the Debian packages {', '.join(missing)}: install them (`apt-get install -y "
            f"{' '.join(missing)}`) or build from the kit's Containerfile (`--from containerfile`)"
        )
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for group in installed[name][0]:
            for alternative in map(_bare, group.split("|")):
                chosen = alternative if alternative in installed else providers.get(alternative)
                if chosen:
                    todo.append(chosen)
                    break
    return sorted(seen)


def inputs(packages: Iterable[str] = PACKAGES) -> dict[str, object]:
    """What the image is made of, by version: the same inputs give the same image (their hash names
    it, :mod:`kit.sandbox.images`)."""
    closure = package_closure(packages)
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}=${Version}\n", *closure],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    dists = sorted(
        {f"{host.parts[-2]}" for host, _ in _python_files() if host.parts[-2].endswith(".dist-info")}
    )
    return {
        "format": FORMAT,
        "packages": sorted(out),
        "python": dists,
        "etc": {k: v.decode() for k, v in _etc_files().items()},
    }


def _package_files(packages: list[str]) -> list[str]:
    out = subprocess.run(["dpkg-query", "-L", *packages], capture_output=True, text=True, check=True).stdout
    files = {line for line in out.splitlines() if line.startswith("/")}
    return sorted(f for f in files if not f.startswith(SKIPPED_TREES) and f not in SKIPPED_TREES)


def _python_files() -> list[tuple[Path, str]]:
    """(host file, path in the image) for :data:`PYTHON_DISTS` and their requirements."""
    try:
        from packaging.requirements import Requirement  # pytest's own requirement
    except ImportError as exc:
        raise RootfsError("pytest is not installed in the kit's interpreter: run `make install`") from exc
    target = f"usr/local/lib/python{sys.version_info.major}.{sys.version_info.minor}/dist-packages"
    todo, seen, files = list(PYTHON_DISTS), set(), []
    while todo:
        dist = metadata.distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("-", "_")
        if key in seen:
            continue
        seen.add(key)
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
        for rel in dist.files or []:
            host = Path(dist.locate_file(rel))
            if host.is_file() and ".." not in rel.parts and "__pycache__" not in rel.parts:
                files.append((host, f"{target}/{rel.as_posix()}"))
    return files


def _etc_files() -> dict[str, bytes]:
    uid, gid = SANDBOX_UID, SANDBOX_GID
    return {
        "etc/passwd": f"root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}:sandbox:{SANDBOX_HOME}:/bin/sh\n".encode(),
        "etc/group": f"root:x:0:\nsandbox:x:{gid}:\n".encode(),
        "etc/hosts": b"127.0.0.1 localhost\n::1 localhost\n",
        "etc/nsswitch.conf": b"passwd: files\ngroup: files\nhosts: files\n",
    }


class _Tar:
    """A deterministic tar stream: root-owned entries, one mtime, each path once, parents first."""

    def __init__(self, fileobj) -> None:  # noqa: ANN001 - a binary file or stream
        self.tar = tarfile.open(fileobj=fileobj, mode="w|", format=tarfile.PAX_FORMAT)  # noqa: SIM115 - closed by close()
        self.done: set[str] = set()

    def _info(
        self, name: str, kind: bytes, mode: int, size: int = 0, link: str = "", mtime: int = MTIME
    ) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.size, info.linkname, info.mtime = kind, mode, size, link, mtime
        return info

    def folder(self, name: str, mode: int = 0o755) -> None:
        name = name.strip("/")
        if not name or name in self.done:
            return
        self.folder(os.path.dirname(name))
        self.done.add(name)
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode))

    def data(self, name: str, data: bytes, mode: int = 0o644) -> None:
        name = name.strip("/")
        if name in self.done:
            return
        self.folder(os.path.dirname(name))
        self.done.add(name)
        self.tar.addfile(self._info(name, tarfile.REGTYPE, mode, len(data)), io.BytesIO(data))

    def link(self, name: str, target: str) -> None:
        self.folder(os.path.dirname(name))
        self.done.add(name)
        self.tar.addfile(self._info(name, tarfile.SYMTYPE, 0o777, link=target))

    def host(self, path: str, name: str | None = None) -> None:
        """The host's ``path`` (a file, a link or a folder) at ``name`` (default: the same path, its
        folders' links resolved -- ``/bin/sh`` is ``usr/bin/sh`` on a merged-/usr host)."""
        try:
            st = os.lstat(path)
        except OSError:
            return
        if name is None:
            name = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        name = name.strip("/")
        if name in self.done:
            return
        mode = stat.S_IMODE(st.st_mode) & 0o755 | 0o444  # no setuid, no write but root's, all may read
        if stat.S_ISDIR(st.st_mode):
            self.folder(name, mode | 0o111)
        elif stat.S_ISLNK(st.st_mode):
            self.link(name, os.readlink(path))
        elif stat.S_ISREG(st.st_mode):
            self.folder(os.path.dirname(name))
            self.done.add(name)
            with open(path, "rb") as fh:  # its own mtime: the compiled files beside it stay valid
                self.tar.addfile(
                    self._info(name, tarfile.REGTYPE, mode, st.st_size, mtime=int(st.st_mtime)), fh
                )
            if name.endswith(".py"):
                self._compiled(path, name)

    def _compiled(self, path: str, name: str) -> None:
        """The host's compiled file of a Python module (its ``__pycache__``, this Python's tag), so
        the image's interpreter does not compile the standard library and pytest at every start."""
        folder, file = os.path.split(path)
        pyc = os.path.join(folder, "__pycache__", f"{file[:-3]}.{sys.implementation.cache_tag}.pyc")
        if os.path.isfile(pyc):
            self.host(pyc, os.path.join(os.path.dirname(name), "__pycache__", os.path.basename(pyc)))

    def close(self) -> None:
        self.tar.close()


def write_rootfs(out, packages: Iterable[str] = PACKAGES) -> list[str]:  # noqa: ANN001 - a binary stream
    """Write the image's root file system to ``out`` as a tar stream; the Debian packages it holds."""
    closure = package_closure(packages)
    tar = _Tar(out)
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):  # merged /usr: keep the links
        if os.path.islink(f"/{top}"):
            tar.host(f"/{top}", top)
    for folder, mode in (("tmp", 0o1777), ("root", 0o700), ("proc", 0o555), ("sys", 0o555), ("dev", 0o755)):
        tar.folder(folder, mode)
    for path in _package_files(closure):
        tar.host(path)
    for host, name in _python_files():
        tar.host(str(host), name)
    tar.link("usr/local/bin/python", "/usr/bin/python3")
    for name, data in _etc_files().items():
        tar.data(name, data)
    for name in ("etc/ld.so.cache", "etc/ld.so.conf"):
        tar.host(f"/{name}", name)
    tar.close()
    return closure
