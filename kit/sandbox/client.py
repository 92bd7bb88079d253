"""Running one container client (``podman run`` / ``docker run``) for one command: its output kept head
and tail, a timeout that removes the container, and the command's extra file descriptors carried
across the client, which cannot pass them itself (Docker's client talks to a daemon).

The descriptors a caller passes (``pass_fds``: at most one the command reads -- a pipe the kit wrote
and closed -- and one it writes) travel on the container's standard streams:

- the one it **reads** is the client's standard input (``-i``): :data:`PRELUDE`, run first in the
  container, reads it whole (at most :data:`MAX_IN_BYTES`), puts it in a fresh pipe at the same
  descriptor number, and gives the command ``/dev/null`` as its standard input;
- the one it **writes** is the container's standard error: the prelude writes a random per-command
  marker line there, makes the descriptor number a copy of it, and sends the command's own standard
  error to its standard output. The kit reads the client's standard error: what comes before the
  marker is the client's own messages (kept in the output), what follows goes to the caller's
  descriptor as it comes.

So a scoring session (its settings pipe in, its report pipe out) runs unchanged in a container, with
the same descriptor numbers it was given.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from kit.sandbox.processes import Result, _HeadTail, _kill_group, _wait

MAX_IN_BYTES = 1024 * 1024

#: ``python3 -I -S -c PRELUDE MARKER IN_FD OUT_FD ARGV...`` (``-1``: no such descriptor).
PRELUDE = r"""
import os, sys
marker, in_fd, out_fd, argv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
if in_fd >= 0:
    data = bytearray()
    while len(data) <= MAX:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        data += chunk
    if len(data) > min(MAX, 60000):
        sys.exit("orchbench prelude: the descriptor's data is larger than a pipe holds")
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    if r != in_fd:
        os.dup2(r, in_fd)
        os.close(r)
    os.set_inheritable(in_fd, True)
null = os.open("/dev/null", os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
if out_fd >= 0:
    os.write(2, marker.encode() + b"\n")
    os.dup2(2, out_fd)
os.dup2(1, 2)
os.execvp(argv[0], argv)
""".replace("MAX", str(MAX_IN_BYTES))


class FdPlan:
    """Which of ``pass_fds`` the command reads (``into``) and writes (``out``); ValueError for more
    than one of each or a standard stream."""

    def __init__(self, pass_fds: Sequence[int]) -> None:
        self.into = self.out = -1
        self.marker = secrets.token_hex(16)
        for fd in pass_fds:
            if fd < 3:
                raise ValueError(f"cannot pass descriptor {fd} into a container (0-2 are its own streams)")
            mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
            if mode == os.O_RDONLY and self.into < 0:
                self.into = fd
            elif mode == os.O_WRONLY and self.out < 0:
                self.out = fd
            else:
                raise ValueError(
                    "a container command takes at most one descriptor it reads and one it writes "
                    f"(got {list(pass_fds)})"
                )

    def __bool__(self) -> bool:
        return self.into >= 0 or self.out >= 0

    def wrap(self, argv: list[str], python: str = "python3") -> list[str]:
        """``argv`` behind the prelude (nothing to do: unchanged)."""
        if not self:
            return argv
        return [python, "-I", "-S", "-c", PRELUDE, self.marker, str(self.into), str(self.out), *argv]


class _Relay:
    """Reads the client's standard error: up to the marker line it is the client's own message, then
    it goes to the caller's descriptor as it comes."""

    def __init__(self, stream, out_fd: int, marker: str) -> None:  # noqa: ANN001 - a Popen stream
        self.stream, self.out_fd, self.marker = stream, out_fd, (marker + "\n").encode()
        self.before = bytearray()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        found = False
        while chunk := self.stream.read1(65536):
            if not found:
                self.before += chunk
                at = self.before.find(self.marker)
                if at < 0:
                    del self.before[: max(len(self.before) - 65536, 0)]
                    continue
                found, chunk = True, bytes(self.before[at + len(self.marker) :])
                del self.before[at:]
            with contextlib.suppress(OSError):  # the caller closed its end: the rest is dropped
                while chunk:
                    chunk = chunk[os.write(self.out_fd, chunk) :]


@functools.cache
def _client_cwd() -> str:
    """An empty folder of the kit's own for the engine's client to start in: podman's conmon writes a
    file named ``oom`` into the folder it was started from when a container is OOM-killed (it was
    the user's working folder); removed when the kit exits."""
    folder = tempfile.mkdtemp(prefix="orchbench-client-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def run_client(
    argv: list[str],
    *,
    env: dict[str, str],
    timeout_s: float,
    max_output_chars: int,
    plan: FdPlan,
    remove: Callable[[], None],
) -> Result:
    """Run the client ``argv`` (its standard input the plan's ``into`` descriptor or nothing), keep its
    output head and tail, and on timeout -- or a client that ends while the container may live on --
    call ``remove`` (which force-removes the container) before the client's process group is killed."""
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=_client_cwd(),
        env=env,
        stdin=plan.into if plan.into >= 0 else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if plan.out >= 0 else subprocess.STDOUT,
        start_new_session=True,
    )
    output = _HeadTail(max(max_output_chars // 2, 1))
    reader = threading.Thread(target=output.read_all, args=(proc.stdout,), daemon=True)
    reader.start()
    relay = _Relay(proc.stderr, plan.out, plan.marker) if plan.out >= 0 else None
    timed_out = False
    try:
        timed_out = not _wait(proc, timeout_s)
    finally:
        cut = timed_out or proc.poll() is None
        if cut:
            remove()
        _kill_group(proc.pid)
        proc.wait()
        if cut:
            remove()  # one the engine went on to start while its client was being killed
    reader.join(timeout=5)
    if relay:
        relay.thread.join(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        with contextlib.suppress(Exception):
            stream.close()  # type: ignore[union-attr]
    text, truncated = output.text()
    if relay and relay.before:
        text += relay.before.decode("utf-8", "replace")[-2000:]
    return Result(
        exit_code=None if timed_out else proc.returncode,
        output=text,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        truncated_chars=truncated,
    )
