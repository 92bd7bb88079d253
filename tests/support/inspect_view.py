"""Inspect AI's log viewer (``inspect view``) on 127.0.0.1 for a test or a manual check: started on a
free port, waited for with a bound, always stopped (its whole process group) on the way out."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the process group of ``proc``, then SIGKILL after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def inspect_view(log_dir: Path, timeout_s: float = 90.0) -> Iterator[str]:
    """Run ``python -m inspect_ai view --log-dir LOG_DIR --host 127.0.0.1 --port <free>`` and yield its
    base URL once ``/api/log-files`` answers; stopped on exit, whatever happens."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = Path(log_dir).parent / f".inspect-view-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "inspect_ai", "view", "--log-dir", str(log_dir)]
            + ["--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"inspect view exited with {proc.returncode}: {log.read_text(errors='replace')}"
                )
            try:
                get_json(f"{base}/api/log-files", timeout=5)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"inspect view did not answer within {timeout_s} s") from None
                time.sleep(0.5)
        yield base
    finally:
        stop(proc)
