"""Threads and callbacks the code under test arranged, charged to it (red team 40b: RT40b-4, 5, 6b, 8,
9). It runs INSIDE the scoring sandbox with the audit hook (``audit.py``), loaded by the plugin from its
own folder before any code under test loads, and imports nothing from the kit.

- **A thread the code under test started is its thread.** CPython 3.11 raises no audit event when a
  thread starts, so ``_thread.start_new_thread`` (in ``_thread``, in ``threading`` and in every loaded
  module that holds it, and in a ``_thread`` made again by ``_imp.create_builtin``) is replaced by a
  wrapper that holds nothing: it raises ``orchbench.thread``, and this module's hook -- added before
  audit.py's -- charges the start as audit.py charges an open (the nearest frame of the code under
  test, looking through the stdlib, base code and pytest's loader; or the start is made in a thread
  of the code under test's, or dispatched by a callback: no frame past the thread machinery names it)
  and starts the thread under a first frame of its own that marks it (a
  thread-local only the hook holds). In such a thread an event is charged to its starter wherever
  the same event would be charged to the code under test had it called the thread's target itself:
  the walk up from the event looks through the stdlib's thread machinery (``threading``,
  ``concurrent.futures``' workers and callbacks, ``multiprocessing``'s thread pool) as well as
  the stdlib's helpers and pytest's loader -- an executor handed ``Path.read_text`` or
  ``operator.attrgetter("__code__")`` acts for the code under test; a library's own frames in
  that thread are still the library's (its ``logging`` call is not evidence).
- **A thread with no frame but the stdlib's** (started through C alone, by a callback, with no frame
  of the code under test at its start) acts for the code under test too: pytest runs the tests in
  the main thread. That was seen for frames taken, heap walks and processes; now for opens of
  hidden files and reads of hidden test code as well.
- **A frame, trace or heap call made through an indirection**: ``sys._getframe``,
  ``sys._current_frames``, ``sys.settrace``/``setprofile`` or a ``gc`` walk whose nearest Python
  frame does not name it in the call it is making there (a ``weakref.finalize`` firing, a garbage
  cycle's finalizer, a ``gc`` callback, ``map``/``partial``/``deque.extend`` in C: the call is
  dispatched, not written) is charged to the nearest frame of the code under test past it (looking
  through the whole stdlib: an ``ExitStack`` of its own), and where there is none, sent as it is --
  who arranged the callback cannot be known, and library code names what it calls (aliases such as
  ``get_frame = sys._getframe`` or ``currentframe()`` included). Not evidence: a cleanup a test
  arranged (``addCleanup(sys.settrace, sys.gettrace())``, an ``ExitStack`` callback), dispatched
  by unittest or contextlib.
"""

from __future__ import annotations

import opcode
import sys
import threading
from collections.abc import Callable

EVENT = "orchbench.thread"
_audit, _getframe, _local = sys.audit, sys._getframe, threading.local
_current_thread, _main_thread = threading.current_thread, threading.main_thread
_REPO, _ANGLE, _LOADER_FILE, _HELPER, _STDLIB, _OTHER_FILE, _BASE, _RUNTIME = range(8)  # audit.py's
#: the stdlib's thread machinery, looked through in a thread the code under test started
_DISPATCH = ("/threading.py", "/concurrent/futures/thread.py", "/concurrent/futures/_base.py")
_DISPATCH += ("/multiprocessing/pool.py", "/queue.py")
#: stdlib dispatchers of cleanups a test arranges (unittest's ``addCleanup``, contextlib's callbacks)
_CLEANUPS = ("/unittest/case.py", "/contextlib.py")
#: what a call of each watched function names (an alias, a wrapper, a C function that enables it)
_NAMES = {
    "sys._getframe": ("frame",),
    "sys._current_frames": ("frame",),
    "sys.settrace": ("trace", "enable", "start"),
    "sys.setprofile": ("profile", "enable", "start"),
    "gc.get_objects": ("objects", "gc"),
    "gc.get_referrers": ("refer", "gc"),
    "gc.get_referents": ("refer", "gc"),
}
#: what a call that starts a thread names (``t.start()``, ``pool.submit``, ``ThreadPool(4)`` ...): a
#: start requested where none is named was dispatched by a callback (a finalizer's ``Thread.start``)
_STARTS = ("start", "submit", "map", "thread", "Thread", "run", "spawn", "apply", "xecutor", "ool", "worker")
#: what a call that opens or lists a file names (the C function raising the event): a hidden file
#: opened where the chain of calls up to it is not named at some link was dispatched (RT45-6 attacked)
_FILE_CALLS = {"open": ("open", "FileIO"), "os.listdir": ("listdir",), "os.scandir": ("scandir",)}
#: the call instructions: a dunder called by any other (``for``, ``with``, an operator) is named by syntax
_CALL_OPS = frozenset(opcode.opmap[n] for n in ("PRECALL", "CALL", "CALL_FUNCTION_EX") if n in opcode.opmap)
_RESUMED = 0x20 | 0x80 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR: resumed, not called
_OPS = {opcode.opmap[n]: n for n in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR", "LOAD_METHOD", "LOAD_CONST")}
_OPS.update(
    {opcode.opmap[n]: "local" for n in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF")}
)
_EXTENDED_ARG = opcode.EXTENDED_ARG


def _first(marks: object, owner: str | None, function: Callable, args: tuple, kwargs: dict) -> object:
    marks.owner = owner  # type: ignore[attr-defined]
    return function(*args, **kwargs)


# looked through by every walk (a ``<...>`` name: run-time code the code under test did not compile)
_first.__code__ = _first.__code__.replace(co_filename="<orchbench thread start>")


def _wrapper(name: str) -> Callable[..., object]:
    def start_new_thread(function: object, args: object, kwargs: object = None) -> object:
        out: list = []
        _audit(EVENT, function, args, kwargs, out)
        if not out:
            raise RuntimeError(f"{name} is not available during scoring")
        return out[0]

    return start_new_thread


def install() -> Callable:
    """Replace ``_thread.start_new_thread`` (and its aliases in every loaded module) by a wrapper;
    return the original (for :func:`hook` only)."""
    import _thread

    original = _thread.start_new_thread
    wrappers = {name: _wrapper(f"_thread.{name}") for name in ("start_new_thread", "start_new")}
    for module in list(sys.modules.values()):
        try:
            names = dict(vars(module))
        except TypeError:
            continue
        for name, value in names.items():
            if value is original:
                try:  # noqa: SIM105
                    setattr(module, name, wrappers.get(name, wrappers["start_new_thread"]))
                except (AttributeError, TypeError):
                    pass
    return original


def hook(original: Callable, threads: Threads) -> Callable[[str, tuple], None]:
    """An audit hook, added after stacktext's and before audit.py's: it starts the threads the wrapper
    asks for (the original lives only here), each marked with its starter where that is the code
    under test, and wraps ``_thread`` again when ``_imp.create_builtin`` makes it anew."""
    marks, wrapped = threads.marks, _wrapper("").__code__  # (every wrapper's code: one object)

    def thread_hook(event: str, args: tuple) -> None:
        if event == "orchbench.stack" and len(args) == 4 and args[0] == "_imp.create_builtin":
            made = args[3][0] if type(args[3]) is list and args[3] else None  # (stacktext's made it)
            if getattr(made, "__name__", None) == "_thread":
                for name in ("start_new_thread", "start_new"):
                    setattr(made, name, _wrapper(f"_thread.{name}"))
            return
        if event != EVENT:
            return
        function, targs, tkwargs, out = args if len(args) == 4 else (None, None, None, None)
        if type(out) is not list:
            raise RuntimeError("not a call this hook makes")
        if not callable(function) or not isinstance(targs, tuple) or not isinstance(tkwargs, dict | None):
            raise TypeError("start_new_thread: a callable, a tuple and a dict (or nothing) are needed")
        try:
            frame = _getframe(1)  # (the wrapper's caller: frames put between it and this hook skipped)
            while frame is not None and frame.f_code is not wrapped:
                frame = frame.f_back
            owner = threads.starter(frame.f_back if frame is not None else _getframe(1))
        except Exception:  # noqa: BLE001 - could not tell: the thread is the code under test's
            owner = "a thread start that could not be checked"
        out.append(original(_first, (marks, owner, function, targs, {} if tkwargs is None else tkwargs)))

    return thread_hook


class Threads:
    """Which thread acts for the code under test, and frame calls made through an indirection, for
    ``audit`` (``audit.Audit``)."""

    def __init__(self, audit: object) -> None:
        self.audit, self.marks, self.names = audit, _local(), {}
        audit.threads = self  # type: ignore[attr-defined]

    def starter(self, frame: object) -> str | None:
        """The code under test that starts a thread from ``frame`` (or a thread of its, or a callback
        that starts it through C: no frame names the start), or None."""
        where = self.audit.caller(frame, all_stdlib=True)  # type: ignore[attr-defined]
        if where:
            return where
        owner = getattr(self.marks, "owner", None)  # (a thread of the code under test's starts one)
        if owner and self.acts_for(frame, True):
            return owner
        while self.machinery(frame):  # (``Thread.start``, an executor's ``submit``...)
            frame = frame.f_back  # type: ignore[attr-defined]
        if frame is None or self.named(frame, _STARTS):
            return None
        name = frame.f_code.co_filename.rpartition("/")[2]  # type: ignore[attr-defined]
        return f"a callback (dispatched at {name}:{frame.f_lineno}, which does not name it)"  # type: ignore[attr-defined]

    def acts_for(self, frame: object, all_stdlib: bool = False, direct: bool = False) -> str | None:
        """Is the event raised at ``frame`` done for the code under test by this thread -- one it
        started, or one with the stdlib's frames alone -- where the frames up to the thread's start
        are the thread machinery or would be looked through for the code under test's own call
        (``all_stdlib``: every stdlib frame)? ``direct``: the event's own frame is the machinery's."""
        thread = _current_thread()
        if thread is _main_thread() or (direct and not self.machinery(frame)):
            return None
        audit, owner = self.audit, getattr(self.marks, "owner", None)
        through = (_ANGLE, _RUNTIME, _LOADER_FILE, _HELPER) + ((_STDLIB,) if all_stdlib else ())
        stdlib_only = True
        while frame is not None:
            name = frame.f_code.co_filename  # type: ignore[attr-defined]
            kind = audit.kind(name)  # type: ignore[attr-defined]
            stdlib_only = stdlib_only and kind in (_STDLIB, _HELPER, _ANGLE, _RUNTIME)
            base = kind == _BASE or (kind == _REPO and audit.base_line(name, frame))  # type: ignore[attr-defined]
            if not (kind in through or base or self.machinery(frame)):
                return None  # (a library's, a test's, logging's own frame: theirs, as in the main thread)
            frame = frame.f_back  # type: ignore[attr-defined]
        if owner:
            return f"a thread started during the tests ({thread.name[:60]}, started by {owner})"
        if stdlib_only:
            return f"a thread started during the tests ({thread.name[:60]}, stdlib code only)"
        return None

    def machinery(self, frame: object) -> bool:
        """Is ``frame`` the stdlib's thread machinery (or this module's first frame of a thread)?"""
        if frame is None:
            return False
        name = frame.f_code.co_filename  # type: ignore[attr-defined]
        kind = self.audit.kind(name)  # type: ignore[attr-defined]
        return (kind == _STDLIB and name.endswith(_DISPATCH)) or kind == _RUNTIME

    def indirect(self, event: str, frame: object) -> str | None:
        """Who made the frame, trace or heap call ``event`` through an indirection at ``frame`` (the
        nearest Python frame, which does not name it in its current call): the nearest frame of the
        code under test past it, else the indirection itself."""
        if frame is None or event not in _NAMES or self.named(frame, _NAMES[event]):
            return None
        name = frame.f_code.co_filename  # type: ignore[attr-defined]
        where = self.audit.caller(frame, all_stdlib=True)  # type: ignore[attr-defined]
        if where:
            return f"{where} (through {name.rpartition('/')[2]}:{frame.f_lineno}, which does not name it)"  # type: ignore[attr-defined]
        if name.endswith(_CLEANUPS) and self.audit.kind(name) == _STDLIB:  # type: ignore[attr-defined]
            return None
        return (
            f"a callback (dispatched at {name.rpartition('/')[2]}:{frame.f_lineno} in "  # type: ignore[attr-defined]
            f"{frame.f_code.co_name}, which does not name it)"  # type: ignore[attr-defined]
        )

    def dispatched(self, event: str, frame: object) -> str | None:
        """A hidden file opened or listed (``event``) with no frame of the code under test on the
        stack, through a callback: ``weakref.finalize(value, linecache.getlines, path)``, a weak
        reference's ``partial``, ``map(open, ...)`` consumed by a finalizer -- fired in the hidden
        test's frame or pytest's, it read the file into ``linecache`` or a list the code reads
        unseen. From the nearest frame up through the stdlib's, each frame must name the call it
        makes (the event's C function, then the function of the frame above it); the first that does
        not dispatched it; a generator's resumer and a dunder called by syntax are not asked. The
        import system and generated code end the walk; so does the first frame that is not the
        stdlib's and names its call."""
        words, callee, audit = _FILE_CALLS.get(event, ()), None, self.audit
        while frame is not None and words:
            name = frame.f_code.co_filename  # type: ignore[attr-defined]
            kind = audit.kind(name)  # type: ignore[attr-defined]
            if kind in (_ANGLE, _RUNTIME):
                return None
            by_syntax = callee is not None and callee.co_name.startswith("__")
            by_syntax = by_syntax and frame.f_code.co_code[frame.f_lasti] not in _CALL_OPS  # type: ignore[attr-defined]
            resumed = callee is not None and callee.co_flags & _RESUMED  # (by ``next``, a loop, C)
            if not (by_syntax or resumed) and not self.named(frame, words):
                return (
                    f"a callback (dispatched at {name.rpartition('/')[2]}:{frame.f_lineno} in "  # type: ignore[attr-defined]
                    f"{frame.f_code.co_name}, which does not name it)"  # type: ignore[attr-defined]
                )
            if kind not in (_STDLIB, _HELPER):
                return None
            callee = frame.f_code  # type: ignore[attr-defined]
            owner = callee.co_qualname.rpartition(".")[0].rpartition(".")[2]  # (a method: its class)
            words = (callee.co_name, callee.co_name.strip("_")) + ((owner,) if owner else ())
            frame = frame.f_back  # type: ignore[attr-defined]
        return None

    def named(self, frame: object, words: tuple) -> bool:
        """Does the call ``frame`` is making name one of ``words`` (a name it loads on the call's
        lines, up to the call), or its code the first of them anywhere? Remembered per code object
        and instruction."""
        code, lasti = frame.f_code, frame.f_lasti  # type: ignore[attr-defined]
        key = (id(code), lasti, words)
        found = self.names.get(key)
        if found is None or found[0] is not code:
            found = (code, any(w in n for n in _call_names(code, lasti) for w in words))
            if not found[1]:  # an alias the function made itself (``g = sys._getframe``; ``g(1)``)
                anywhere = [*code.co_names, *code.co_varnames, *code.co_freevars, *code.co_cellvars]
                anywhere += [c for c in code.co_consts if isinstance(c, str)]
                found = (code, any(words[0] in n for n in anywhere))
            if len(self.names) < 20_000:
                self.names[key] = found
        return found[1]


def _call_names(code: object, lasti: int) -> list[str]:
    """The names (and strings) loaded on the lines of the call at byte offset ``lasti`` of ``code``,
    up to it; every name of the code where its lines are unknown."""
    raw, positions = code.co_code, list(code.co_positions())  # type: ignore[attr-defined]
    end = min(lasti // 2, len(positions) - 1)
    first, last = (positions[end][0], positions[end][1]) if end >= 0 else (None, None)
    if first is None:
        return list(code.co_names) + list(code.co_varnames) + list(code.co_freevars)  # type: ignore[attr-defined]
    last = first if last is None else last
    names, ext = [], 0
    for i in range(end + 1):
        op, arg = raw[2 * i], raw[2 * i + 1] | ext
        ext = arg << 8 if op == _EXTENDED_ARG else 0
        kind, line = _OPS.get(op), positions[i][0]
        if kind is None or line is None or not first <= line <= last:
            continue
        try:
            if kind == "local":
                names.append(code._varname_from_oparg(arg))  # type: ignore[attr-defined]
            elif kind == "LOAD_CONST":
                value = code.co_consts[arg]  # type: ignore[attr-defined]
                names.append(value if isinstance(value, str) else "")
            else:
                names.append(code.co_names[arg >> 1 if kind == "LOAD_GLOBAL" else arg])  # type: ignore[attr-defined]
        except (IndexError, TypeError, ValueError):
            continue
    return names
