"""Stack text: what the code under test learns of its callers without taking a frame, made visible.
It runs INSIDE the scoring sandbox with the audit hook (``audit.py``), loaded by the plugin from its
own folder before any code under test loads, and imports nothing from the kit.

The audit hook sees frames taken (``sys._getframe``, a traceback's ``tb_frame`` ...), but several
functions walk the stack in C and hand back its text with no audit event, or are the standard
library's own frame reads made on the caller's behalf: ``faulthandler``'s dumps (to any fd, at once,
on a timer or on a signal), ``warnings.warn(stacklevel=k)`` (the file and line ``k`` calls up),
``tracemalloc`` (where an object was made, up to its frame limit), coroutine origin tracking
(``cr_origin``), ``logging``'s ``stack_info``/``stacklevel``, a stdlib function asked for a frame
``k`` calls up (``typing._caller(k)``) and ``asyncio``'s debug mode (the stack where each handle or
future is made). With them the code under test can tell a hidden test's assertion from a twin's
helper (red team 40, RT40-5 and RT40-6). Each is charged like the audit hook's events -- to the
nearest frame of the code under test, looking through the standard library -- and sent as a ``seen``
line when it reads past the code under test's own callers:

- a faulthandler dump, tracemalloc's tracing or traces, coroutine origin tracking, ``stack_info``,
  asyncio's debug-mode stacks: any use charged to the code under test (they show the whole stack);
- a ``stacklevel`` (warnings, logging) or a stdlib function's frame depth: only when the frames it
  passes on the way hold test code or pytest's (the code under test may name its own caller:
  ``warnings.warn("deprecated", DeprecationWarning, stacklevel=2)`` is how deprecations are written).

The C functions are replaced by wrappers (in their modules, in every loaded module that imported them
by name, and in a module made again with ``_imp.create_builtin``) that hold nothing: each raises
``orchbench.stack`` and the audit hook -- which nothing the code under test can reach without a heap
walk leads to -- checks the call and makes it. Not closed: an original the standard library or a
library loaded before the session keeps in a closure or default (none known); what a stack's depth
alone tells (a ``RecursionError`` probe). A false alarm it can raise: asyncio's debug-mode stacks are
charged to the code under test that makes a future or handle even where a test turned debug mode on.

Code made with no compile event (RT46-2): ``marshal.loads`` and ``_imp._fix_co_filename`` (wrapped as
above) are checked as ``audit.py`` checks a compile, by the file names the code carries -- an import's
own bytecode file, beside its source outside the repo copy, excepted.
"""

from __future__ import annotations

import marshal
import os
import sys
import threading
from collections.abc import Callable

EVENT = "orchbench.stack"
_audit, _getframe, _local = sys.audit, sys._getframe, threading.local
_marshal_loads, _Code = marshal.loads, type(_getframe().f_code)
_osopen, _osread, _osclose = os.open, os.read, os.close
#: the import machinery's own load of a bytecode file: its marshal and rename are checked together
_BYTECODE = sys.modules["_frozen_importlib_external"]._compile_bytecode.__code__
_OPT = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
_PYC_TAIL = f".{sys.implementation.cache_tag}{_OPT}.pyc"  # (an import's bytecode file: ``__pycache__``)
#: module -> the functions wrapped there (``tracemalloc`` re-exports ``_tracemalloc``'s; ``warnings``
#: is ``_warnings``')
_WRAPPED = {
    "faulthandler": ("dump_traceback", "dump_traceback_later", "register", "enable"),
    "_tracemalloc": ("start", "_get_object_traceback", "_get_traces"),
    "tracemalloc": ("start", "_get_object_traceback", "_get_traces"),
    "_warnings": ("warn",),
    "warnings": ("warn",),
    "sys": ("set_coroutine_origin_tracking_depth",),
    "_imp": ("create_builtin", "_fix_co_filename"),  # (a code object renamed in place: RT46-2b)
}
_WHAT = {
    "dump_traceback": "dumped the stack (faulthandler)",
    "dump_traceback_later": "dumped the stack (faulthandler, on a timer)",
    "register": "dumped the stack (faulthandler, on a signal)",
    "enable": "dumped the stack (faulthandler, on a fault)",
    "start": "traced allocations (tracemalloc: the stack where each object is made)",
    "_get_object_traceback": "read where an object was made (tracemalloc)",
    "_get_traces": "read where objects were made (tracemalloc)",
    "set_coroutine_origin_tracking_depth": "tracked coroutine origins (the stack where each is made)",
}


def _wrapper(key: str) -> Callable[..., object]:
    def wrapper(*args: object, **kwargs: object) -> object:
        out: list = []
        _audit(EVENT, key, args, kwargs, out)
        if not out:
            raise RuntimeError(f"{key} is not available during scoring")
        return out[0]

    return wrapper


def _warn_wrapper(key: str = "_warnings.warn") -> Callable[..., object]:
    def warn(
        message: object,
        category: object = None,
        stacklevel: object = 1,
        source: object = None,
        **more: object,
    ) -> None:
        out: list = []
        _audit(EVENT, key, (message, category, stacklevel, source), more, out)
        if not out:
            raise RuntimeError("warnings.warn is not available during scoring")

    return warn


def install() -> tuple[dict, frozenset]:
    """Replace the stack-walking C functions by wrappers; return the originals (module.attribute ->
    function, for :func:`hook` only) and the wrappers' code objects."""
    import _imp
    import _tracemalloc
    import _warnings
    import faulthandler

    originals = {
        f"{mod.__name__}.{name}": getattr(mod, name)
        for mod in (faulthandler, _tracemalloc, _warnings, sys, _imp)
        for name in _WRAPPED[mod.__name__]
    }
    wrappers = {key: _warn_wrapper() if key.endswith(".warn") else _wrapper(key) for key in originals}
    swap = {id(fn): (fn, wrappers[key]) for key, fn in originals.items()}
    for module in list(sys.modules.values()):  # the modules, and every alias a loaded module holds
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
    return originals, frozenset(w.__code__ for w in wrappers.values())


def _repatch(module: object) -> None:
    """A module ``_imp.create_builtin`` made again (its C functions new, or put back from the copy
    the interpreter keeps): wrapped as at :func:`install` -- ``_imp`` too (RT46-5: its
    ``create_builtin`` was the original)."""
    name = getattr(module, "__name__", "")
    for attr in (
        _WRAPPED.get(name, ()) if name in ("faulthandler", "_tracemalloc", "_warnings", "_imp") else ()
    ):
        setattr(module, attr, _warn_wrapper() if attr == "warn" else _wrapper(f"{name}.{attr}"))


#: a process's memory layout: with it, native code can be called through ctypes by address (RT40-4)
_LAYOUT = frozenset({"maps", "smaps", "smaps_rollup", "numa_maps", "mem", "pagemap", "map_files", "auxv"})
_LAYOUT |= frozenset({"stat", "syscall"})
#: ctypes reading memory by address (``from_address``, ``string_at``, an object from a pointer)
_MEMORY = frozenset({"ctypes.cdata", "ctypes.PyObj_FromPtr", "ctypes.string_at", "ctypes.wstring_at"})
#: a subinterpreter runs with no audit hook: what it opens is not seen
_SUBINTERPRETER = "cpython.PyInterpreterState_New"
_MARSHAL = frozenset({"marshal.loads", "marshal.load"})  # code objects made with no compile event
_EVENTS = _MEMORY | _MARSHAL | {"open", "sys._getframe", _SUBINTERPRETER}


def hook(originals: dict, codes: frozenset, audit: object, send: Callable[..., None], kinds: dict):
    """An audit hook, added before ``audit.py``'s: it makes the wrapped calls (``orchbench.stack``:
    the originals live only here) and sends what :func:`called` and :func:`Checks.event` find, charged
    through ``audit`` (``audit.Audit``). ``kinds``: audit.py's file kinds -- ``foreign`` (test code,
    pytest's), ``stdlib``, ``helper``."""
    local, sent = _local(), set()
    checks = Checks(audit, kinds, codes)

    def seen(what: str | None) -> None:
        if what and what not in sent and len(sent) < 50:
            sent.add(what)
            send(kind="seen", message=what[:300])

    def checked(check: Callable[..., str | None], *args: object) -> None:
        if getattr(local, "busy", False):  # (what the check does raises events too)
            return
        local.busy = True
        try:
            seen(check(*args, _getframe(2)))
        except Exception as exc:  # noqa: BLE001 - never silent (cf. audit.py)
            try:  # noqa: SIM105
                seen(f"could not check a stack read ({type(exc).__name__})")
            except Exception:  # noqa: BLE001, S110
                pass
        finally:
            local.busy = False

    def stack_hook(event: str, args: tuple) -> None:
        if event == EVENT:
            key, cargs, ckwargs, out = args if len(args) == 4 else (None, None, None, None)
            original = originals.get(key)
            if (
                original is None
                or type(out) is not list
                or type(cargs) is not tuple
                or type(ckwargs) is not dict
            ):
                raise RuntimeError("not a call this hook makes")
            checked(checks.called, key, cargs, ckwargs)
            if key.endswith(".warn"):  # (the frames between here and the caller are not counted)
                message, category, level, source = cargs
                local.busy = True  # (the frames this walk reads are its own business)
                try:
                    here, caller, steps = _getframe(0), checks.outer(_getframe(1)), 0
                finally:
                    local.busy = False
                while here is not None and here is not caller:
                    here, steps = here.f_back, steps + 1
                if here is not None and isinstance(level, int):
                    level = steps + max(level, 1)
                out.append(original(message, category, level, source, **ckwargs))
                return
            result = original(*cargs, **ckwargs)
            if key == "_imp.create_builtin":
                _repatch(result)
            out.append(result)
        elif event in _EVENTS:
            checked(checks.event, event, args)

    return stack_hook


class Checks:
    """What :func:`hook` sends: a stack read past the code under test's own callers, charged to it."""

    def __init__(self, audit: object, kinds: dict, codes: frozenset) -> None:
        self.audit, self.foreign, self.codes = audit, frozenset(kinds["foreign"]), codes
        self.stdlib, self.helper = kinds["stdlib"], kinds["helper"]

    def outer(self, frame: object) -> object:
        """The frame that called a wrapper (or ``sys.audit`` itself) of the frame that raised the event."""
        return frame.f_back if frame is not None and frame.f_code in self.codes else frame  # type: ignore[attr-defined]

    def where(self, frame: object) -> str | None:
        return self.audit.caller(frame, all_stdlib=True)  # type: ignore[attr-defined]

    def called(self, key: str, cargs: tuple, ckwargs: dict, frame: object) -> str | None:
        """A wrapped C function called (``frame``: the one that raised the event)."""
        name, frame = key.rpartition(".")[2], self.outer(frame)
        if name == "create_builtin" or frame is None:
            return None
        if name == "_fix_co_filename":
            return self.renamed(cargs, frame)
        where = self.where(frame)
        if not where:
            return None
        if name == "warn":
            level = cargs[2]
            if isinstance(level, int) and level > 1 and self.crossed(frame, level - 1, _bootstrap):
                return f"{where} named a caller past its own (warnings.warn, stacklevel={level})"
            return None
        if name == "set_coroutine_origin_tracking_depth":
            depth = cargs[0] if cargs else ckwargs.get("depth")
            if not isinstance(depth, int) or depth <= 0:
                return None
        return f"{where} {_WHAT[name]}"

    def event(self, event: str, args: tuple, frame: object) -> str | None:
        """An audited event that is a stack read of the stdlib's on the caller's behalf, or (RT40-4)
        a read of the process's memory layout or of memory by address."""
        if event == "sys._getframe":
            return self.frame_read(args, frame)
        if not self.audit.processes:  # type: ignore[attr-defined]  # (as native code: not in own tests)
            return None
        if event in _MARSHAL:
            return self.marshalled(event, args, frame)
        if event in _MEMORY or event == _SUBINTERPRETER:
            where = self.where(frame)
            what = "started a subinterpreter (no audit hook runs there)" if event == _SUBINTERPRETER else ""
            return f"{where} {what or f'read memory by address with ctypes ({event})'}" if where else None
        path = args[0] if args else None
        path = path.decode("utf-8", "replace") if isinstance(path, bytes) else path
        if not isinstance(path, str) or not path.startswith("/proc/"):
            return None
        parts = [p for p in path.split("/") if p and p != "."]
        if len(parts) > 3 and parts[2] == "task":
            parts = parts[:2] + parts[4:]
        if (
            len(parts) < 3
            or parts[2] not in _LAYOUT
            or not (parts[1].isdigit() or parts[1] in ("self", "thread-self"))
        ):
            return None
        where = self.where(frame)
        return (
            f"{where} read the process's memory layout ({path[:80]}): native code could be called by address"
            if where
            else None
        )

    def frame_read(self, args: tuple, frame: object) -> str | None:
        """``sys._getframe`` by the stdlib (not its inspection helpers, which audit.py charges to their
        caller): logging's ``stack_info``/``stacklevel``, asyncio's debug stacks, a frame asked for
        past the code under test's callers (``typing._caller(k)``)."""
        code = frame.f_code  # type: ignore[attr-defined]
        name, kind = code.co_filename, self.audit.kind(code.co_filename)  # type: ignore[attr-defined]
        back = frame.f_back  # type: ignore[attr-defined]
        if kind == self.helper and back is not None and "/asyncio/" in back.f_code.co_filename:
            kind, name = self.stdlib, back.f_code.co_filename  # (a C future's traceback.extract_stack)
        if kind != self.stdlib:
            return None
        if "/asyncio/" in name:  # only in debug mode: the stack where each handle or future is made
            where = self.where(frame)
            return f"{where} had asyncio record the stack (debug mode)" if where else None
        if name.endswith("/logging/__init__.py") and code.co_name == "<lambda>" and back is not None:
            return self.logging(back, name) if back.f_code.co_name == "findCaller" else None
        target, depth, passed = args[0] if args else None, 1, False  # (the event's argument: the frame)
        while back is not None and back is not target:  # the frames between: test code or pytest's?
            passed = passed or self.audit.kind(back.f_code.co_filename) in self.foreign  # type: ignore[attr-defined]
            back, depth = back.f_back, depth + 1
        where = self.where(frame) if passed and back is not None else None
        return (
            f"{where} had {code.co_name} read a frame {depth} calls up (past its own callers)"
            if where
            else None
        )

    def logging(self, finder: object, logfile: str) -> str | None:
        """logging's ``findCaller``: ``stack_info`` prints the whole stack; ``stacklevel`` names a caller."""
        loc = finder.f_locals  # type: ignore[attr-defined]
        stack_info, level = loc.get("stack_info"), loc.get("stacklevel", 1)
        frame = finder.f_back  # type: ignore[attr-defined]
        while frame is not None and _logging_internal(frame.f_code.co_filename, logfile):
            frame = frame.f_back
        where = self.where(frame) if frame is not None else None
        if not where:
            return None
        if stack_info:
            return f"{where} read the stack as text (logging, stack_info)"
        if (
            isinstance(level, int)
            and level > 1
            and self.crossed(frame, level - 1, lambda n: _logging_internal(n, logfile))
        ):
            return f"{where} named a caller past its own (logging, stacklevel={level})"
        return None

    def marshalled(self, event: str, args: tuple, frame: object) -> str | None:
        """Code the code under test made with ``marshal`` (RT46-2: under ``os.py``'s name a frame read
        is the stdlib's doing): each file name its code objects carry is checked as a compile's
        (``Audit.compiled``), unless the data is the interpreter's own bytecode file of that name --
        an import of a module outside the repo, the kit's or pytest's read of a cached file is not
        the code under test's. ``marshal.load`` does not show its data: charged as such."""
        where = self.where(frame)
        if not where:
            return None
        if event == "marshal.load":
            return f"{where} made objects with marshal.load (the code it may make is not seen)"
        try:
            data = bytes(args[0])
            todo, names = [_marshal_loads(data)], set()
        except Exception:  # noqa: BLE001 - (the call fails as well)
            return None
        for _ in range(20_000):  # (the code objects, and what holds them, a bounded walk)
            if not todo:
                break
            value = todo.pop()
            if type(value) is _Code:
                names.add(value.co_filename)
                todo.extend(value.co_consts)
            elif type(value) in (tuple, list, set, frozenset):
                todo.extend(value)
            elif type(value) is dict:
                todo.extend(value.items())
        if frame.f_code is _BYTECODE:  # type: ignore[attr-defined]  # (renamed next: its source's name)
            names.add(frame.f_locals.get("source_path"))  # type: ignore[attr-defined]
        for name in sorted(n for n in names if type(n) is str):
            what = None if self.as_pyc(data, name) else self.audit.compiled(name, frame)  # type: ignore[attr-defined]
            if what:
                return what.replace(" compiled code ", " made code with marshal ", 1)
        return None

    def renamed(self, cargs: tuple, frame: object) -> str | None:
        """``_imp._fix_co_filename(code, path)``: ``code`` (and its nested code) renamed ``path`` in
        place, with no audit event (RT46-2b) -- checked as a compile under ``path``, unless the import
        machinery renames what it loaded (its marshal checked ``path`` already: :meth:`marshalled`)."""
        code, path = (*cargs, None, None)[:2]
        if type(code) is not _Code or type(path) is not str or code.co_filename == path:
            return None
        if frame.f_code is _BYTECODE:  # type: ignore[attr-defined]
            return None
        what = self.audit.compiled(path, frame)  # type: ignore[attr-defined]
        return what and what.replace(" compiled code ", " renamed code (_imp._fix_co_filename) ", 1)

    def as_pyc(self, data: bytes, name: str) -> bool:
        """Is ``data`` the body of the bytecode file beside ``name`` (not in the repo copy: the code
        under test can write there), as an import reads it?"""
        folder, _, file = name.rpartition("/")
        if not file.endswith(".py") or name.startswith(self.audit.repo):  # type: ignore[attr-defined]
            return False
        try:
            fd = _osopen(f"{folder}/__pycache__/{file[:-3]}{_PYC_TAIL}", os.O_RDONLY)
        except OSError:
            return False
        try:
            return _osread(fd, len(data) + 17)[16:] == data
        finally:
            _osclose(fd)

    def crossed(self, frame: object, count: int, skip: Callable[[str], bool] = lambda name: False) -> bool:
        """Do the ``count`` frames from ``frame`` up (frames ``skip`` names not counted) hold test code
        or pytest's -- is what is named past the code under test's own callers?"""
        while frame is not None and count > 0:
            name = frame.f_code.co_filename  # type: ignore[attr-defined]
            if not skip(name):
                if self.audit.kind(name) in self.foreign:  # type: ignore[attr-defined]
                    return True
                count -= 1
            frame = frame.f_back  # type: ignore[attr-defined]
        return False


def _bootstrap(name: str) -> bool:
    return "importlib" in name and "_bootstrap" in name  # (what warnings and logging skip)


def _logging_internal(name: str, logfile: str) -> bool:
    return name == logfile or _bootstrap(name)
