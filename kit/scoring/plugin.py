"""The kit's pytest plugin for scoring. It runs INSIDE the scoring sandbox, started by
``kit/scoring/launcher.py``, and imports nothing from the kit (the kit is not visible there).

- registers the kit's markers (``severity``, ``baseline_pass``);
- cuts a test that runs over its time limit (``test_timeout_s``: reported failed, the session goes on);
- adds the run's canary test file to the collected paths (own-tests runs where no own test module can
  hold canaries) and moves its tests to the end of the run; in the
  acceptance session it runs the tests of each class or module in a random order (a must-fail twin
  runs before or after its test: code that behaves one way on a first call and another way later
  meets the twin first half of the time);
- streams a start line (before any code under test loads), how many tests were collected, every
  test's final outcome (setup, call and teardown together), every collection error, the values of
  the sealed checks (``observe.py``) and the session's exit status, one JSON line each,
  to a pipe the kit reads WHILE the tests run. What was sent cannot be taken back: an exit hook can
  only append, and the kit treats anything after the end line, a repeated test or a garbled line as
  tampering;
- in every session, the audit hook of ``audit.py`` (which :func:`install` adds before any code under
  test loads; in an own-tests session the "hidden tests" are the kit's canary folder) streams a ``seen`` line
  each time the code under test looks at the hidden tests (what it sees, and what it does not: that
  module's docstring). The kit flags such a run ``suspicious``;
- a hidden test that passed with no ``orchbench.test_called`` of its own guard is reported failed and
  the run ``seen``, and a signal handler the code under test installs gets no frame (``guard.py``).

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
import signal
import sys
import threading
import types
from collections.abc import Callable

import pytest

_write = os.write
_dumps = json.dumps
_loads = json.loads
_escape = json.encoder.encode_basestring_ascii  # the C function: nothing of it can be patched
_setitimer, _ALARM, _TIMER = signal.setitimer, signal.SIGALRM, signal.ITIMER_REAL


class _OverTime(BaseException):  # not an Exception: ``except Exception`` in the code does not take it
    """Raised in a test that ran over its time limit."""


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


def _in_group_chain(exc: BaseException) -> bool:
    """Is an ``ExceptionGroup`` (not one of skips alone: pytest's own) in ``exc``'s chain?"""
    seen: set[int] = set()
    try:
        while exc is not None and id(exc) not in seen and len(seen) < 100:
            seen.add(id(exc))
            if isinstance(exc, BaseExceptionGroup):
                return exc.split(pytest.skip.Exception)[1] is not None
            exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    except Exception:  # noqa: BLE001 - the code's exception: pytest reports it as it would
        return False
    return False


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


def install(settings: dict) -> list[object]:
    """The session's pytest plugins (pass to ``pytest.main``), sending through a closure-held writer,
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
    preloaded, compiled, runners, real_guard = _preload(
        settings, _rebind(_sender, _private_scope())(fd, lock, seq)
    )
    limit = float(settings.get("test_timeout_s") or 0)
    forced: dict[str, str] = {}  # node id -> why the test is reported failed whatever it did
    guard = _private_scope(vars(_load(settings["plugin"], "guard")))  # signals, each test's guard
    trusted: list = []  # the handlers installed as they are: the kit's timer (_time_limit)
    set_signal, get_signal, repatch = guard["signals"](trusted)
    hooks = _hooks(
        send,
        settings.get("canary_file"),
        settings["canaries"],
        shuffle,
        (settings.get("deselect", []), _private_scope(vars(_load(settings["plugin"], "nodeids")))),
        limit,
        forced,
        (set_signal, trusted),
    )
    pins = _private_scope(vars(_load(settings["plugin"], "pinned")))  # unittest's own asserts
    pin_hooks = _Hooks()  # a plugin of its own: its hooks share names with the others
    pin_send = _rebind(_sender, _private_scope())(fd, lock, seq)
    pin_hooks.__dict__.update(_pin_hooks(pins, compiled[1], pin_send, forced))
    # (the guards' events are heard by a hook added with the audit hook's: without one, none is asked)
    guards, tests, _files = (
        guard["guarded"](runners) if settings.get("hidden") else (frozenset(),) * 2 + ({},)
    )
    call, logreport = guard["item_checks"]()
    guard_hooks = _Hooks()
    guard_hooks.__dict__.update(
        pytest_runtest_call=pytest.hookimpl(hookwrapper=True)(call), pytest_runtest_logreport=logreport
    )
    modules = (guard["module_codes"](runners), real_guard) if settings.get("hidden") else ({}, None)
    checks = (guards, tests, frozenset({id(call.__code__), id(logreport.__code__)}), *modules)
    if settings.get("observer"):  # sealed checks (kit/scoring/seal.py) call it by this name
        observe = _private_scope(vars(_load(settings["plugin"], "observe")))["observer"]
        setattr(builtins, settings["observer"], observe(_rebind(_sender, _private_scope())(fd, lock, seq)))
    if settings.get("hidden"):  # its own scope: nothing reachable from the tests leads to it
        scope = _private_scope(vars(_load(settings["plugin"], "audit")))
        laid = None
        if settings.get("audit"):  # laid files, base code: a kit file, read-only in the sandbox
            with open(settings["audit"], encoding="utf-8") as fh:
                laid = _loads(fh.read())
        processes = bool(settings.get("processes", True))
        audit = scope["Audit"](
            settings["repo"], settings["hidden"], processes, laid, bool(settings.get("record")), compiled
        )
        if audit.record:  # the importer: which data files the tests read (``dataread.py``)
            reader = _private_scope(vars(_load(settings["plugin"], "dataread")))["reader"]
            audit.read = reader(audit, (scope["_REPO"], scope["_BASE"]))
        # the stack-text checks (``stacktext.py``): a hook of their own, added first (audit.py's refuses
        # any added after it), making the calls of the C functions it wraps
        stack = _private_scope(vars(_load(settings["plugin"], "stacktext")))
        threads = _private_scope(vars(_load(settings["plugin"], "threads")))  # threads it started
        start = threads["install"]()
        kinds = {"foreign": (scope["_OTHER_FILE"], scope["_LOADER_FILE"])}
        kinds.update(stdlib=scope["_STDLIB"], helper=scope["_HELPER"])
        stack_send = _rebind(_sender, _private_scope())(fd, lock, seq)
        originals, codes = stack["install"]()  # (its wrappers work once its hook is in: no import between)
        sys.addaudithook(stack["hook"](originals, codes, audit, stack_send, kinds))
        sys.addaudithook(threads["hook"](start, threads["Threads"](audit)))
        guard_send = _rebind(_sender, _private_scope())(fd, lock, seq)
        sys.addaudithook(guard["hook"](checks, forced, (set_signal, get_signal), repatch, guard_send))
        sys.addaudithook(scope["audit_hook"](_rebind(_sender, _private_scope())(fd, lock, seq), audit))
    return [hooks, preloaded, pin_hooks, guard_hooks]


def _preload(settings: dict, send: Callable[..., None]) -> tuple[object, tuple, dict, tuple]:
    """The test files the session may import, compiled now -- before the repo is importable -- and
    served first on ``sys.meta_path``; the pytest hooks that keep it first and check, after
    collection, that pytest got its modules (``preload.py``); and, for the audit hook, the files'
    names with the ids of the code objects compiled here (code under those names that is not one of
    them was compiled by someone else); and what the preloader hands each module's guard."""
    from _pytest.assertion.rewrite import rewrite_asserts

    scope = _private_scope(vars(_load(settings["plugin"], "preload")))
    plain = "--assert=plain" in settings["args"]
    files = [[path, rewrite and not plain, rewrite] for path, rewrite in settings.get("compiled", [])]
    runners = scope["compile_files"](files, rewrite_asserts)
    preloaded = scope["Preloaded"](runners)  # (holds the runners: the ids below stay theirs)
    sys.meta_path.insert(0, preloaded)
    names = frozenset(run.__code__.co_filename for run in runners.values())  # (those that compiled)
    ids = set(scope["code_objects"](runners)) | {id(run.__code__) for run in runners.values()}
    compiled = (names, frozenset(ids))
    return scope["session_hooks"](preloaded, send, _Hooks()), compiled, runners, scope["_GUARD"]


def _load(plugin: str, name: str) -> types.ModuleType:
    """``<name>.py`` from the plugin's own folder (not in ``sys.modules``: not found by name)."""
    path = os.path.join(os.path.dirname(plugin), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"orchbench_scoring_{name}", path)
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
        elif isinstance(value, type) and value.__module__ == scope["__name__"]:
            scope[name] = _rebind_class(value, scope)
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


def _time_limit(limit: float, late: set[str], signals: tuple) -> dict:
    """The hook that cuts a test (setup, call and teardown together) after ``limit`` seconds: a
    ``SIGALRM`` timer, re-armed every ``limit`` seconds, raises :class:`_OverTime` in it; the test's
    node id goes into ``late`` and the plugin reports it failed, whatever it did after (a test the
    cut did not stop -- the code caught it, or switched the timer off -- runs on into the session's
    timeout: evidence, every requirement failed). ``signals``: the session's ``signal.signal`` and
    the list of handlers it installs as they are (``guard.py``: others get no frame). No limit: no hook."""
    if limit <= 0:
        return {}
    current: list[str | None] = [None]
    set_timer, alarm, timer, over = _setitimer, _ALARM, _TIMER, _OverTime  # bound now
    set_handler, trusted = signals

    def on_alarm(signum: int, frame: object) -> None:
        if current[0] is not None:
            late.add(current[0])
            raise over(f"the test ran over its time limit of {limit:g} s")

    trusted.append(on_alarm)  # (it is handed the interrupted frame: it only raises there)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: object) -> object:
        current[0] = item.nodeid
        set_handler(alarm, on_alarm)
        set_timer(timer, limit, limit)
        try:
            yield
        finally:
            set_timer(timer, 0, 0)
            current[0] = None

    return {"pytest_runtest_protocol": pytest_runtest_protocol}


def _pin_hooks(pins: dict, test_code: frozenset[int], send: Callable[..., None], forced: dict) -> dict:
    """The hooks that give the collected ``unittest.TestCase`` classes unittest's own assertion
    methods (``pinned.py``), and report a test failed -- and the run ``seen`` -- when its test case
    was swapped or a pin taken off during it."""
    pin_items, broken = pins["pin_items"], pins["broken"]
    pinned: dict = {}

    def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
        pinned.update(pin_items(items, test_code))

    def check(item: pytest.Item, before: bool) -> None:
        why = broken(item, pinned, before)
        if why and item.nodeid not in forced:
            forced[item.nodeid] = why
            send(kind="seen", message=f"{item.nodeid}: {why}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item: pytest.Item) -> object:
        check(item, True)
        yield
        check(item, False)

    return {
        "pytest_collection_modifyitems": pytest_collection_modifyitems,
        "pytest_runtest_call": pytest_runtest_call,
    }


def _hooks(
    send: Callable[..., None],
    canary_file: str | None,
    canary_names: list[str],
    shuffle: bool,
    deselect: tuple[list[str], dict] = ([], {}),
    limit: float = 0,
    forced: dict[str, str] | None = None,
    signals: tuple = (signal.signal, []),
) -> object:
    """The pytest hooks, as plain closures (pluggy binds each function when the plugin registers:
    replacing an attribute of the returned object later does nothing). ``deselect``: node ids left
    out (the task's ``own_tests_deselect``) and ``nodeids.py``'s scope; ``limit``: each test's time
    limit in seconds (0: none); ``forced``: node ids reported failed whatever they did, with the
    reason (filled as tests run); ``signals``: for the time limit (:func:`_time_limit`). Long because
    the hooks share their state (what each test reported so far, its time, where its function is
    defined) as closures."""
    canaries = set(canary_names)
    ids, nodeids = deselect
    left_out, under = (nodeids["index"](ids) if ids else ()), nodeids.get("under")
    pending: dict[str, tuple[str, str]] = {}
    spent: dict[str, float] = {}  # node id -> seconds of its phases so far (the kit picks cheap canaries)
    late: set[str] = set()  # node ids of tests cut at their time limit (_time_limit)
    forced = {} if forced is None else forced
    defined: dict[str, str] = {}  # node id -> its function's __qualname__, read once collected

    def pytest_configure(config: pytest.Config) -> None:
        config.addinivalue_line("markers", "severity(level): requirement severity: critical, major or minor")
        config.addinivalue_line(
            "markers", "baseline_pass: this acceptance test may pass on the starting code"
        )
        if canary_file:
            config.args.append(canary_file)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
        gone = [i for i in items if under(i.nodeid, left_out)] if left_out else []
        if gone:
            items[:] = [i for i in items if not under(i.nodeid, left_out)]
            config.hook.pytest_deselected(items=gone)
        defined.update(_qualnames(items))
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
        spent[report.nodeid] = spent.get(report.nodeid, 0.0) + float(report.duration or 0.0)
        now = _outcome(report)
        if outcome in ("passed", "xpassed") and now != "passed":  # the first failure (or skip,
            outcome, message = now, _phase_message(report, now)  # xfail) of setup, call, teardown
        if report.when == "teardown":
            pending.pop(report.nodeid, None)
            if report.nodeid in late:  # cut at its limit: failed, whatever it reported after
                outcome, message = "failed", f"timed out: ran over its time limit of {limit:g} s"
            elif report.nodeid in forced:
                outcome, message = "failed", forced[report.nodeid]
            ok = outcome in ("passed", "xpassed")
            took = int(spent.pop(report.nodeid, 0.0) * 1e6)  # (microseconds: the stream holds no float)
            tail = {"micros": took, "defined": defined.get(report.nodeid, "")}  # (its __qualname__)
            send(kind="test", nodeid=report.nodeid, passed=ok, outcome=outcome, message=message, **tail)
        else:
            pending[report.nodeid] = (outcome, message)

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(warning_message: object) -> None:
        """No source line is read for a warning (RT45-5): pytest's terminal reporter, which formats
        each one after its test, would read the file it names -- a hidden test's, which a deprecation's
        ``stacklevel=2`` names -- whole into ``linecache``, where the code under test reads it unseen."""
        if getattr(warning_message, "line", "") is None:
            warning_message.line = ""  # type: ignore[attr-defined]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
        """A failure whose exception chain holds an ``ExceptionGroup`` (``asyncio.TaskGroup``'s): its
        report says the exception in one line (``--tb=line``'s), read from no source -- pytest would
        format it natively, each frame's line read into ``linecache``, the hidden test's file whole
        (RT45-8 charges such a read; an honest solution's failure was charged with it). A unittest
        test's is handed over by unittest's own hook, which this one's report skips (RT46-3): taken here."""
        excinfo, pending = call.excinfo, item.__dict__.get("_excinfo")
        excinfo = pending[0] if type(pending) is list and pending else excinfo
        if excinfo is None or not _in_group_chain(excinfo.value):
            return None
        if excinfo is not call.excinfo:  # (as unittest's hook does)
            pending.pop(0)  # type: ignore[union-attr]
        crash = excinfo._getreprcrash()  # (where and what: no source read)
        text = crash.message if crash is not None else excinfo.exconly()
        sections = [(f"Captured {key} {when}", content) for when, key, content in item._report_sections]
        keywords = dict.fromkeys(item.keywords, 1)
        return pytest.TestReport(
            item.nodeid, item.location, keywords, "failed", text, call.when, sections,
            call.duration, call.start, call.stop, user_properties=item.user_properties,
        )  # fmt: skip

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(exitstatus: int) -> None:
        send(kind="end", exitstatus=int(exitstatus))

    hooks = _Hooks()  # plain functions as instance attributes (pluggy needs a hashable plugin)
    hooks.__dict__.update({k: v for k, v in locals().items() if k.startswith("pytest_")})
    hooks.__dict__.update(_time_limit(limit, late, signals))
    return hooks


def _qualnames(items: list[pytest.Item]) -> dict[str, str]:
    """Each item's function's ``__qualname__``, by node id: a test the kit wrote and its copies (in
    a subclass, its class collected in another module) have the class's; a test of the suite's own
    that bears the same name -- named at collection time from a data file -- has its own (RT42-3)."""
    out = {}
    for item in items:
        try:
            name = _qualname(getattr(item, "obj", None), str(getattr(item, "originalname", item.name)))
        except Exception:  # noqa: BLE001 - a descriptor of the code under test
            name = ""
        out[item.nodeid] = name if type(name) is str else ""
    return out


def _qualname(obj: object, name: str) -> object:
    """The ``__qualname__`` of the function a test item runs -- or, when a decorator without
    ``functools.wraps`` hides it (the item runs ``retry.<locals>.again``), of the function of the
    test's name it wraps, found in the wrappers' closures: a copy of the kit's test in a subclass or
    another module is still the kit's test (RT43-1: the must-fail canary, a copy of its test with its
    decorators, was read as a failing own test). A function made at collection time under another
    name (RT42-3) keeps its own."""
    todo, first = [getattr(obj, "__func__", obj)], None
    for _ in range(8):  # (a few wrappers deep)
        if not todo:
            break
        func = todo.pop(0)
        qualname = getattr(func, "__qualname__", "")
        first = qualname if first is None else first
        if getattr(func, "__name__", None) == name:
            return qualname
        for cell in getattr(func, "__closure__", None) or ():
            try:
                inner = cell.cell_contents
            except ValueError:  # (an empty cell)
                continue
            if isinstance(inner, types.FunctionType):
                todo.append(inner)
    return first


class _Hooks:
    """The plugin object pytest registers: it only carries the hook functions."""
