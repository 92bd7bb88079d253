"""Running one command as a bounded process tree -- the part both sandbox backends share.

:func:`run_process` starts the command in a new session, applies the rlimits (CPU seconds, address
space, processes, file size) through util-linux ``prlimit`` (or a preexec fallback), puts it in its own
``pids`` cgroup and its own ``memory`` cgroup, each where one is writable (either may be without the
other: the kernel ignores RLIMIT_NPROC for root, RLIMIT_AS is per process, and the cgroups are how
every process of the command, setsid'd or not, is killed at the end), reads its output in a thread
keeping head and tail, waits on a pidfd and kills everything on timeout. :mod:`kit.sandbox.backends` wraps it
with the bwrap or the plain backend."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import resource
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessLimits:
    """rlimits applied to the sandboxed process tree (each process; ``processes`` for the whole tree)."""

    cpu_s: int = 600
    memory_mb: int = 4096
    processes: int = 512
    file_size_mb: int = 512
    #: the sandbox's private /tmp (HOME included): a size-capped tmpfs per command, gone when it ends
    scratch_mb: int = 512


DEFAULT_LIMITS = ProcessLimits()


def socket_mb(memory_mb: int) -> int:
    """The cap on a command's TCP and UDP buffers, on top of ``memory_mb``: cgroup v1 charges them to
    a counter of their own (``memory.kmem.tcp``), and to none at all until it has a limit -- 30
    loopback connections held 311 MB under a 100 MB cap. Loopback tests need a few MB."""
    return max(1, min(64, memory_mb // 4))


@dataclass
class Result:
    exit_code: int | None  # None when killed on timeout
    output: str  # combined stdout+stderr, head and tail kept
    timed_out: bool
    duration_s: float
    truncated_chars: int = 0


# --------------------------------------------------------------------------- process limits


#: Why a cgroup could not be used here, by controller (shown by the ``*_limit_mechanism`` functions).
_WHY_NOT: dict[str, str] = {}


def _writable(base: Path, control_file: str) -> str | None:
    """None when the kit may create a cgroup under ``base`` that has ``control_file``; else why not.
    The probe's name is random: a probe left by a killed process cannot make the folder look unwritable."""
    probe = base / f"orchbench-probe-{secrets.token_hex(6)}"
    try:
        probe.mkdir()
    except OSError as e:
        return f"{base}: {e.strerror or e}"
    try:
        return None if (probe / control_file).exists() else f"{base}: no {control_file}"
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


@functools.cache
def _cgroup_root() -> Path | None:
    """A cgroup folder in which the kit may create per-command cgroups with pids.max, or None."""
    reasons = []
    for base in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
        why = _writable(base, "pids.max")
        if why is None:
            return base
        reasons.append(why)
    _WHY_NOT["pids"] = "; ".join(reasons)
    return None


@functools.cache
def _memory_cgroup_root() -> Path | None:
    """The kit's own memory cgroup (v1: ``memory.limit_in_bytes``), in which it may create one per
    command to cap the memory of the whole process tree; None where none is writable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as e:
        _WHY_NOT["memory"] = f"/proc/self/cgroup: {e.strerror or e}"
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            why = _writable(base, "memory.limit_in_bytes")
            _WHY_NOT["memory"] = why or ""
            return base if why is None else None
    _WHY_NOT["memory"] = "no v1 memory controller in /proc/self/cgroup"
    return None


def memory_limit_mechanism() -> str:
    """How the memory of a command's whole process tree is capped: ``cgroup memory`` or ``none``
    (each process still has its ``RLIMIT_AS``). Independent of the pids cgroup: either may be
    writable without the other."""
    if _memory_cgroup_root() is not None:
        failed = _WHY_NOT.get("memory_failed")
        return "cgroup memory" + (f" (but the last command's could not be made: {failed})" if failed else "")
    return f"none (RLIMIT_AS per process only; {_WHY_NOT.get('memory', '')})"


def process_limit_mechanism(runs_as_root: bool = False) -> str:
    """How ``ProcessLimits.processes`` is enforced here for a command whose processes run as root
    (the ``none`` backend when the kit is root) or not (bwrap drops to the sandbox user):
    ``cgroup pids.max`` (per command), ``RLIMIT_NPROC`` (per user: every command of that user
    counts, so concurrent runs share it) or ``none`` (the kernel ignores RLIMIT_NPROC for root)."""
    if _cgroup_root() is not None:
        return "cgroup pids.max"
    why = _WHY_NOT.get("pids", "")
    if runs_as_root:
        return f"none (root without a writable pids cgroup: {why})"
    return f"RLIMIT_NPROC (per user: all commands of the user together; no writable pids cgroup: {why})"


def _memory_cgroup_failed(folder: Path, error: OSError) -> None:
    """A command runs without its memory cgroup (each process keeps RLIMIT_AS): said once a process,
    and from then on by :func:`memory_limit_mechanism`. The kernel refuses new memory cgroups past
    65,535, counting removed ones whose page cache it has not reclaimed yet (ENOSPC)."""
    why = f"{folder}: {error.strerror or error}"
    if "memory_warned" not in _WHY_NOT:
        _WHY_NOT["memory_warned"] = why
        warnings.warn(
            f"could not make a command's memory cgroup ({why}): commands run with RLIMIT_AS per process "
            "only, their whole tree's memory is not capped",
            stacklevel=3,
        )
    _WHY_NOT["memory_failed"] = why


class _Cgroup:
    """One command's cgroups, each where one can be made: its pids cgroup limits the process count;
    its memory cgroup caps the whole tree's memory. Either lists every process to kill at the end."""

    def __init__(
        self, pids_root: Path | None, memory_root: Path | None, max_pids: int, memory_mb: int
    ) -> None:
        # a random name: neither the kit's pid nor a count of commands (a command may see its cgroup)
        name = f"orchbench-{secrets.token_hex(8)}"
        self.folders: list[Path] = []
        self.pids: Path | None = None
        if pids_root is not None:
            self.pids = pids_root / name
            self.pids.mkdir()
            self.folders.append(self.pids)
            try:
                (self.pids / "pids.max").write_text(str(max_pids))
            except OSError:
                self.remove()
                raise
        if memory_root is not None:
            memory = memory_root / name
            try:
                memory.mkdir()
                self.folders.append(memory)
                (memory / "memory.limit_in_bytes").write_text(str(memory_mb * 2**20))
                with contextlib.suppress(OSError):  # memory and swap together, where swap is counted
                    (memory / "memory.memsw.limit_in_bytes").write_text(str(memory_mb * 2**20))
                with contextlib.suppress(OSError):  # v1 charges TCP and UDP buffers only once capped
                    (memory / "memory.kmem.tcp.limit_in_bytes").write_text(str(socket_mb(memory_mb) * 2**20))
                _WHY_NOT.pop("memory_failed", None)
            except OSError as e:
                if memory in self.folders:
                    self.folders.remove(memory)
                    with contextlib.suppress(OSError):
                        memory.rmdir()
                _memory_cgroup_failed(memory, e)

    @staticmethod
    def make(limits: ProcessLimits) -> _Cgroup | None:
        """The command's cgroups, or None where neither controller is writable."""
        pids_root, memory_root = _cgroup_root(), _memory_cgroup_root()
        if pids_root is None and memory_root is None:
            return None
        return _Cgroup(pids_root, memory_root, limits.processes, limits.memory_mb)

    @property
    def join(self) -> list[str]:
        """The ``cgroup.procs`` files a command's first process writes its pid to."""
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def kill_all(self, wait_s: float = 5.0) -> None:
        """SIGKILL every process in the cgroups until they are empty (a process forked meanwhile is
        caught on the next pass)."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            pids: set[int] = set()
            for procs in self.join:
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in Path(procs).read_text().split())
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.001)

    def remove(self) -> None:
        self.kill_all()
        for path in self.folders:
            for _ in range(200):
                try:
                    path.rmdir()
                    break
                except OSError:
                    time.sleep(0.005)


#: An ``orchbench-*`` cgroup empty this long belongs to no command: a command's is joined within
#: milliseconds of being made, and removed as soon as the command ends.
STALE_CGROUP_S = 60.0


def sweep_cgroups(roots: Sequence[Path | None] | None = None) -> list[Path]:
    """Remove the per-command cgroups a kit that died left behind (SIGKILL, a second Ctrl-C's
    ``os._exit``: its command died with it, ``--die-with-parent``, its folders stayed) and return
    them: every empty ``orchbench-*`` folder under the pids root and the kit's memory cgroup made over
    :data:`STALE_CGROUP_S` ago. One with a process in it is kept (the kernel refuses to remove it).
    Called when a backend is checked (:func:`kit.sandbox.backends.check_available`)."""
    removed = []
    for root in (_cgroup_root(), _memory_cgroup_root()) if roots is None else roots:
        try:
            folders = list(root.glob("orchbench-*")) if root is not None else []
        except OSError:
            continue
        for folder in folders:
            try:
                if time.time() - folder.stat().st_mtime < STALE_CGROUP_S:
                    continue
                if (folder / "cgroup.procs").read_text().strip():
                    continue
                folder.rmdir()
            except OSError:
                continue
            removed.append(folder)
    return removed


def _rlimits(limits: ProcessLimits) -> list[tuple[int, str, int]]:
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


@functools.cache
def _death_guard() -> list[str]:
    """util-linux ``setpriv --pdeathsig KILL --`` where it has the option (2.33+), else nothing."""
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if setpriv is None:
        return []
    try:
        usage = subprocess.run([setpriv, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [setpriv, "--pdeathsig", "KILL", "--"] if "--pdeathsig" in usage else []


def _launcher(
    argv: list[str],
    limits: ProcessLimits,
    cgroup_procs: list[str] | None,
    pids_counted: bool = False,
    watch_fd: int | None = None,
) -> tuple[list[str], Callable | None]:
    """How to start ``argv`` inside the cgroup with the rlimits.

    With util-linux ``prlimit`` present: ``/bin/sh`` writes its own pid into the cgroup, then execs
    ``prlimit ... -- argv`` (no preexec_fn, so Python can vfork -- forking the kit's big process
    would cost ~20 ms per command). Without it: a preexec_fn does the same between fork and exec.
    Where ``setpriv`` has ``--pdeathsig``, the process is SIGKILLed if the kit dies, and the shell
    stops if the kit died before that was armed (its parent is no longer the kit): bwrap's own
    ``--die-with-parent`` is armed only once bwrap runs, and a kit killed before then (SIGKILL, a
    second Ctrl-C's ``os._exit``) left the command running with no timeout; bwrap's clone (the
    sandbox's pid 1) arms it only once it has set the sandbox up. So a watchdog the shell forks
    outside the cgroups kills the shell, all in them and its process group (where bwrap's clone is
    until it calls setsid) once its stdin (the kit's pipe) ends.
    """
    rlimits = _rlimits(limits)
    if pids_counted:
        # The cgroup counts this command's processes. RLIMIT_NPROC would count every process of the
        # user -- all runs' commands share the sandbox user -- so one run could starve the others.
        rlimits = [r for r in rlimits if r[0] != resource.RLIMIT_NPROC]
    prlimit = _prlimit()
    if prlimit is None:
        return argv, _preexec(rlimits, cgroup_procs)
    cmd = [prlimit, *(f"{option}={value}:{value}" for _, option, value in rlimits), "--", *argv]
    guard = _death_guard()
    if not cgroup_procs and not guard and watch_fd is None:
        return cmd, None
    check = f'[ "$PPID" = {os.getpid()} ] || exit 125; ' if guard else ""
    join = 'echo $$ > "$1" || exit 125; shift; ' * len(cgroup_procs or [])
    if watch_fd is not None:  # the pipe is stdin (sh gives an async list /dev/null); at last its group
        kill = f'p=$(cat {shlex.join(cgroup_procs or [])}); [ -z "$p" ] && break; kill -9 $p; i=$((i+1))'
        loop = f"i=0; while [ $i -lt 1000 ]; do {kill}; done; " if cgroup_procs else ""
        watch = f"read _ <&{watch_fd}; kill -9 $$; {loop}kill -9 -$$"
        join = f"exec {watch_fd}<&0 </dev/null; ({watch}) >/dev/null 2>&1 & exec {watch_fd}<&-; " + join
    return [*guard, "/bin/sh", "-c", check + join + 'exec "$@"', "sh", *(cgroup_procs or []), *cmd], None


def _preexec(rlimits: list[tuple[int, str, int]], cgroup_procs: list[str] | None) -> Callable[[], None]:
    """Runs in the child between fork and exec: join the cgroups, set the rlimits."""

    def apply() -> None:
        for procs in cgroup_procs or []:
            fd = os.open(procs, os.O_WRONLY)
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


class _HeadTail:
    """A command's output as it comes, keeping only its first and last ``half`` bytes."""

    def __init__(self, half: int) -> None:
        self.half = half
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def read_all(self, stream) -> None:  # noqa: ANN001 - the Popen's stdout
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                break
            self.total += len(chunk)
            room = self.half - len(self.head)
            if room > 0:
                self.head.extend(chunk[:room])
                chunk = chunk[room:]
            if chunk:
                self.tail.extend(chunk)
                if len(self.tail) > self.half:
                    del self.tail[: len(self.tail) - self.half]

    def text(self) -> tuple[str, int]:
        """The kept output (a marker where the middle was dropped) and how many bytes were dropped."""
        truncated = max(self.total - len(self.head) - len(self.tail), 0)
        text = self.head.decode("utf-8", "replace")
        if truncated > 0:
            text += f"\n[... {truncated} chars truncated ...]\n"
        return text + self.tail.decode("utf-8", "replace"), truncated


def run_process(
    argv: list[str],
    cwd: Path,
    *,
    timeout_s: float,
    limits: ProcessLimits,
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
    cgroup = _Cgroup.make(limits)
    started = time.monotonic()
    watch = os.pipe() if _prlimit() else ()  # the launcher's watchdog's stdin: ends when the kit dies
    digit = max(set(range(3, 10)) - set(pass_fds), default=None) if watch else None  # (sh: fds 0-9)
    launch, preexec = _launcher(
        argv, limits, cgroup.join if cgroup else None, bool(cgroup and cgroup.pids), digit
    )
    try:
        proc = subprocess.Popen(
            launch,
            cwd=str(cwd),
            env=env,
            stdin=watch[0] if digit else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            preexec_fn=preexec,
        )
    except BaseException:
        if cgroup:
            cgroup.remove()
        list(map(os.close, watch))
        raise
    else:
        list(map(os.close, watch[:1]))  # (the write end once the command has ended)
    output = _HeadTail(max(max_output_chars // 2, 1))
    thread = threading.Thread(target=output.read_all, args=(proc.stdout,), daemon=True)
    thread.start()
    timed_out = False
    try:
        timed_out = not _wait(proc, timeout_s)
    finally:
        _kill_group(proc.pid)  # the watchdog too
        if cgroup:
            cgroup.remove()
        proc.wait()
        list(map(os.close, watch[1:]))
    thread.join(timeout=5)
    with contextlib.suppress(Exception):
        proc.stdout.close()  # type: ignore[union-attr]
    text, truncated = output.text()
    return Result(
        exit_code=None if timed_out else proc.returncode,
        output=text,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        truncated_chars=truncated,
    )


def __getattr__(name: str) -> object:  # names renamed in the layout move, for one release (kit.aliases)
    from kit import aliases

    return aliases.renamed(__name__, name)
