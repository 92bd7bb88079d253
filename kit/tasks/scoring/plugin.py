"""The kit's pytest plugin for scoring. It runs INSIDE the scoring sandbox, started by
``kit/tasks/scoring/launcher.py``, and imports nothing from the kit (the kit is not visible there).

- registers the kit's markers (``severity``, ``baseline_pass``);
- adds the run's canary test file to the collected paths (own-tests runs) and moves the canary tests
  to the end of the run, so a report patch installed by any earlier test also meets them; in the
  acceptance session it runs the tests of each class or module in a random order (a must-fail twin
  runs before or after its test: code that behaves one way on a first call and another way later
  meets the twin first half of the time);
- streams a start line (before any code under test loads), every test's final outcome (setup, call
  and teardown together), every collection error and the session's exit status, one JSON line each,
  to a pipe the kit reads WHILE the tests run. What was sent cannot be taken back: an exit hook can
  only append, and the kit treats anything after the end line, a repeated test or a garbled line as
  tampering;
- in the acceptance session, :class:`Audit` (an audit hook the launcher installs before any code
  under test loads) streams a ``seen`` line each time the code under test (a file of the repo copy)
  opens or lists the hidden tests, takes frames (``sys._getframe``, ``inspect.currentframe``/``stack``,
  ``traceback.extract_stack``, ``sys._current_frames``, a traceback's or generator's frame read
  directly), reads the code of a hidden test (``f_code``, ``__code__`` of a hidden test's frame or
  function, through ``inspect``/``dis`` too), walks the heap (``gc.get_objects``/``get_referrers``),
  installs a tracer, starts a process (which could read anything unseen) or calls a hidden test
  function itself (every hidden test's first statement reports its caller). The kit flags such a
  run ``suspicious``.

The functions it needs are bound at import, before any code under test is imported, so a later
monkeypatch of ``os.write`` or ``json.dumps`` does not reach the stream.
"""

from __future__ import annotations

import json
import os
import random
import sys
import sysconfig
import threading

import pytest

_write = os.write
_dumps = json.dumps
_getframe = sys._getframe
_realpath = os.path.realpath
_abspath = os.path.abspath
_fsdecode = os.fsdecode


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return (lines[0] if lines else "")[:300]


def _message(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if report.skipped:
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        return "skipped: " + _first_line(reason.removeprefix("Skipped: "))[:200]
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", ""):
        return _first_line(crash.message) or "failed"
    text = str(longrepr)
    cause = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ") and ln[1:].strip()]
    if cause:  # a collection error: its first line says where, its last `E` line what
        return f"{_first_line(text)} {cause[-1]}"[:300]
    return _first_line(text) or "failed"


class StreamReporter:
    """One per pytest session; ``fd`` is the write end of the kit's pipe."""

    def __init__(
        self, fd: int, canary_file: str | None, canary_names: list[str], shuffle: bool = False
    ) -> None:
        self.fd = fd
        self.canary_file = canary_file
        self.canaries = set(canary_names)
        self.shuffle = shuffle
        self.seq = 0
        self.pending: dict[str, tuple[bool, str]] = {}
        self.ended = False
        self.lock = threading.Lock()
        os.set_inheritable(fd, False)  # commands the tests start do not get the pipe
        self.send(kind="start")

    def send(self, **msg: object) -> None:
        with self.lock:
            self.seq += 1
            data = (_dumps({"seq": self.seq, **msg}) + "\n").encode()
            while data:
                data = data[_write(self.fd, data) :]

    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", "severity(level): requirement severity: critical, major or minor")
        config.addinivalue_line(
            "markers", "baseline_pass: this acceptance test may pass on the starting code"
        )
        if self.canary_file:
            config.args.append(self.canary_file)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        canaries = [i for i in items if i.name in self.canaries]
        items[:] = [i for i in items if i.name not in self.canaries] + canaries
        if self.shuffle:  # a random order inside each class or module: a test and its twin either way
            rng = random.SystemRandom()
            groups: dict[object, list[pytest.Item]] = {}
            for item in items:
                groups.setdefault(item.parent, []).append(item)
            for group in groups.values():
                rng.shuffle(group)
            items[:] = [item for group in groups.values() for item in group]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if not report.passed:
            self.send(kind="collect", nodeid=report.nodeid, message=_message(report))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        ok, message = self.pending.get(report.nodeid, (True, ""))
        if ok and not report.passed:  # the first failure (or skip) of setup, call, teardown counts
            ok, message = False, _message(report)
        if report.when == "teardown":
            self.pending.pop(report.nodeid, None)
            self.send(kind="test", nodeid=report.nodeid, passed=ok, message=message)
        else:
            self.pending[report.nodeid] = (ok, message)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, exitstatus: int) -> None:
        self.send(kind="end", exitstatus=int(exitstatus))
        self.ended = True


#: stdlib modules that only look at frames or read source on behalf of their caller: an event they
#: raise is charged to the code that called them
_HELPERS = frozenset({"inspect.py", "traceback.py", "linecache.py", "tokenize.py", "dis.py"})
_TAKE = frozenset(
    {"sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile"}
    | {"gc.get_objects", "gc.get_referrers", "gc.get_referents"}
)
_READ = frozenset(
    {"f_code", "__code__", "tb_frame", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame"}
)
_FILES = frozenset({"open", "os.listdir", "os.scandir"})
_FRAMES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
#: a process started by the code under test reads what it likes, unseen: that it started one is seen
_SPAWN = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "pty.spawn"})
_CALLED = "orchbench.test_called"
_LOADER = "/_pytest/assertion/rewrite.py"  # the hidden modules' loader: get_data reads their files
_OTHER = frozenset({"object.__getattr__", _CALLED})


class Audit:
    """An audit hook (``sys.addaudithook``): introspection by code of the repo copy ``repo``, sent as
    ``seen`` lines. Events are charged to the frame that raised them, looking through the stdlib
    helpers above (for file events: through the whole stdlib); pytest's and the libraries' own
    introspection is never the repo's. Nothing here can stop the code under test -- it makes it
    visible."""

    def __init__(self, reporter: StreamReporter, repo: str, hidden: str) -> None:
        self.reporter = reporter
        self.repo = _realpath(repo).rstrip("/") + "/"
        self.hidden = _realpath(hidden).rstrip("/")
        paths = sysconfig.get_paths()
        self.stdlib = paths["stdlib"].rstrip("/") + "/"
        self.site = tuple({paths["purelib"].rstrip("/") + "/", paths["platlib"].rstrip("/") + "/"})
        self.local = threading.local()
        self.sent: set[tuple[str, str]] = set()

    def __call__(self, event: str, args: tuple) -> None:
        if event not in _TAKE and event not in _FILES and event not in _SPAWN and event not in _OTHER:
            return
        if event == "object.__getattr__" and (len(args) < 2 or args[1] not in _READ):
            return
        if self.reporter.ended or getattr(self.local, "busy", False):
            return
        self.local.busy = True  # what this hook does raises events too
        try:
            what = self.check(event, args, _getframe(1))
            if what and (event, what) not in self.sent and len(self.sent) < 50:
                self.sent.add((event, what))
                self.reporter.send(kind="seen", message=what[:300])
        except Exception:  # noqa: BLE001 - an audit hook must never break the session
            pass
        finally:
            self.local.busy = False

    def check(self, event: str, args: tuple, frame: object) -> str | None:
        """What the repo code did, or None when the event is not the repo's or not about the tests."""
        if event in _FILES:  # charged through the stdlib and pytest's module loader (get_data)
            path = args[0] if args else None
            if not isinstance(path, str | bytes) or not self.is_hidden(_fsdecode(path)):
                return None
            where = self.caller(frame, all_stdlib=True)
            return (
                f"{where} {'opened' if event == 'open' else 'listed'} the hidden tests ({_fsdecode(path)})"
                if where
                else None
            )
        if event == _CALLED:  # raised by the first statement of every hidden test, with its caller
            where = self.caller(args[0] if args else None, all_stdlib=True)
            return f"{where} called a hidden test function" if where else None
        if event in _SPAWN:
            where = self.caller(frame, all_stdlib=True)
            return f"{where} started a process ({str(args[:2])[:120]})" if where else None
        where = self.caller(frame, all_stdlib=False)
        if not where:
            return None
        if event in _TAKE:
            return f"{where} called {event}"
        if args[1] in _FRAMES and self.caller(frame, all_stdlib=False, direct=True):
            return f"{where} took a frame ({args[1]})"
        target = args[0]
        code = getattr(target, "f_code", None) or getattr(target, "__code__", None)
        code = (
            code
            or getattr(getattr(target, "tb_frame", None), "f_code", None)
            or getattr(target, "gi_code", None)
        )
        code = code or getattr(target, "cr_code", None) or target
        filename = getattr(code, "co_filename", "")
        if isinstance(filename, str) and self.is_hidden(filename):
            return f"{where} read {args[1]} of hidden test code ({os.path.basename(filename)})"
        return None

    def caller(self, frame: object, all_stdlib: bool, direct: bool = False) -> str | None:
        """``file:line`` of the repo frame charged with the event (``direct``: only the frame that
        raised it; ``all_stdlib``: looking through every stdlib frame and pytest's module loader),
        or None."""
        while frame is not None:
            name = frame.f_code.co_filename  # type: ignore[attr-defined]
            if name.startswith(self.repo):
                return f"{name[len(self.repo) :]}:{frame.f_lineno}"  # type: ignore[attr-defined]
            if direct:
                return None
            stdlib = (
                name.startswith(self.stdlib) and not name.startswith(self.site) and "-packages/" not in name
            )
            loader = all_stdlib and name.endswith(_LOADER)
            if not (
                name.startswith("<")
                or loader
                or (stdlib and (all_stdlib or os.path.basename(name) in _HELPERS))
            ):
                return None
            frame = frame.f_back  # type: ignore[attr-defined]
        return None

    def is_hidden(self, path: str) -> bool:
        full = _abspath(path)
        if full == self.hidden or full.startswith(self.hidden + "/"):
            return True
        if full.startswith(self.stdlib):  # the interpreter's own files (imports): not links to it
            return False
        real = _realpath(full)
        return real == self.hidden or real.startswith(self.hidden + "/")
