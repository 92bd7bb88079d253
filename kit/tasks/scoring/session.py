"""One pytest session for scoring: in a fresh sandbox, results streamed through a pipe, canaries checked.

The session runs ``python -I -B launcher.py`` (see that module) with the kit's plugin
(``plugin.py``), both copied to a kit-owned folder outside the repo copy that the sandbox sees
read-only. The plugin writes each test's final outcome to the write end of a pipe passed into the
sandbox; the kit reads the other end while the tests run, so nothing the tested code does at exit can
rewrite what was already sent. The kit then checks the stream:

- every line well formed and in sequence, no test reported twice, nothing after the session's end;
- every **canary** -- in the acceptance session two inside each test module (:mod:`.inject`), in an
  own-tests session the two of a kit canary file run last -- is present with its expected outcome;
- the session ended normally: pytest's own end of session reached with status 1 (a canary always
  fails), and the process's exit status agrees.

Any violation is evidence of tampering (``PytestRun.tampered``): an early ``os._exit`` after some
outcomes were streamed, a hang until the scoring timeout, an interrupted session (status 2), a missing
canary. Only a session whose stream holds no line at all (the sandbox or the interpreter failed before
the plugin started) is an error rather than tampering. The outcomes of the must-fail twins
(:mod:`.twins`) and what the audit hook saw are returned apart.
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
from kit.sandbox.backends import Result, Sandbox, sandbox_env
from kit.tasks.transitions import Outcome

KIT_DIR = Path(__file__).resolve().parent
PLUGIN_FILE = "plugin.py"
LAUNCHER_FILE = "launcher.py"
OBSERVE_FILE = "observe.py"
AUDIT_FILE = "audit.py"
MAX_STREAM_BYTES = 32 * 1024 * 1024
_OUTCOMES = frozenset(o.value for o in Outcome if o is not Outcome.ABSENT)
_PASSING = frozenset({Outcome.PASSED.value, Outcome.XPASSED.value})  # what pytest calls passed
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
    """The own-tests canary file: two test names, random per run; ``passing`` must pass, ``failing``
    must fail. (The acceptance session's canaries sit inside its modules: :mod:`.inject`.)"""

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

    def expect(self) -> Expect:
        return Expect({self.passing: ("", True), self.failing: ("", False)})


@dataclass
class Expect:
    """The tests the kit added to a session, by test function name: canaries (name -> (node id of
    the module they sit in, "" for the own-tests canary file; must pass)) and twins (name ->
    requirement key)."""

    canaries: dict[str, tuple[str, bool]]
    twins: dict[str, str] = field(default_factory=dict)
    sealed: dict[str, str] = field(default_factory=dict)  # sealed check id -> expected digest (seal.py)
    observer: str = ""  # the name they call


@dataclass
class Stream:
    """What a session's report stream says, checked."""

    outcomes: dict[str, tuple[bool, str]] = field(default_factory=dict)  # nodeid -> (passed, message)
    #: nodeid -> its outcome in :mod:`kit.tasks.transitions`' words (passed, skipped, xfailed, ...)
    states: dict[str, str] = field(default_factory=dict)
    twins: dict[str, list[bool]] = field(default_factory=dict)  # requirement key -> its twin passed?
    errors: list[str] = field(default_factory=list)  # collection errors, a session that never started
    complete: bool = False  # pytest reached its own end of session
    tamper: list[str] = field(default_factory=list)  # evidence the session or its report was bent
    seen: list[str] = field(default_factory=list)  # introspection by the code under test (audit hook)
    #: sealed check -> (times sent, the first value that did not match, "" if none)
    observed: dict[str, tuple[int, str | None]] = field(default_factory=dict)


@dataclass
class PytestRun:
    outcomes: dict[str, tuple[bool, str]]  # nodeid -> (passed, message); canaries and twins left out
    exit_code: int | None
    output: str
    timed_out: bool
    errors: list[str] = field(default_factory=list)  # collection errors, a session never started ...
    complete: bool = False  # the session (or command) ran to its end
    tampered: list[str] = field(default_factory=list)  # evidence the session or report was tampered with
    twins: dict[str, list[bool]] = field(default_factory=dict)  # requirement key -> twin outcomes
    seen: list[str] = field(default_factory=list)  # introspection seen by the audit hook
    observed: dict[str, tuple[int, str | None]] = field(default_factory=dict)  # sealed check -> (sent, miss)
    #: nodeid -> outcome (:class:`kit.tasks.transitions.Outcome`); ``passed`` above is True for an
    #: xpassed test too (as pytest says), this tells them apart
    states: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> set[str]:
        return {k for k, (ok, _) in self.outcomes.items() if ok}

    def state(self, nodeid: str) -> Outcome:
        """What test ``nodeid`` did (``absent`` when it is not in the session): read this, not
        :func:`kit.tasks.transitions.outcome_of`, whose (passed, message) cannot tell an xpass."""
        if nodeid in self.states:
            return Outcome(self.states[nodeid])  # (the reader let only the known ones in)
        if nodeid in self.outcomes:  # a shell command's one outcome
            return Outcome.PASSED if self.outcomes[nodeid][0] else Outcome.FAILED
        return Outcome.ABSENT


def prepare_kit_dir(folder: Path) -> Path:
    """The kit-owned folder the sandbox sees read-only: the launcher, the plugin, its sealed checks'
    side (``observe.py``) and its audit hook (``audit.py``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in (PLUGIN_FILE, LAUNCHER_FILE, OBSERVE_FILE, AUDIT_FILE):
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


class _Reader:
    """Reads a report stream line by line (:func:`read_stream`)."""

    def __init__(self, expect: Expect) -> None:
        self.expect = expect
        self.out = Stream()
        self.canaries: dict[str, list[bool]] = {}
        self.uncollected: list[str] = []  # nodeids of modules that failed (or skipped) collection
        self.end: int | None = None
        self.lines = 0
        self.collected: int | None = None  # how many tests pytest collected (its own line)
        self.reported: set[str] = set()  # node ids of every test reported, the kit's included

    def line(self, seq: int, line: bytes) -> None:
        out = self.out
        try:
            msg = encodable(json.loads(line))  # a lone surrogate (a test's message) replaced
            kind, nodeid = msg["kind"], msg.get("nodeid", "")
            if msg["seq"] != seq or not isinstance(nodeid, str):
                raise ValueError
        except (ValueError, KeyError, TypeError, RecursionError):  # (a nesting bomb: garbled too)
            out.tamper.append(f"report line {seq} is garbled or out of sequence")
            return
        self.lines += 1
        if self.end is not None and kind != "seen":  # the audit hook may see an exit handler
            out.tamper.append(f"report line {seq} came after the session ended")
        elif kind == "test":
            self.test(seq, nodeid, msg.get("passed"), msg.get("message", ""), msg.get("outcome"))
        elif kind == "collect":
            self.uncollected.append(nodeid)
            out.errors.append(f"{nodeid or 'collection'}: {str(msg.get('message', ''))[:300]}")
        elif kind == "collected" and isinstance(msg.get("count"), int) and self.collected is None:
            self.collected = msg["count"]
        elif kind == "obs":
            self.observation(seq, msg)
        elif kind == "seen":
            if len(out.seen) < 20:
                out.seen.append(str(msg.get("message", ""))[:300])
        elif kind == "end" and isinstance(msg.get("exitstatus"), int):
            self.end = msg["exitstatus"]
        elif kind != "start" or seq != 1:
            out.tamper.append(f"report line {seq} is of an unknown kind")

    def observation(self, seq: int, msg: dict) -> None:
        """A sealed check's value (its digest): kept by check; one the kit did not write is forged."""
        site, value, shown = msg.get("site"), msg.get("digest"), msg.get("shown", "")
        if site not in self.expect.sealed or not isinstance(value, str) or not isinstance(shown, str):
            self.out.tamper.append(f"report line {seq} is a sealed check the kit did not write")
            return
        count, miss = self.out.observed.get(site, (0, None))
        if miss is None and value != self.expect.sealed[site]:  # in a loop: every value must match
            miss = shown[:200]
        self.out.observed[site] = (count + 1, miss)

    def test(self, seq: int, nodeid: str, passed: object, message: object, state: object = None) -> None:
        out = self.out
        name = nodeid.rsplit("::", 1)[-1].split("[", 1)[0]
        self.reported.add(nodeid)
        if state is None and isinstance(passed, bool):  # (a line without one: passed or failed)
            state = Outcome.PASSED if passed else Outcome.FAILED
        if (
            not isinstance(passed, bool)
            or not isinstance(message, str)
            or state not in _OUTCOMES
            or passed != (state in _PASSING)
        ):
            out.tamper.append(f"report line {seq} is garbled")
        elif nodeid in out.outcomes or nodeid in self.canaries:
            out.tamper.append(f"test reported twice: {nodeid}")
        elif name in self.expect.canaries:
            self.canaries[nodeid] = [passed]
            self.canaries.setdefault(name, []).append(passed)
        elif name in self.expect.twins:
            self.canaries[nodeid] = [passed]  # (only to see a repeat)
            out.twins.setdefault(self.expect.twins[name], []).append(passed)
        else:
            out.outcomes[nodeid] = (passed, message[:300])
            out.states[nodeid] = str(state)

    def ran(self, module: str) -> bool:
        """Did any test of ``module`` report? (Then it was imported: its canaries are not excused.)"""
        return any(nodeid.startswith(module + "::") for nodeid in self.reported)

    def check_canaries(self) -> None:
        for name, (module, want) in self.expect.canaries.items():
            got = self.canaries.get(name)
            label = "canary test that must " + ("pass" if want else "fail")
            if got and any(g != want for g in got):
                self.out.tamper.append(f"{label} was reported {'failed' if want else 'passed'}")
            elif not got and not (module and module in self.uncollected and not self.ran(module)):
                self.out.tamper.append(f"{label} ({module or 'canary file'}) is missing from the report")


def read_stream(
    data: bytes, expect: Expect, exit_code: int | None, timed_out: bool, timeout_s: float = 0
) -> Stream:
    """The checked report of one session, from the plugin's stream and the process's exit status.

    Outcomes count only if the session was complete and verified: pytest's end of session reached
    with status 1 (a canary always fails; 5 only when no test module could be imported), the
    process's exit status the same, every canary present
    with its expected outcome (a module that failed to import excuses its own canaries), nothing
    garbled, repeated or after the end. Anything else is tamper evidence -- an early ``os._exit``, a
    hang until the scoring timeout and an interrupted session included. A stream with no line at all
    means the session never started (the sandbox or interpreter failed): an error, not tampering.
    """
    reader = _Reader(expect)
    lines = bytes(data).split(b"\n")
    cut = lines.pop()  # whatever follows the last newline: empty unless a write was cut off
    for seq, line in enumerate(lines, start=1):
        reader.line(seq, line)
    out, end = reader.out, reader.end
    if cut and end is not None:
        out.tamper.append("a partial report line after the session ended")
    if not reader.lines and not cut:
        out.errors.append(
            f"the session never started (timed out after {timeout_s:g} s)"
            if timed_out
            else f"the session never started (exit {exit_code})"
        )
        return out
    reader.check_canaries()
    if end is not None and reader.collected is None and reader.reported:
        out.tamper.append("the session reported tests but never said how many it collected")
    elif end is not None and reader.collected is not None and len(reader.reported) < reader.collected:
        missing = reader.collected - len(reader.reported)
        out.tamper.append(f"{missing} of {reader.collected} collected tests were never reported")
    if end is None:
        out.tamper.append(
            f"the session hung until the scoring timeout ({timeout_s:g} s)"
            if timed_out
            else f"the session stopped before pytest's end (exit {exit_code})"
        )
    elif end == 0:
        out.tamper.append("pytest reported success although a canary test must fail")
    elif end == 5 and reader.uncollected and not reader.canaries and not out.outcomes:
        pass  # no module could be imported (or all were skipped): nothing ran, their canaries excused
    elif end != 1:
        out.tamper.append(f"pytest ended with status {end} ({EXIT_NAMES.get(end, 'unknown')})")
    if end is not None and exit_code != end:
        what = "hung after the session ended" if timed_out else f"exited with {exit_code}"
        out.tamper.append(f"pytest ended with status {end} but the process {what}")
    out.complete = end in (1, 5) and not out.tamper
    return out


# --------------------------------------------------------------------------- running a session


def run_pytest(
    sandbox: Sandbox,
    repo: Path,
    kit_dir: Path,
    label: str,
    args: list[str],
    expect: Expect,
    timeout_s: float,
    canary_file: Path | None = None,
    hidden: Path | None = None,
    extra: dict | None = None,
    ro_files: list[Path] | None = None,
) -> PytestRun:
    """One pytest session over ``repo`` (its working folder) in a fresh sandbox.

    ``kit_dir`` (from :func:`prepare_kit_dir`) is visible read-only; ``canary_file`` is added to the
    collected paths (its tests run last); ``hidden``: the hidden tests' folder, watched by the audit
    hook (``audit.py``) -- in an own-tests session the canary file's folder. ``extra``: more
    settings for the launcher and plugin (``packages``, ``package_roots``, ``laid``); ``ro_files``:
    files of ``repo`` the session may not write (the laid hidden files of the ``repo`` layout).
    """
    pipe = _PipeReader()
    try:
        settings = {
            "plugin": str(kit_dir / PLUGIN_FILE),
            "fd": pipe.write_fd,
            "canary_file": str(canary_file) if canary_file else None,
            "canaries": list(expect.canaries) if canary_file else [],
            "repo": str(Path(repo).resolve()),
            "hidden": str(hidden) if hidden else None,
            "shuffle": canary_file is None,  # the acceptance session: a random order
            "processes": canary_file is None,  # own tests may start processes: only seen in acceptance
            "observer": expect.observer,
            "args": args,
            **(extra or {}),
        }
        # the settings (canary names, the hidden folder) go through a pipe the launcher reads and
        # closes before any code under test loads: no file in the sandbox holds them
        data = json.dumps(settings).encode()
        settings_read, settings_write = os.pipe()
        if len(data) > 60_000:  # (a pipe holds 64 KiB: the launcher reads only after it starts)
            raise ValueError(f"scoring settings too large for their pipe ({len(data)} bytes)")
        os.write(settings_write, data)
        os.close(settings_write)
        argv = [sys.executable, "-I", "-B", str(kit_dir / LAUNCHER_FILE), str(settings_read)]
        try:
            ro_binds = [kit_dir, *(ro_files or [])]
            res = _run(
                sandbox, argv, repo, timeout_s, ro_binds=ro_binds, pass_fds=[pipe.write_fd, settings_read]
            )
        finally:
            os.close(settings_read)
    finally:
        released = pipe.finish()
    got = read_stream(bytes(pipe.data), expect, res.exit_code, res.timed_out, timeout_s)
    if pipe.overflow:
        got.tamper.append(f"report stream larger than {MAX_STREAM_BYTES // 2**20} MB")
    if not released:
        got.errors.append("a process outlived the session holding the report pipe")
    return PytestRun(
        got.outcomes,
        res.exit_code,
        res.output,
        res.timed_out,
        got.errors,
        got.complete and not got.tamper,
        got.tamper,
        got.twins,
        got.seen,
        got.observed,
        got.states,
    )


def _run(
    sandbox: Sandbox,
    argv: str | list[str],
    repo: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    **kw: object,
) -> Result:
    """``argv`` in a fresh sandbox over ``repo`` (writable), plugin autoload off, output capped."""
    full = sandbox_env({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})})
    return sandbox.run(
        argv, repo, writable=True, timeout_s=timeout_s, env=full, max_output_chars=20_000, **kw
    )


def run_shell(
    sandbox: Sandbox, repo: Path, command: str, timeout_s: float, env: dict[str, str] | None = None
) -> PytestRun:
    """A test command that is not pytest: one pass/fail outcome from its exit status (``env``: on top
    of the sandbox's -- the task's packages' ``PYTHONPATH``)."""
    res = _run(sandbox, command, repo, timeout_s, env)
    ok = res.exit_code == 0 and not res.timed_out
    errors = [f"timed out after {timeout_s:g} s"] if res.timed_out else []
    outcomes = {command: (ok, "" if ok else res.output[-300:])}
    return PytestRun(outcomes, res.exit_code, res.output, res.timed_out, errors, not res.timed_out)
