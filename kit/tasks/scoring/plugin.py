"""The kit's pytest plugin for scoring. It runs INSIDE the scoring sandbox, started by
``kit/tasks/scoring/launcher.py``, and imports nothing from the kit (the kit is not visible there).

- registers the kit's markers (``severity``, ``baseline_pass``);
- adds the run's canary test file to the collected paths (own-tests runs) and moves the canary tests
  to the end of the run, so a report patch installed by any earlier test also meets them; in the
  acceptance session it runs the tests of each class or module in a random order (a must-fail twin
  runs before or after its test: code that behaves one way on a first call and another way later
  meets the twin first half of the time);
- streams a start line (before any code under test loads), how many tests were collected, every
  test's final outcome (setup, call and teardown together), every collection error, the values of
  the sealed checks (``observe.py``) and the session's exit status, one JSON line each,
  to a pipe the kit reads WHILE the tests run. What was sent cannot be taken back: an exit hook can
  only append, and the kit treats anything after the end line, a repeated test or a garbled line as
  tampering;
- in every session, :class:`Audit` (an audit hook :func:`install` adds before any code under test
  loads; in an own-tests session the "hidden tests" are the canary file) streams a ``seen`` line each time the code under test (a file of the repo copy)
  opens or lists the hidden tests, takes frames (``sys._getframe``, ``inspect.currentframe``/``stack``,
  ``traceback.extract_stack``, ``sys._current_frames``, a traceback's or generator's frame read
  directly), reads the code of a hidden test (``f_code``, ``__code__`` of a hidden test's frame or
  function, through ``inspect``/``dis`` too), walks the heap (``gc.get_objects``/``get_referrers``),
  installs a tracer, starts a process (which could read anything unseen) or calls a hidden test
  function itself (every hidden test's first statement reports its caller); after collection, any
  open of a hidden file outside pytest's main thread. The kit flags such a run ``suspicious``. An
  audit hook added after the kit's is refused (and seen): it would run inside the kit's hook's own
  nested events, where the kit's hook looks at nothing.

The functions it needs are bound at import, before any code under test is imported, and held in
closures (:func:`install`): a later monkeypatch of ``os.write``, ``json.dumps``, this module's globals
or an attribute of the hooks object does not reach the stream.
"""

from __future__ import annotations

import builtins
import importlib.util
import json
import os
import random
import sys
import sysconfig
import threading
import types
from collections.abc import Callable

import pytest

_write = os.write
_dumps = json.dumps
_escape = json.encoder.encode_basestring_ascii  # the C function: nothing of it can be patched
_basename = os.path.basename
_current_thread, _main_thread, _thread_local = (
    threading.current_thread,
    threading.main_thread,
    threading.local,
)
_getframe = sys._getframe
_realpath = os.path.realpath
_readlink = os.readlink
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


def _outcome(report: pytest.TestReport) -> str:
    """One phase's outcome in the kit's words (``kit/tasks/transitions.py``): passed, failed, skipped,
    xfailed (marked xfail, failed) or xpassed (marked xfail, passed)."""
    xfail = hasattr(report, "wasxfail")
    if report.passed:
        return "xpassed" if xfail else "passed"
    if report.skipped:
        return "xfailed" if xfail else "skipped"
    return "failed"


def _phase_message(report: pytest.TestReport, outcome: str) -> str:
    if outcome in ("xfailed", "xpassed"):
        reason = _first_line(str(getattr(report, "wasxfail", "")))[:200]
        return f"{outcome} (marked xfail{': ' + reason if reason else ''})"
    return _message(report)


def install(settings: dict) -> object:
    """The session's pytest hooks (pass to ``pytest.main``), sending through a closure-held writer,
    and the audit hook (installed here when ``settings`` names the hidden tests). Takes the pipe's
    fd out of ``settings``: after this, nothing the code under test can reach by frames or globals
    leads to the stream -- the hooks and the audit hook each hold a ``send`` of their own in closure
    cells (sharing only the line counter and its lock), so replacing an attribute (of the hooks
    object, of this module) or a cell the hooks hold changes nothing the audit hook sends."""
    fd = settings.pop("fd")
    os.set_inheritable(fd, False)  # commands the tests start do not get the pipe
    lock, seq = threading.Lock(), [0]
    send = _sender(fd, lock, seq)
    send(kind="start")
    shuffle = bool(settings.get("shuffle", settings.get("hidden")))
    hooks = _hooks(send, settings.get("canary_file"), settings["canaries"], shuffle)
    if settings.get("observer"):  # sealed checks (kit/tasks/scoring/seal.py) call it by this name
        observe = _private_scope(vars(_load_observe(settings["plugin"])))["observer"]
        setattr(builtins, settings["observer"], observe(_rebind(_sender, _private_scope())(fd, lock, seq)))
    if settings.get("hidden"):  # its own scope: nothing reachable from the tests leads to it
        scope = _private_scope()
        scope["Audit"] = audit_class = _rebind_class(Audit, scope)
        audit = audit_class(settings["repo"], settings["hidden"], bool(settings.get("processes", True)))
        sys.addaudithook(_rebind(_audit_hook, scope)(_rebind(_sender, scope)(fd, lock, seq), audit))
    return hooks


def _load_observe(plugin: str) -> types.ModuleType:
    """``observe.py`` from the plugin's own folder (not in ``sys.modules``: not found by name)."""
    path = os.path.join(os.path.dirname(plugin), "observe.py")
    spec = importlib.util.spec_from_file_location("orchbench_scoring_observe", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _private_scope(namespace: dict | None = None) -> dict:
    """A copy of this module's globals (or of ``namespace``), and of the builtins, taken before any
    code under test loads.
    Functions rebound to it (:func:`_rebind`) look their globals and builtins up there: the code
    under test can reach this module's dict (a pytest hook's ``__globals__``) and the builtins
    module, and rewrite them, without changing anything such a function uses. (What the standard
    library functions it calls look up in their own modules can still be patched.)"""
    scope = dict(globals() if namespace is None else namespace)
    scope["__builtins__"] = dict(vars(builtins))
    for name, value in list(scope.items()):
        if isinstance(value, types.FunctionType) and value.__module__ == scope["__name__"]:
            scope[name] = _rebind(value, scope)
    return scope


def _rebind(func: Callable, scope: dict) -> Callable:
    """``func`` with ``scope`` as its globals (and builtins)."""
    code = func.__code__  # type: ignore[attr-defined]
    return types.FunctionType(code, scope, func.__name__, func.__defaults__, func.__closure__)  # type: ignore[attr-defined]


def _rebind_class(cls: type, scope: dict) -> type:
    """A new class like ``cls`` whose methods are rebound to ``scope`` (patching ``cls`` does not
    reach it, nor does patching the copy reach ``cls``)."""
    members = {
        name: _rebind(value, scope) if isinstance(value, types.FunctionType) else value
        for name, value in vars(cls).items()
        if name not in ("__dict__", "__weakref__")
    }
    return type(cls.__name__, cls.__bases__, members)


def _sender(fd: int, lock: threading.Lock, seq: list[int]) -> Callable[..., None]:
    """A function writing one JSON line per call to ``fd``, numbered by ``seq``; everything it uses is
    bound here, in its closure, before any code under test loads."""
    write, escape = _write, _escape

    def send(**msg: object) -> None:
        with lock:
            seq[0] += 1
            fields = [f'"seq": {seq[0]}']
            for key, value in msg.items():  # flat: str, int, bool (no json.dumps, which can be patched)
                if value is True or value is False:
                    text = "true" if value else "false"
                elif type(value) is int:
                    text = int.__repr__(value)
                else:
                    text = escape(str(value))
                fields.append(f"{escape(key)}: {text}")
            data = ("{" + ", ".join(fields) + "}\n").encode()
            while data:
                data = data[write(fd, data) :]

    return send


def _hooks(
    send: Callable[..., None], canary_file: str | None, canary_names: list[str], shuffle: bool
) -> object:
    """The pytest hooks, as plain closures (pluggy binds each function when the plugin registers:
    replacing an attribute of the returned object later does nothing)."""
    canaries = set(canary_names)
    pending: dict[str, tuple[str, str]] = {}

    def pytest_configure(config: pytest.Config) -> None:
        config.addinivalue_line("markers", "severity(level): requirement severity: critical, major or minor")
        config.addinivalue_line(
            "markers", "baseline_pass: this acceptance test may pass on the starting code"
        )
        if canary_file:
            config.args.append(canary_file)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
        last = [i for i in items if i.name in canaries]
        items[:] = [i for i in items if i.name not in canaries] + last
        if shuffle:  # a random order inside each class or module: a test and its twin either way
            rng = random.SystemRandom()
            groups: dict[object, list[pytest.Item]] = {}
            for item in items:
                groups.setdefault(item.parent, []).append(item)
            for group in groups.values():
                rng.shuffle(group)
            items[:] = [item for group in groups.values() for item in group]

    def pytest_collection_finish(session: pytest.Session) -> None:
        send(kind="collected", count=len(session.items))  # each must be reported before the end

    def pytest_collectreport(report: pytest.CollectReport) -> None:
        if not report.passed:
            send(kind="collect", nodeid=report.nodeid, message=_message(report))

    def pytest_runtest_logreport(report: pytest.TestReport) -> None:
        outcome, message = pending.get(report.nodeid, ("passed", ""))
        now = _outcome(report)
        if outcome in ("passed", "xpassed") and now != "passed":  # the first failure (or skip,
            outcome, message = now, _phase_message(report, now)  # xfail) of setup, call, teardown
        if report.when == "teardown":
            pending.pop(report.nodeid, None)
            ok = outcome in ("passed", "xpassed")
            send(kind="test", nodeid=report.nodeid, passed=ok, outcome=outcome, message=message)
        else:
            pending[report.nodeid] = (outcome, message)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(exitstatus: int) -> None:
        send(kind="end", exitstatus=int(exitstatus))

    hooks = _Hooks()  # plain functions as instance attributes (pluggy needs a hashable plugin)
    hooks.__dict__.update({k: v for k, v in locals().items() if k.startswith("pytest_")})
    return hooks


class _Hooks:
    """The plugin object pytest registers: it only carries the hook functions."""


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
_SPAWN = frozenset(
    {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "pty.spawn", "os.fork"}
    | {"os.forkpty", "ctypes.dlopen", "ctypes.dlsym"}  # (native code may do anything unseen: libc's system())
)
_CALLED = "orchbench.test_called"
#: names of the stdlib's one-line ``sys._getframe`` wrappers (``logging.currentframe`` is a lambda)
_WRAPPERS = frozenset({"<lambda>", "currentframe"})
_OTHER = frozenset({"object.__getattr__", _CALLED})
#: what a file is, for :meth:`Audit.kind`; an event's walk up the stack looks through some of them
_REPO, _ANGLE, _LOADER_FILE, _HELPER, _STDLIB, _OTHER_FILE = range(6)
_THROUGH_ALL = frozenset({_ANGLE, _LOADER_FILE, _HELPER, _STDLIB})  # file events: the whole stdlib
_THROUGH_HELPERS = frozenset({_ANGLE, _HELPER, _LOADER_FILE})  # frame events: inspection helpers, pytest


def _audit_hook(send: Callable[..., None], audit: Audit) -> Callable[[str, tuple], None]:
    """``audit`` as an audit hook: what it finds goes out through ``send`` as ``seen`` lines (held in
    this closure; nothing the code under test can reach without a heap walk leads here, and it keeps
    no state the pytest hooks share: a ``seen`` line after the end line is still read as one)."""
    local, sent, check = _thread_local(), set(), audit.check

    def hook(event: str, args: tuple) -> None:
        if event == "sys.addaudithook":  # refused: another hook runs inside this one's nested events,
            if not getattr(local, "busy", False):  # where nothing is seen (cf. ``busy``)
                local.busy = True
                try:
                    where = audit.caller(_getframe(1), all_stdlib=True) or "code under test"
                    send(kind="seen", message=f"{where} added an audit hook (refused)")
                except Exception:  # noqa: BLE001 - an audit hook must never break the session
                    pass
                finally:
                    local.busy = False
            raise RuntimeError("no audit hook may be added during scoring")
        if event not in _TAKE and event not in _FILES and event not in _SPAWN and event not in _OTHER:
            return
        if event == "object.__getattr__" and (len(args) < 2 or args[1] not in _READ):
            return
        if getattr(local, "busy", False):
            return
        local.busy = True  # what this hook does raises events too
        try:
            if event == _CALLED:  # a hidden test runs: collection is over
                audit.collected = True
            what = check(event, args, _getframe(1))
            if what and (event, what) not in sent and len(sent) < 50:
                sent.add((event, what))
                send(kind="seen", message=what[:300])
        except Exception:  # noqa: BLE001 - an audit hook must never break the session
            pass
        finally:
            local.busy = False

    return hook


class Audit:
    """An audit hook (``sys.addaudithook``): introspection by code of the repo copy ``repo``, sent as
    ``seen`` lines. Events are charged to the frame that raised them, looking through the stdlib
    helpers above (for file events: through the whole stdlib); pytest's and the libraries' own
    introspection is never the repo's. Nothing here can stop the code under test -- it makes it
    visible."""

    def __init__(self, repo: str, hidden: str, processes: bool = True) -> None:
        self.processes = processes  # are processes the repo code starts seen? (not in own tests)
        self.repo = _realpath(repo).rstrip("/") + "/"
        self.hidden = _realpath(hidden).rstrip("/")
        self.kit = _realpath(os.path.dirname(self.hidden)).rstrip("/") + "/"  # the kit's folder
        self.hidden_name = _basename(self.hidden)  # "_acceptance", "_orchbench_canary": no repo's
        paths = sysconfig.get_paths()
        self.stdlib = paths["stdlib"].rstrip("/") + "/"
        self.site = tuple({paths["purelib"].rstrip("/") + "/", paths["platlib"].rstrip("/") + "/"})
        self.collected = False  # a hidden test has run: an open of a hidden file by any thread counts
        self.kinds: dict[str, int] = {}  # file name -> what it is (:meth:`kind`)
        self.code_files: dict[str, bool] = {}  # a code object's file name -> is it a hidden test's?

    def check(self, event: str, args: tuple, frame: object) -> str | None:
        """What the repo code did, or None when the event is not the repo's or not about the tests."""
        if event in _FILES:  # charged through the stdlib and pytest's module loader (get_data)
            path = args[0] if args else None
            if isinstance(path, int) and not isinstance(path, bool):  # by descriptor: what it is
                try:
                    path = _readlink(f"/proc/self/fd/{path}")
                except OSError:
                    return None
            if not isinstance(path, str | bytes) or not self.is_hidden(_fsdecode(path)):
                return None
            where = self.caller(frame, all_stdlib=True) or self.late(frame)
            return (
                f"{where} {'opened' if event == 'open' else 'listed'} the hidden tests ({_fsdecode(path)})"
                if where
                else None
            )
        if event == _CALLED:  # raised by the first statement of every hidden test, with its caller
            where = self.caller(args[0] if args else None, all_stdlib=True)
            return f"{where} called a hidden test function" if where else None
        if event in _SPAWN:
            if not self.processes or (event == "ctypes.dlopen" and args[:1] == (None,)):
                return None  # (``import ctypes`` opens the process itself: only a symbol taken counts)
            where = self.caller(frame, all_stdlib=True)
            what = "loaded native code with ctypes" if event.startswith("ctypes") else "started a process"
            return f"{where} {what} ({str(args[:2])[:120]})" if where else None
        if event == "sys._getframe" and self.returns_frame(frame):
            frame = frame.f_back  # type: ignore[attr-defined]  # charged to who called the wrapper
        hidden = ""
        if event == "object.__getattr__":  # a code read: of a hidden test's code?
            hidden = self.code_file(args[0])
            if not hidden and args[1] not in _FRAMES:
                return None  # (before the walk up the stack: most code reads are pytest's or inspect's)
        where = self.caller(frame, all_stdlib=False)
        if not where:
            return None
        if event in _TAKE:
            return f"{where} called {event}"
        if args[1] in _FRAMES and (
            self.caller(frame, all_stdlib=False, direct=True) or self.via_pytest(frame)
        ):
            return f"{where} took a frame ({args[1]})"  # (through traceback's helpers: not on its own)
        if hidden:
            return f"{where} read {args[1]} of hidden test code ({_basename(hidden)})"
        return None

    def code_file(self, target: object) -> str:
        """The file of the code ``target`` (a frame, function, traceback, generator, coroutine or
        code object) holds, if it is a hidden test file; else ""."""
        code = getattr(target, "f_code", None) or getattr(target, "__code__", None)
        code = (
            code
            or getattr(getattr(target, "tb_frame", None), "f_code", None)
            or getattr(target, "gi_code", None)
        )
        code = code or getattr(target, "cr_code", None) or target
        filename = getattr(code, "co_filename", "")
        if not isinstance(filename, str):
            return ""
        found = self.code_files.get(filename)
        if found is None:
            found = self.is_hidden(filename)
            if len(self.code_files) < 20_000:
                self.code_files[filename] = found
        return filename if found else ""

    def kind(self, name: str) -> int:
        """What file ``name`` is (``_REPO``, ``_ANGLE``, ``_LOADER_FILE`` (pytest's and pluggy's), ``_HELPER``, ``_STDLIB``,
        ``_OTHER_FILE``), remembered: a test that walks the stack (exercism's paasio helpers call
        ``inspect.getouterframes`` tens of thousands of times) raises an event per frame read."""
        found = self.kinds.get(name)
        if found is None:
            stdlib = (
                name.startswith(self.stdlib) and not name.startswith(self.site) and "-packages/" not in name
            )
            if name.startswith(self.repo):
                found = _REPO
            elif name.startswith("<"):
                found = _ANGLE
            elif "/_pytest/" in name or "/pluggy/" in name:
                found = _LOADER_FILE  # the test machinery: looked through, like the stdlib's helpers
            elif stdlib:
                found = _HELPER if _basename(name) in _HELPERS else _STDLIB
            elif "-packages/" in name or name.startswith(self.kit):
                found = _OTHER_FILE  # installed libraries; the kit's folder (the hidden tests)
            else:
                found = _REPO  # a name no file of the interpreter, its libraries or the kit has:
                # code the code under test compiled under a name of its own choosing
            if len(self.kinds) < 20_000:
                self.kinds[name] = found
        return found

    def caller(self, frame: object, all_stdlib: bool, direct: bool = False) -> str | None:
        """``file:line`` of the repo frame charged with the event (``direct``: only the frame that
        raised it; ``all_stdlib``: looking through every stdlib frame and pytest's module loader),
        or None."""
        through = _THROUGH_ALL if all_stdlib else _THROUGH_HELPERS
        while frame is not None:
            name = frame.f_code.co_filename  # type: ignore[attr-defined]
            found = self.kind(name)
            if found == _REPO:
                return f"{name.removeprefix(self.repo)}:{frame.f_lineno}"  # type: ignore[attr-defined]
            if direct or found not in through:
                return None
            frame = frame.f_back  # type: ignore[attr-defined]
        return None

    def via_pytest(self, frame: object) -> bool:
        """Did the repo reach this event through pytest's own code (``_pytest._code``'s frames and
        tracebacks, say)? No honest code under test calls into the test machinery for that."""
        while frame is not None:
            found = self.kind(frame.f_code.co_filename)  # type: ignore[attr-defined]
            if found == _LOADER_FILE:
                return True
            if found not in _THROUGH_HELPERS:
                return False
            frame = frame.f_back  # type: ignore[attr-defined]
        return False

    def returns_frame(self, frame: object) -> bool:
        """Is ``frame`` a stdlib wrapper of ``sys._getframe`` that hands the frame to its caller
        (``logging.currentframe``, ``inspect.currentframe``)? Logging's own use of it (findCaller)
        then stays logging's: the frame it is charged to is logging's, not the repo's."""
        code = frame.f_code  # type: ignore[attr-defined]
        return self.kind(code.co_filename) in (_HELPER, _STDLIB) and code.co_name in _WRAPPERS

    def late(self, frame: object) -> str | None:
        """Who opened a hidden file when no repo frame raised it through the stdlib: a repo frame
        anywhere on the stack (nearer than any hidden test's frame: a test's helper called back by
        the repo code is the test's doing; say, repo code reading the tests through pytest's own
        path helpers while a hidden module imports it), or, once a hidden test has run, any thread
        but pytest's own."""
        while frame is not None:
            name = frame.f_code.co_filename  # type: ignore[attr-defined]
            if self.is_hidden(name):
                return None
            if self.kind(name) == _REPO:
                return f"{name.removeprefix(self.repo)}:{frame.f_lineno}"  # type: ignore[attr-defined]
            frame = frame.f_back  # type: ignore[attr-defined]
        thread = _current_thread()
        if not self.collected or thread is _main_thread():
            return None  # pytest itself (a failure report reading its source)
        return f"a thread started during the tests ({thread.name[:60]}, after collection)"

    def is_hidden(self, path: str) -> bool:
        """Is ``path`` the hidden folder or in it -- resolved, or (a relative path, which may be
        opened relative to a folder's descriptor) naming the hidden folder as one of its parts?"""
        if not path.startswith("/") and self.hidden_name in path.split("/"):
            return True
        full = _abspath(path)
        if full == self.hidden or full.startswith(self.hidden + "/"):
            return True
        if full.startswith(self.stdlib):  # the interpreter's own files (imports): not links to it
            return False
        real = _realpath(full)
        return real == self.hidden or real.startswith(self.hidden + "/")
