"""Keeping an experiment under control: one writer per results folder, and Ctrl-C.

* :class:`ResultsLock` -- an advisory ``fcntl`` lock on ``<results>/<experiment>/.lock``, held for the
  whole of ``kit run``. A second ``kit run`` on the same folder fails at once, naming the holder's
  PID (two writers would run the same runs twice and delete each other's run folders). The kernel
  drops the lock when the process dies, so a killed run never leaves a stale lock behind.
* :class:`Interrupts` -- the first Ctrl-C (SIGINT) *drains*: no new run starts, runs in flight get
  ``grace_s`` seconds to finish, then ``stop`` is set and their agents stop at the next step (the
  run is recorded as ``interrupted`` and redone by the next ``kit run``). The second Ctrl-C sets
  ``stop`` and raises KeyboardInterrupt at once; the CLI then exits without waiting for anything
  (runs in flight are left torn, and redone next time).
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType, TracebackType

from kit.errors import ResultsError

LOCK_FILE = ".lock"


class ResultsLock:
    """``with ResultsLock(folder):`` -- exclusive, non-blocking; raises ResultsError when held."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> ResultsLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise ResultsError(
                f"cannot write to the results folder {self.path.parent}: {e.strerror or e}",
                "pick a writable folder with --results (or fix its permissions)",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self.holder()
            raise ResultsError(
                f"{self.path.parent} is being written by another `kit run` "
                f"(PID {holder or 'unknown'}); two runners on one folder would run the same runs twice",
                "wait for it to finish, or stop that process first (Ctrl-C in its terminal, or "
                f"kill {holder or 'PID'})",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder(self) -> int | None:
        """The PID written by the process holding the lock (None if it has not written it yet)."""
        for _ in range(20):  # the holder writes its PID right after taking the lock
            try:
                text = self.path.read_text(encoding="ascii", errors="replace").strip()
            except OSError:
                return None
            if text.isdigit():
                return int(text)
            time.sleep(0.01)
        return None


class Interrupts:
    """SIGINT handling for the length of a ``with`` block (main thread only; elsewhere it does nothing).

    ``draining``: set by the first Ctrl-C -- start no new run. ``stop``: set ``grace_s`` seconds later
    (by :meth:`tick`, which the thread executor's loop calls) or by the second Ctrl-C -- agents stop
    at their next step.
    """

    def __init__(self, grace_s: float = 30.0) -> None:
        self.grace_s = grace_s
        self.draining = threading.Event()
        self.stop = threading.Event()
        self._deadline: float | None = None
        self._previous: object = None
        self._installed = False
        self.sigints = 0

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
            self._installed = False

    def drain(self, reason: str = "", grace_s: float | None = None) -> None:
        """Start no new run; stop the ones in flight after ``grace_s`` (default: the configured grace)."""
        if self.draining.is_set():
            return
        grace = self.grace_s if grace_s is None else grace_s
        self._deadline = time.monotonic() + grace
        self.draining.set()
        if reason:
            print(reason, file=sys.stderr, flush=True)
        if grace <= 0:
            self.stop.set()

    def tick(self) -> None:
        """Set ``stop`` once the grace period of a drain is over."""
        if self._deadline is not None and time.monotonic() >= self._deadline:
            self.stop.set()

    @property
    def interrupted(self) -> bool:
        """Ctrl-C was pressed (a drain may also come from a storage error)."""
        return self.sigints > 0

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.sigints += 1
        if self.sigints == 1:
            self.drain(
                f"\ninterrupt: no new runs start; runs in flight get {self.grace_s:g} s to finish, then "
                "stop and are recorded as `interrupted` (redone by the next `kit run`). "
                "Ctrl-C again to stop at once."
            )
            return
        self.stop.set()
        raise KeyboardInterrupt
