"""One pytest session for scoring: in a fresh sandbox, results streamed through a pipe, canaries checked.

The session runs ``python -I -B launcher.py`` (see that module) with the kit's plugin
(``plugin.py``), both copied to a kit-owned folder outside the repo copy that the sandbox sees
read-only. The plugin writes each test's final outcome to the write end of a pipe passed into the
sandbox; the kit reads the other end while the tests run, so nothing the tested code does at exit can
rewrite what was already sent. The kit then checks the stream:

- every line well formed and in sequence, no test reported twice, nothing after the session's end;
- the two **canaries** -- tests with per-run random names, one that must pass and one that must fail,
  run after everything else -- have exactly those outcomes, and are present when the session finished;
- pytest's end status agrees with the process's exit status (a canary always fails, so a finished
  session ends with status 1).

Any violation is evidence of tampering (``PytestRun.tampered``). A session that did not finish
(timeout, crash, ``os._exit`` at import) is not tampering: the tests it did not report have not passed.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from kit.records.schema import encodable
from kit.sandbox.backends import Sandbox, sandbox_env

KIT_DIR = Path(__file__).resolve().parent
PLUGIN_FILE = "plugin.py"
LAUNCHER_FILE = "launcher.py"
MAX_STREAM_BYTES = 32 * 1024 * 1024
EXIT_NAMES = {
    0: "ok",
    1: "tests failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests",
}


@dataclass(frozen=True)
class Canaries:
    """Two test names, random per run: ``passing`` must pass, ``failing`` must fail."""

    passing: str
    failing: str
    token: str

    @classmethod
    def new(cls) -> Canaries:
        return cls(f"test_{secrets.token_hex(6)}", f"test_{secrets.token_hex(6)}", secrets.token_hex(6))

    def write(self, folder: Path) -> Path:
        """A test file holding both canaries (dressed like acceptance tests), in ``folder``."""
        a, b = (int(self.token[i : i + 6], 16) for i in (0, 6))
        path = Path(folder) / f"test_{self.token}.py"
        path.write_text(
            "import pytest\n\n\n"
            f'@pytest.mark.severity("major")\ndef {self.passing}():\n    assert {a} + {b} == {a + b}\n\n\n'
            f'@pytest.mark.severity("major")\ndef {self.failing}():\n    assert {a} * {b} == {a * b + 1}\n',
            encoding="utf-8",
        )
        return path

    @property
    def names(self) -> list[str]:
        return [self.passing, self.failing]


@dataclass
class PytestRun:
    outcomes: dict[str, tuple[bool, str]]  # nodeid -> (passed, message); canaries left out
    exit_code: int | None
    output: str
    timed_out: bool
    errors: list[str] = field(default_factory=list)  # collection errors, an unfinished session ...
    complete: bool = False  # the session (or command) ran to its end
    tampered: list[str] = field(default_factory=list)  # evidence the report was tampered with

    @property
    def passed(self) -> set[str]:
        return {k for k, (ok, _) in self.outcomes.items() if ok}


def prepare_kit_dir(folder: Path) -> Path:
    """The kit-owned folder the sandbox sees read-only: the launcher and the plugin."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in (PLUGIN_FILE, LAUNCHER_FILE):
        shutil.copyfile(KIT_DIR / name, folder / name)
    return folder


# --------------------------------------------------------------------------- reading the stream


class _PipeReader:
    """Reads the pipe's read end in a thread while the session runs (the pipe never fills up)."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.data = bytearray()
        self.overflow = False
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self.read_fd], [], [], 0.1)
            if not ready:
                if self.stop.is_set():
                    return
                continue
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                return
            if len(self.data) + len(chunk) > MAX_STREAM_BYTES:
                self.overflow = True
            else:
                self.data.extend(chunk)

    def finish(self) -> bool:
        """Close the kit's write end and collect the rest; False if something still holds the pipe."""
        os.close(self.write_fd)
        self.thread.join(timeout=3)
        held = self.thread.is_alive()
        self.stop.set()
        self.thread.join(timeout=2)
        os.close(self.read_fd)
        return not held


def read_stream(
    data: bytes, canaries: Canaries, exit_code: int | None, timed_out: bool, timeout_s: float = 0
) -> tuple[dict[str, tuple[bool, str]], list[str], bool, list[str]]:
    """(outcomes, errors, complete, tamper evidence) from the plugin's stream and the exit status."""
    outcomes: dict[str, tuple[bool, str]] = {}
    errors: list[str] = []
    tamper: list[str] = []
    seen: dict[str, bool] = {}
    end: int | None = None
    lines = bytes(data).split(b"\n")
    cut = lines.pop()  # whatever follows the last newline: empty unless a write was cut off
    for seq, line in enumerate(lines, start=1):
        try:
            msg = encodable(json.loads(line))  # a lone surrogate (a test's message) replaced
            kind, nodeid = msg["kind"], msg.get("nodeid", "")
            if msg["seq"] != seq or not isinstance(nodeid, str):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            tamper.append(f"report line {seq} is garbled or out of sequence")
            continue
        if end is not None:
            tamper.append(f"report line {seq} came after the session ended")
        elif kind == "test":
            passed, message = msg.get("passed"), msg.get("message", "")
            if not isinstance(passed, bool) or not isinstance(message, str):
                tamper.append(f"report line {seq} is garbled")
            elif nodeid in outcomes or nodeid in seen:
                tamper.append(f"test reported twice: {nodeid}")
            elif nodeid.rsplit("::", 1)[-1] in canaries.names:
                seen[nodeid.rsplit("::", 1)[-1]] = passed
                seen[nodeid] = passed
            else:
                outcomes[nodeid] = (passed, message[:300])
        elif kind == "collect":
            errors.append(f"{nodeid or 'collection'}: {str(msg.get('message', ''))[:300]}")
        elif kind == "end" and isinstance(msg.get("exitstatus"), int):
            end = msg["exitstatus"]
        else:
            tamper.append(f"report line {seq} is of an unknown kind")
    if cut and end is not None:
        tamper.append("a partial report line after the session ended")
    for name, want in ((canaries.passing, True), (canaries.failing, False)):
        got = seen.get(name)
        label = "canary test that must " + ("pass" if want else "fail")
        if got is not None and got != want:
            tamper.append(f"{label} was reported {'passed' if got else 'failed'}")
        elif got is None and end == 1:
            tamper.append(f"{label} is missing from a finished session")
    if end is None:
        errors.append(
            f"timed out after {timeout_s:g} s" if timed_out else f"pytest did not finish (exit {exit_code})"
        )
    else:
        if end == 0:
            tamper.append("pytest reported success although a canary test must fail")
        elif end != 1:
            errors.append(f"pytest ended with status {end} ({EXIT_NAMES.get(end, 'unknown')})")
        if exit_code is not None and exit_code != end:
            if 0 <= exit_code <= 5:
                tamper.append(f"pytest ended with status {end} but the process exited with {exit_code}")
            else:
                errors.append(f"the process exited with {exit_code} after pytest ended with status {end}")
    return outcomes, errors, end in (0, 1), tamper


# --------------------------------------------------------------------------- running a session


def run_pytest(
    sandbox: Sandbox,
    repo: Path,
    kit_dir: Path,
    label: str,
    args: list[str],
    canaries: Canaries,
    timeout_s: float,
    canary_file: Path | None = None,
) -> PytestRun:
    """One pytest session over ``repo`` (its working folder) in a fresh sandbox.

    ``kit_dir`` (from :func:`prepare_kit_dir`) is visible read-only; ``canary_file`` is added to the
    collected paths (when the canaries are not already inside a collected folder).
    """
    pipe = _PipeReader()
    try:
        settings = {
            "plugin": str(kit_dir / PLUGIN_FILE),
            "fd": pipe.write_fd,
            "canary_file": str(canary_file) if canary_file else None,
            "canaries": canaries.names,
            "repo": str(Path(repo).resolve()),
            "args": args,
        }
        settings_file = kit_dir / f"{label}.json"
        settings_file.write_text(json.dumps(settings), encoding="utf-8")
        argv = [sys.executable, "-I", "-B", str(kit_dir / LAUNCHER_FILE), str(settings_file)]
        res = sandbox.run(
            argv,
            repo,
            writable=True,
            timeout_s=timeout_s,
            env=sandbox_env({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}),
            ro_binds=[kit_dir],
            pass_fds=[pipe.write_fd],
            max_output_chars=20_000,
        )
    finally:
        released = pipe.finish()
    outcomes, errors, complete, tamper = read_stream(
        bytes(pipe.data), canaries, res.exit_code, res.timed_out, timeout_s
    )
    if pipe.overflow:
        tamper.append(f"report stream larger than {MAX_STREAM_BYTES // 2**20} MB")
    if not released:
        errors.append("a process outlived the session holding the report pipe")
    return PytestRun(outcomes, res.exit_code, res.output, res.timed_out, errors, complete, tamper)


def run_shell(sandbox: Sandbox, repo: Path, command: str, timeout_s: float) -> PytestRun:
    """A test command that is not pytest: one pass/fail outcome from its exit status."""
    res = sandbox.run(
        command,
        repo,
        writable=True,
        timeout_s=timeout_s,
        env=sandbox_env({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}),
        max_output_chars=20_000,
    )
    ok = res.exit_code == 0 and not res.timed_out
    errors = [f"timed out after {timeout_s:g} s"] if res.timed_out else []
    outcome = {command: (ok, "" if ok else res.output[-300:])}
    return PytestRun(outcome, res.exit_code, res.output, res.timed_out, errors, not res.timed_out)
