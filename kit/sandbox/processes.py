"""Running one command as a bounded process tree -- the part both sandbox backends share.

:func:`run_process` starts the command in a new session, applies the rlimits (CPU seconds, address
space, processes, file size) through util-linux ``prlimit`` (or a preexec fallback), puts it in its own
``pids`` cgroup where one is writable (the kernel ignores RLIMIT_NPROC for root, and the cgroup is how
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
import shutil
import signal
import subprocess
import threading
import time
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


@dataclass
class Result:
    exit_code: int | None  # None when killed on timeout
    output: str  # combined stdout+stderr, head and tail kept
    timed_out: bool
    duration_s: float
    truncated_chars: int = 0


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


@functools.cache
def _memory_cgroup_root() -> Path | None:
    """The kit's own memory cgroup (v1: ``memory.limit_in_bytes``), in which it may create one per
    command to cap the memory of the whole process tree; None where none is writable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" not in controllers.split(","):
            continue
        base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
        probe = base / f"orchbench-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            return None
        try:
            return base if (probe / "memory.limit_in_bytes").exists() else None
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return None


def memory_limit_mechanism() -> str:
    """How the memory of a command's whole process tree is capped: ``cgroup memory`` or ``none``
    (each process still has its ``RLIMIT_AS``)."""
    return "cgroup memory" if _memory_cgroup_root() is not None else "none (RLIMIT_AS per process only)"


def process_limit_mechanism() -> str:
    """How ``ProcessLimits.processes`` is enforced here: ``cgroup pids.max``, ``RLIMIT_NPROC`` or ``none``."""
    if _cgroup_root() is not None:
        return "cgroup pids.max"
    return "RLIMIT_NPROC" if os.getuid() != 0 else "none (root without a writable pids cgroup)"


class _Cgroup:
    """One command's pids cgroup: limits the process count, lists every process to kill at the end;
    and, where one can be made, its memory cgroup: caps the whole tree's memory."""

    def __init__(self, root: Path, max_pids: int, memory_mb: int) -> None:
        # a random name: neither the kit's pid nor a count of commands (a command may see its cgroup)
        self.path = root / f"orchbench-{secrets.token_hex(8)}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(max_pids))
        self.procs = str(self.path / "cgroup.procs")
        self.memory: Path | None = None
        memory_root = _memory_cgroup_root()
        if memory_root is not None:
            self.memory = memory_root / self.path.name
            try:
                self.memory.mkdir()
                (self.memory / "memory.limit_in_bytes").write_text(str(memory_mb * 2**20))
                with contextlib.suppress(OSError):  # memory and swap together, where swap is counted
                    (self.memory / "memory.memsw.limit_in_bytes").write_text(str(memory_mb * 2**20))
            except OSError:
                self.memory = None

    @property
    def join(self) -> list[str]:
        """The ``cgroup.procs`` files a command's first process writes its pid to."""
        return [self.procs, *([str(self.memory / "cgroup.procs")] if self.memory else [])]

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
        for path in [self.path, *([self.memory] if self.memory else [])]:
            for _ in range(200):
                try:
                    path.rmdir()
                    break
                except OSError:
                    time.sleep(0.005)


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


def _launcher(
    argv: list[str], limits: ProcessLimits, cgroup_procs: list[str] | None
) -> tuple[list[str], Callable | None]:
    """How to start ``argv`` inside the cgroup with the rlimits.

    With util-linux ``prlimit`` present: ``/bin/sh`` writes its own pid into the cgroup, then execs
    ``prlimit ... -- argv`` (no preexec_fn, so Python can vfork -- forking the kit's big process
    would cost ~20 ms per command). Without it: a preexec_fn does the same between fork and exec.
    """
    rlimits = _rlimits(limits)
    if cgroup_procs is not None:
        # The cgroup counts this command's processes. RLIMIT_NPROC would count every process of the
        # user -- all runs' commands share the sandbox user -- so one run could starve the others.
        rlimits = [r for r in rlimits if r[0] != resource.RLIMIT_NPROC]
    prlimit = _prlimit()
    if prlimit is None:
        return argv, _preexec(rlimits, cgroup_procs)
    cmd = [prlimit, *(f"{option}={value}:{value}" for _, option, value in rlimits), "--", *argv]
    if cgroup_procs is None:
        return cmd, None
    join = 'echo $$ > "$1" || exit 125; shift; '
    if len(cgroup_procs) > 1:
        join += 'echo $$ > "$1" || exit 125; shift; '
    return ["/bin/sh", "-c", join + 'exec "$@"', "sh", *cgroup_procs, *cmd], None


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
    root = _cgroup_root()
    cgroup = _Cgroup(root, limits.processes, limits.memory_mb) if root is not None else None
    started = time.monotonic()
    launch, preexec = _launcher(argv, limits, cgroup.join if cgroup else None)
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
    output = _HeadTail(max(max_output_chars // 2, 1))
    thread = threading.Thread(target=output.read_all, args=(proc.stdout,), daemon=True)
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
