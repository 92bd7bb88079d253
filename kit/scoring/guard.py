"""What tells the audit hook that a hidden test runs, and what keeps a live frame of the tests from a
signal handler. The helper source (:data:`GUARD`) is written into each hidden module copy by
``twins.py``; the rest runs INSIDE the scoring sandbox, loaded by the plugin (``plugin.py``) from its
own folder before any code under test loads, and imports nothing from the kit.

**The guard.** Every hidden test (original, twin, canary) starts with ``{guard}()``, which raises
``orchbench.test_called`` with the frame that called the test (``audit.py`` flags a caller of the
code under test). It calls ``sys.audit`` and ``sys._getframe`` as they were before any code under
test ran: the preloader (``preload.py``) hands them to the module before its first statement, and the
guard holds them in a default argument -- replacing them on ``sys`` changes nothing it does (RT40b-6).
Whatever else silences it (the module's ``{guard}`` global swapped for a no-op, a guard whose event
goes through someone else's function) is heard from outside the test body: the plugin raises marks
around each test's call (:func:`item_checks`) and an audit hook (:func:`hook`, whose state nothing
the tests reach leads to) reports a guarded test whose call passed while no event of its own guard --
the code the preloader compiled, called by the test's own code -- arrived during it: failed, and the
run ``seen``; also a guard heard outside any call and a mark raised by other code. A test skipped,
deselected or failing before its body runs (a fixture's error, unittest's ``setUp``) is not asked
about; own tests have no guard.

**Signals.** A Python signal handler is called with the frame the signal interrupted: a frame of the
tests, with no audit event (RT40b-2). :func:`signals` replaces ``_signal.signal`` and
``_signal.getsignal`` (``signal.signal`` calls them) -- in every loaded module that holds them and
in a ``_signal`` made again with ``_imp.create_builtin`` (``stacktext.py``'s wrapper) -- so that a
handler installed during scoring is called through a relay that passes ``frame=None``; the kit's
own per-test timer is the one handler installed as it is. The originals live only in the defaults of
the replacements: reading those (``__defaults__``, ``__kwdefaults__``) is sent as ``seen``.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable

CALLED = "orchbench.test_called"
MARK = "orchbench.call"  # raised by the plugin around each test's call (:func:`item_checks`)

#: the helper written into each hidden module copy, after its docstring and ``from __future__``
#: imports (``twins.py``); ``__orchbench_guard__`` is put in the module's namespace by the preloader
GUARD = """
try:  # sys.audit and sys._getframe as they were before any code under test ran (the preloader's)
    {guard}_real = __orchbench_guard__
except NameError:  # (a copy run outside a scoring session)
    import sys as {guard}_real

    {guard}_real = ({guard}_real.audit, {guard}_real._getframe)


def {guard}(_k={guard}_real):
    audit, _getframe = _k  # named as called: a frame call no line names reads as a dispatched one
    audit("orchbench.test_called", _getframe(2))


del {guard}_real
"""


def guarded(
    runners: dict[str, types.FunctionType],
) -> tuple[frozenset[int], frozenset[str], dict]:
    """From the preloaded files' runners (``preload.py``: real path -> runner): the ids of the guards'
    code objects; the qualified name of every test function that calls one (a mixin's method of the
    same name, with no guard, is not asked); and each real path's file name as compiled."""
    guards: set[int] = set()
    tests: set[str] = set()
    files: dict[str, str] = {}
    for path, run in runners.items():
        files[path] = run.__code__.co_filename
        todo = [c for c in run.__code__.co_consts if isinstance(c, types.CodeType)]
        codes: list[types.CodeType] = []
        while todo:
            code = todo.pop()
            codes.append(code)
            todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        mine = [c for c in codes if any(type(k) is str and k == CALLED for k in c.co_consts)]
        guards.update(id(c) for c in mine)
        names = {c.co_name for c in mine}
        tests.update(
            c.co_qualname  # (a mixin's method of the same name, with no guard, is not asked)
            for c in codes
            if c.co_name != "<module>" and names & {*c.co_names, *c.co_varnames}
        )
    return frozenset(guards), frozenset(tests), files


def module_codes(runners: dict[str, types.FunctionType]) -> dict[int, str]:
    """id of each preloaded file's module code object -> the file's name (:func:`hook` counts their
    runs: the import is the one)."""
    return {
        id(c): run.__code__.co_filename
        for run in runners.values()
        for c in run.__code__.co_consts
        if isinstance(c, types.CodeType)
    }


def _into_module(
    namespace: object, path: str, real: object, _k: tuple = (sys.modules, os.path.realpath)
) -> bool:
    """Is ``namespace`` (what the preloader's runner executes a module into) the dict of the module
    the import system holds under its name, made for file ``path``, its guard handed the preloader's
    ``sys.audit`` (``real``: so a copy's tests, which bind their guard, are heard)?"""
    table, realpath = _k
    if type(namespace) is not dict:
        return False
    module = table.get(namespace.get("__name__"))  # type: ignore[arg-type]
    origin = getattr(namespace.get("__spec__"), "origin", None)
    return (
        getattr(module, "__dict__", None) is namespace
        and type(origin) is str
        and realpath(origin) == realpath(path)
        and namespace.get("__orchbench_guard__") is real
    )


def hook(checks: tuple, forced: dict, watched: tuple, repatch: Callable, send: Callable) -> Callable:
    """An audit hook: it hears each test's guard, between the marks :func:`item_checks` raises
    (``checks``: the guards' code ids, the guarded tests, the ids of the code that may raise marks),
    and when a guarded test's call passed with no event of its own guard -- called by the test's own
    code -- during it, reports it failed (``forced``) and sends ``seen``; so does a guard heard
    outside any test's call, and a mark someone else raised. It also sends an audited read of a
    function in ``watched`` (the signal installer's replacements) and a ``sys.monitoring`` callback
    registered (Python 3.12+: handed the hidden tests' code objects, no event); a ``_signal`` made
    again (``stacktext.py``'s ``orchbench.stack`` for ``_imp.create_builtin``, its result already in
    ``out``) goes to ``repatch``; a preloaded module's code (``checks``' fourth, :func:`module_codes`)
    run into anything but the namespace of the module imported for its file is sent (the preloader's
    table called into a dict of the code's own: a private copy of the hidden module, an oracle, RT40c-3). Its state is in this closure: nothing the tests
    reach leads here.
    Added after stacktext's hook and before audit.py's (which refuses hooks added after it)."""
    getframe = sys._getframe
    guards, tests, own, *more = checks
    modules: dict[int, str] = more[0] if more else {}  # (module_codes) run by an import only,
    real = more[1] if len(more) > 1 else None  # with the preloader's sys.audit/_getframe for its guard
    told: set[str] = set()
    window: list = [None, False]  # ((file, function), node id) of the test being called; heard?
    missing: set[str] = set()  # node ids of guarded tests whose call ended unheard

    def tell(what: str) -> None:
        if what not in told and len(told) < 100:
            told.add(what)
            send(kind="seen", message=what[:300])

    def mark(args: tuple) -> None:
        if len(args) != 3 or id(getframe(2).f_code) not in own:  # (2: past ``guard_hook``)
            tell("code that is not the kit's raised orchbench.call (the marks around each test's call)")
            return
        phase, nodeid, key = args
        if phase == "start":
            window[:] = [(key, nodeid), False]
        elif phase == "end":
            if key in tests and not (window[0] == (key, nodeid) and window[1]):
                missing.add(nodeid)
            window[:] = [None, False]
        elif phase == "passed" and nodeid in missing and nodeid not in forced:
            why = "passed, but its first statement did not tell the audit hook who called it"
            forced[nodeid] = f"{why} (orchbench.test_called never arrived)"
            tell(f"{nodeid}: {why} (sys.audit or the test's guard replaced?)")

    def guard_hook(event: str, args: tuple) -> None:
        if event == CALLED:
            try:
                frame = getframe(1)  # the guard's (sys.audit is C: no frame of its own)
                if id(frame.f_code) not in guards:
                    return  # (raised by someone else: heard as nothing)
                code = frame.f_back.f_code
                key = code.co_qualname
            except Exception:  # noqa: BLE001 - an audit hook must never break the session
                return  # (then nothing was heard: the test is reported for it)
            if window[0] is None and key in tests:
                tell(f"hidden test {key} ran outside pytest's call of a test")
            elif window[0] is not None and key == window[0][0]:
                window[1] = True
        elif event == "exec" and args and id(args[0]) in modules:
            try:
                imported = _into_module(getframe(1).f_locals.get("namespace"), modules[id(args[0])], real)
            except Exception:  # noqa: BLE001
                imported = False
            if not imported:  # the preloader's table called into a namespace of the code's own
                tell(f"ran the hidden test module {modules[id(args[0])]} outside its import (a private copy)")
        elif event == MARK:
            try:
                mark(args)
            except Exception:  # noqa: BLE001
                tell("could not check a mark around a test's call")
        elif event == "object.__getattr__" and len(args) > 1 and any(args[0] is w for w in watched):
            tell(f"read {str(args[1])[:40]} of the kit's signal installer (the original is held there)")
        elif event == "sys.monitoring.register_callback":  # (3.12+) handed each running code object
            tell("registered a sys.monitoring callback (it is handed the code of every function run)")
        elif event == "orchbench.stack" and len(args) == 4 and args[0] == "_imp.create_builtin":
            out = args[3]
            if type(out) is list and out and getattr(out[0], "__name__", None) == "_signal":
                repatch(out[0])

    return guard_hook


def item_checks() -> tuple[Callable, Callable]:
    """``pytest_runtest_call`` (a hook wrapper, as a generator function: the plugin marks it) and
    ``pytest_runtest_logreport``: they raise the marks :func:`hook` checks -- a test's call starts,
    ends, passed -- through ``sys.audit`` as it is now; a test is named by the qualified name of the
    function pytest calls, as :func:`guarded` names the guarded ones."""
    audit = sys.audit

    def pytest_runtest_call(item: object) -> object:
        name = getattr(item, "originalname", None) or str(getattr(item, "name", "")).split("[", 1)[0]
        key = getattr(getattr(item, "obj", None), "__qualname__", None)  # the function pytest calls
        key = key if type(key) is str else name
        nodeid = str(item.nodeid)  # type: ignore[attr-defined]
        audit(MARK, "start", nodeid, key)
        try:
            yield
        finally:
            audit(MARK, "end", nodeid, key)

    def pytest_runtest_logreport(report: object) -> None:
        if report.when == "call" and report.passed:  # type: ignore[attr-defined]
            audit(MARK, "passed", str(report.nodeid), None)  # type: ignore[attr-defined]

    return pytest_runtest_call, pytest_runtest_logreport


def _relay(handler: Callable) -> Callable:
    def relay(signum: int, frame: object, _h: Callable = handler) -> object:
        return _h(signum, None)  # (the interrupted frame stays here)

    return relay


def signals(trusted: list) -> tuple[Callable, Callable, Callable]:
    """Install the replacements of ``_signal.signal`` and ``_signal.getsignal`` (see the module's
    docstring); return them and the function that puts them on a ``_signal`` made again. A handler
    in ``trusted`` (the kit's timer, added later) is installed as it is."""
    import _signal

    relays: dict[int, tuple[Callable, Callable]] = {}  # id(relay) -> (relay, the handler it calls)
    originals = (_signal.signal, _signal.getsignal)

    def signal(
        signalnum: int, handler: object, _k: tuple = (originals[0], relays, trusted, _relay)
    ) -> object:
        install, relays, trusted, relay_for = _k
        if callable(handler) and not any(handler is t for t in trusted):
            relay = relay_for(handler)
            old = install(signalnum, relay)
            relays[id(relay)] = (relay, handler)
        else:
            old = install(signalnum, handler)
        _, before = relays.pop(id(old), (None, old))
        return before

    def getsignal(signalnum: int, _k: tuple = (originals[1], relays)) -> object:
        get, relays = _k
        now = get(signalnum)
        return relays.get(id(now), (None, now))[1]

    swap = {id(originals[0]): (originals[0], signal), id(originals[1]): (originals[1], getsignal)}
    for module in list(sys.modules.values()):  # the module, and every alias a loaded module holds
        try:
            names = dict(vars(module))
        except TypeError:
            continue
        for name, value in names.items():
            if id(value) in swap and swap[id(value)][0] is value:
                try:  # noqa: SIM105
                    setattr(module, name, swap[id(value)][1])
                except (AttributeError, TypeError):
                    pass

    def repatch(module: object, _k: tuple = (signal, getsignal)) -> None:
        module.signal, module.getsignal = _k  # type: ignore[attr-defined]

    return signal, getsignal, repatch
