"""One pytest session for scoring: in a fresh sandbox, results streamed through a pipe, canaries checked.

The session runs ``python -I -B launcher.py`` (see that module) with the kit's plugin
(``plugin.py``), both copied to a kit-owned folder outside the repo copy that the sandbox sees
read-only. The plugin writes each test's final outcome to the write end of a pipe passed into the
sandbox; the kit reads the other end while the tests run, so nothing the tested code does at exit can
rewrite what was already sent. The kit then checks the stream (:mod:`.stream`): anything amiss is
evidence of tampering (``PytestRun.tampered``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import secrets
import select
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from kit.sandbox.backends import Result, Sandbox, sandbox_env
from kit.scoring.stream import Expect, Stream, read_stream  # noqa: F401 - re-exported
from kit.tasks.transitions import Outcome

KIT_DIR = Path(__file__).resolve().parent
PLUGIN_FILE = "plugin.py"
LAUNCHER_FILE = "launcher.py"
OBSERVE_FILE = "observe.py"
AUDIT_FILE = "audit.py"
PRELOAD_FILE = "preload.py"
STACKTEXT_FILE = "stacktext.py"
THREADS_FILE = "threads.py"
PINNED_FILE = "pinned.py"
GUARD_FILE = "guard.py"
DATAREAD_FILE = "dataread.py"
NODEIDS_FILE = "nodeids.py"
MAX_STREAM_BYTES = 32 * 1024 * 1024


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

    def in_form(self, prefix: str, suffix: str) -> Canaries:
        """The same canaries named ``prefix`` + hex + ``suffix`` (the form a configuration that
        collects no ``test_*`` does: :mod:`.naming`; a suffix form's name starts with a letter)."""
        names = (n.removeprefix("test_") for n in (self.passing, self.failing))
        return Canaries(*((prefix or "t") + n + suffix for n in names), self.token)

    def write(self, folder: Path, stem: str = "") -> Path:
        """A test file holding both canaries (dressed like acceptance tests), in ``folder``
        (``test_`` + ``stem``, by default the token)."""
        a, b = (int(self.token[i : i + 6], 16) for i in (0, 6))
        path = Path(folder) / f"test_{stem or self.token}.py"
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
    reads: dict[str, set[str]] = field(default_factory=dict)  # data files read (``record``): path -> by
    cut_shadows: set[str] = field(default_factory=set)  # requirements whose twin's shadow was cut
    failed_shadows: dict[str, str] = field(default_factory=dict)  # requirement -> its failed shadow's message
    seconds: dict[str, float] = field(default_factory=dict)  # nodeid -> seconds it took (as reported)

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


KIT_FILES = (
    PLUGIN_FILE,
    LAUNCHER_FILE,
    OBSERVE_FILE,
    AUDIT_FILE,
    PRELOAD_FILE,
    STACKTEXT_FILE,
    THREADS_FILE,
    PINNED_FILE,
    GUARD_FILE,
    DATAREAD_FILE,
    NODEIDS_FILE,
)
_PYC: dict[tuple[str, bytes], bytes] = {}  # (name, source) -> its bytecode file, made once a process
_PYC_LOCK = threading.Lock()


def prepare_kit_dir(folder: Path) -> Path:
    """The kit-owned folder the sandbox sees read-only: the launcher, the plugin, its sealed checks'
    side (``observe.py``), its audit hook (``audit.py``), its pins of unittest's asserts (``pinned.py``)
    and ``guard.py`` -- each with its bytecode beside it in ``__pycache__`` (hash-checked against the
    source: the sessions, started with ``-B``, read it and write none), so no session compiles the
    kit's own modules again (about 20-30 ms a session)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in KIT_FILES:
        source = (KIT_DIR / name).read_bytes()
        (folder / name).write_bytes(source)
        if name != LAUNCHER_FILE:  # (run as a script: Python compiles a script every time)
            pyc = Path(importlib.util.cache_from_source(str(folder / name)))
            pyc.parent.mkdir(exist_ok=True)
            pyc.write_bytes(_bytecode(name, source))
    return folder


def _bytecode(name: str, source: bytes) -> bytes:
    """``source``'s bytecode file, hash-checked (no timestamp: the copy's mtime does not matter)."""
    with _PYC_LOCK:
        if (name, source) not in _PYC:
            with tempfile.TemporaryDirectory(prefix="orchbench-pyc-") as tmp:
                src, out = Path(tmp) / name, Path(tmp) / f"{name}c"
                src.write_bytes(source)
                py_compile.compile(
                    str(src),
                    str(out),
                    doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
                )
                _PYC[name, source] = out.read_bytes()
        return _PYC[name, source]


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
    pins: list[Path] | None = None,
) -> PytestRun:
    """One pytest session over ``repo`` (its working folder) in a fresh sandbox.

    ``kit_dir`` (from :func:`prepare_kit_dir`) is visible read-only; ``canary_file`` is added to the
    collected paths (its tests run last); ``hidden``: the hidden tests' folder, watched by the audit
    hook (``audit.py``) -- in an own-tests session the canary file's folder. ``extra``: more
    settings for the launcher and plugin (``packages``, ``package_roots``, ``audit``); ``ro_files``:
    files and folders of ``repo`` the session may not write (the laid hidden files of the ``repo``
    layout); ``pins``: folders of ``repo`` it may not rename or remove (those on the laid files' paths).
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
        # the settings (canary names, the hidden folder, what the audit hook is told of the copy)
        # go through a pipe the launcher reads whole and closes before any code under test loads:
        # no file in the sandbox holds them
        settings_read = _feed(json.dumps(settings).encode())
        argv = [sys.executable, "-I", "-B", str(kit_dir / LAUNCHER_FILE), str(settings_read)]
        try:
            ro_binds = [kit_dir, *(ro_files or [])]
            res = _run(
                sandbox,
                argv,
                repo,
                timeout_s,
                ro_binds=ro_binds,
                pass_fds=[pipe.write_fd, settings_read],
                pins=pins or [],
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
        got.reads,
        got.cut_shadows,
        got.failed_shadows,
        got.seconds,
    )


def _feed(data: bytes) -> int:
    """The read end of a pipe a thread fills with ``data`` (then closes), whatever its size."""
    read_fd, write_fd = os.pipe()

    def write() -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view) :]
        except OSError:
            pass  # the session never read it (it failed to start): its result says so
        finally:
            os.close(write_fd)

    threading.Thread(target=write, daemon=True).start()
    return read_fd


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
