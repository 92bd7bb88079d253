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
goes through someone else's function) is seen by :func:`item_checks`: a hidden test whose call
passed while no event of its own guard -- the code the preloader compiled, called by the test's own
code -- arrived during it is reported failed, and the run ``seen``. A test skipped, deselected or
failing before its body runs (a fixture's error, unittest's ``setUp``) is not asked about.

**Signals.** A Python signal handler is called with the frame the signal interrupted: a frame of the
tests, with no audit event (RT40b-2). :func:`signals` replaces ``_signal.signal`` and
``_signal.getsignal`` (``signal.signal`` calls them) -- in every loaded module that holds them and
in a ``_signal`` made again with ``_imp.create_builtin`` (``stacktext.py``'s wrapper) -- so that a
handler installed during scoring is called through a relay that passes ``frame=None``; the kit's
own per-test timer is the one handler installed as it is. The originals live only in the defaults of
the replacements: reading those (``__defaults__``, ``__kwdefaults__``) is sent as ``seen``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

CALLED = "orchbench.test_called"

#: the helper written into each hidden module copy, after its docstring and ``from __future__``
#: imports (``twins.py``); ``__orchbench_guard__`` is put in the module's namespace by the preloader
GUARD = """
try:  # sys.audit and sys._getframe as they were before any code under test ran (the preloader's)
    {guard}_real = __orchbench_guard__
except NameError:  # (a copy run outside a scoring session)
    import sys as {guard}_real

    {guard}_real = ({guard}_real.audit, {guard}_real._getframe)


def {guard}(_k={guard}_real):
    _k[0]("orchbench.test_called", _k[1](2))


del {guard}_real
"""


def guarded(runners: dict[str, types.FunctionType]) -> tuple[frozenset[int], frozenset[tuple[str, str]]]:
    """From the preloaded files' runners (``preload.py``: real path -> runner): the ids of the guards'
    code objects, and (real path, function name) of every test that calls one."""
    guards: set[int] = set()
    tests: set[tuple[str, str]] = set()
    for path, run in runners.items():
        todo = [c for c in run.__code__.co_consts if isinstance(c, types.CodeType)]
        codes: list[types.CodeType] = []
        while todo:
            code = todo.pop()
            codes.append(code)
            todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        mine = [c for c in codes if any(type(k) is str and k == CALLED for k in c.co_consts)]
        guards.update(id(c) for c in mine)
        names = {c.co_name for c in mine}
        tests.update((path, c.co_name) for c in codes if c.co_name != "<module>" and names & set(c.co_names))
    return frozenset(guards), frozenset(tests)


def hook(
    guards: frozenset[int], arrived: list, watched: tuple, repatch: Callable, send: Callable
) -> Callable:
    """An audit hook: each event of a guard in ``guards`` goes into ``arrived`` as (the test's file
    name, its function name); an audited read of a function in ``watched`` (the signal installer's
    replacements) is sent as ``seen``; a ``_signal`` made again (``stacktext.py``'s ``orchbench.stack``
    for ``_imp.create_builtin``, whose result is already in its ``out`` list) goes to ``repatch``.
    Added after stacktext's hook and before audit.py's (which refuses hooks added after it)."""
    getframe = sys._getframe
    told: set[str] = set()

    def guard_hook(event: str, args: tuple) -> None:
        if event == CALLED:
            try:
                frame = getframe(1)  # the guard's (sys.audit is C: no frame of its own)
                if id(frame.f_code) in guards and len(arrived) < 1000:
                    code = frame.f_back.f_code
                    arrived.append((code.co_filename, code.co_name))
            except Exception:  # noqa: BLE001, S110 - an audit hook must never break the session
                pass  # (then nothing arrived: the test is reported for it)
        elif event == "object.__getattr__" and len(args) > 1 and any(args[0] is w for w in watched):
            what = f"read {str(args[1])[:40]} of the kit's signal installer (the original is held there)"
            if what not in told:
                told.add(what)
                send(kind="seen", message=what)
        elif event == "orchbench.stack" and len(args) == 4 and args[0] == "_imp.create_builtin":
            out = args[3]
            if type(out) is list and out and getattr(out[0], "__name__", None) == "_signal":
                repatch(out[0])

    return guard_hook


def item_checks(
    tests: frozenset, arrived: list, forced: dict, send: Callable, realpath: Callable
) -> tuple[Callable, Callable]:
    """``pytest_runtest_call`` (a hook wrapper, as a generator function: the plugin marks it) and
    ``pytest_runtest_logreport``: a guarded test whose call passed with no event of its own guard
    arriving during it is reported failed (``forced``) and sent as ``seen``."""
    missing: set[str] = set()
    paths: dict[str, str] = {}

    def real(path: str) -> str:
        if path not in paths and len(paths) < 10000:
            paths[path] = realpath(path)
        return paths.get(path) or realpath(path)

    def pytest_runtest_call(item: object) -> object:
        name = getattr(item, "originalname", None) or str(getattr(item, "name", "")).split("[", 1)[0]
        key = (real(str(getattr(item, "path", ""))), name)
        del arrived[:]
        try:
            yield
        finally:
            if key in tests and not any((real(f), n) == key for f, n in arrived):
                missing.add(item.nodeid)  # type: ignore[attr-defined]
            del arrived[:]

    def pytest_runtest_logreport(report: object) -> None:
        nodeid = report.nodeid  # type: ignore[attr-defined]
        if report.when == "call" and report.passed and nodeid in missing and nodeid not in forced:  # type: ignore[attr-defined]
            why = "passed, but its first statement did not tell the audit hook who called it"
            forced[nodeid] = f"{why} (orchbench.test_called never arrived)"
            send(kind="seen", message=f"{nodeid}: {why} (sys.audit or the test's guard replaced?)")

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
