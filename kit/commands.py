"""Running commands for agents and for scoring: a new process group, a timeout that kills the whole
group, bounded output (head and tail kept), and an environment scrubbed of secrets with the kit's
interpreter first on PATH."""

from __future__ import annotations

import contextlib
import fnmatch
import os
import pwd
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

#: Environment variables matching any of these (case-insensitive glob on the name) never reach a
#: command the agent runs.
SECRET_ENV_PATTERNS = [
    "*API_KEY*",
    "*APIKEY*",
    "*_KEY",
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "ANTHROPIC_*",
    "OPENAI_*",
    "GEMINI_*",
    "DEEPSEEK_*",
    "LITELLM_*",
    "HF_*",
    "HUGGING_FACE_*",
    "GH_*",
    "GITHUB_*",
]


def is_secret_env(name: str) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_ENV_PATTERNS)


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """os.environ without secrets; the kit's interpreter first on PATH; no bytecode files; real HOME."""
    env = {k: v for k, v in os.environ.items() if not is_secret_env(k)}
    bin_dir = str(Path(sys.executable).parent)
    path = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != bin_dir]
    env["PATH"] = os.pathsep.join([bin_dir, *path])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        env["HOME"] = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:  # pragma: no cover - uid without a passwd entry
        env.setdefault("HOME", str(Path.home()))
    env.pop("PYTHONPATH", None)
    if extra:
        env.update(extra)
    return env


# --------------------------------------------------------------------------- running commands


@dataclass
class CommandResult:
    exit_code: int | None  # None when killed on timeout
    output: str  # combined stdout+stderr, head and tail kept
    timed_out: bool
    duration_s: float
    truncated_chars: int = 0


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_command(
    command: str | list[str],
    cwd: Path,
    timeout_s: float,
    *,
    env: dict[str, str] | None = None,
    max_output_chars: int = 10_000,
) -> CommandResult:
    """Run ``command`` (a shell string or an argv list) in its own process group.

    Output is read as it comes, keeping only the first and last ``max_output_chars // 2`` bytes, so a
    chatty command cannot fill memory. On timeout -- and in any case once the command has ended --
    the whole process group is killed with SIGKILL, so no child outlives the call.
    """
    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        shell=isinstance(command, str),
        cwd=str(cwd),
        env=env if env is not None else scrubbed_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
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
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(proc.pid)
        proc.wait()
    thread.join(timeout=5)
    with contextlib.suppress(Exception):
        proc.stdout.close()  # type: ignore[union-attr]
    truncated = total[0] - len(head) - len(tail)
    text = head.decode("utf-8", "replace")
    if truncated > 0:
        text += f"\n[... {truncated} chars truncated ...]\n"
    text += tail.decode("utf-8", "replace")
    return CommandResult(
        exit_code=None if timed_out else proc.returncode,
        output=text,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        truncated_chars=max(truncated, 0),
    )
