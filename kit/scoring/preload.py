"""Compiled before any code under test runs: every test file a scoring session may import. Runs INSIDE
the scoring sandbox, loaded by the plugin (``plugin.py``) from its own folder while the launcher has
not yet put the repo on ``sys.path`` (imports nothing from the kit).

:func:`compile_files` reads each file the kit names -- the hidden test modules, their conftests and
helpers (laid in the copy, or in the kit's folder), the own tests and the own-tests canary file -- and
compiles it, test modules and conftests with pytest's assertion rewriting (``rewrite_asserts``, bound
now), before the launcher makes any module of the repo importable. :class:`Preloaded` then serves
them: a finder first on ``sys.meta_path`` hands each of those files, whatever name it is imported
under, to a loader that executes the compiled code. At the end of collection :meth:`Preloaded.verify`
checks that every collected test module and every conftest pytest registered from those files is a
module this loader executed.

**What it closes.** Code under test that runs before pytest compiles a test module -- imported by a
conftest, by an ``__init__.py``, by the first of several hidden modules, by a ``-p`` plugin -- could
wrap pytest's rewriter (or ``compile``, ``ast``) and read the module's source tree, then empty its
tests and fail its twins (attack-scoring-1: 02, 06). It now runs too late: the code is compiled
already, and nothing of it is kept where the code under test can reach it without an audited read --
each file's code object is a constant of a small runner function whose own code carries the file's
name, so reading it (``__code__``, ``gc.get_referents``) is what the audit hook flags. A module loaded
by anything else (a finder put ahead of this one, ``sys.modules`` swapped during the import) is
tamper evidence.

**What it does not close.** What the code under test does to a module once it is loaded (its
globals, its functions' attributes): the twins' helpers are bound against that (``twins.py``) and the
audit hook sees code reads; the values a module holds as objects (parametrize arguments, module
constants) are readable in-process (``docs/scoring.md``). A file that does not compile here is left
to pytest, which reports it.
"""

from __future__ import annotations

import ast
import builtins
import importlib.machinery
import importlib.util
import os
import sys
import types

_find_spec = importlib.machinery.PathFinder.find_spec
_spec_from_file = importlib.util.spec_from_file_location
_realpath = os.path.realpath
_parse = ast.parse
_compile = builtins.compile
_exec = builtins.exec
_builtins = builtins
_Function = types.FunctionType
#: what each module's guard calls (``guard.py``), as it is before any code under test runs
_GUARD = (sys.audit, sys._getframe)
#: a runner's code: ``...`` becomes the module's code object (see :func:`_runner`); a test module's
#: or conftest's then tells the audit hook that it ran whole (``orchbench.loaded``: ``audit.py``)
_RUN = compile("def run(namespace, _exec=exec):\n    _exec(..., namespace)\n", "<run>", "exec").co_consts[0]
_TELL = compile(
    "def run(namespace, _exec=exec, _audit=exec):\n    _exec(..., namespace)\n    _audit('orchbench.loaded')\n",
    "<run>",
    "exec",
).co_consts[0]


def _runner(code: types.CodeType, path: str, tell: bool = False) -> types.FunctionType:
    """A function executing ``code`` in the namespace it is given (then, if ``tell``, raising
    ``orchbench.loaded``). The code object is a constant of the runner's own code, which is named
    after ``path`` (a test file): the only ways to it are an audited read of the runner's
    ``__code__`` or a heap walk."""
    run = _TELL if tell else _RUN
    consts = tuple(code if c is Ellipsis else c for c in run.co_consts)
    own = run.replace(co_consts=consts, co_filename=path, co_name="<module>", co_qualname="<module>")
    return _Function(own, {"__builtins__": _builtins}, "<module>", (_exec, _GUARD[0]) if tell else (_exec,))


def compile_files(files: list[list], rewrite: object) -> dict[str, types.FunctionType]:
    """``{real path: runner}`` for each ``[path, rewrite?, test module or conftest?]`` of ``files``
    that reads and compiles (with ``rewrite`` -- pytest's ``rewrite_asserts`` -- first, when asked)."""
    out: dict[str, types.FunctionType] = {}
    for path, rewritten, *tell in files:
        try:
            with open(path, "rb") as fh:
                source = fh.read()
            tree = _parse(source, filename=path)
            if rewritten:
                rewrite(tree, source, path, None)  # type: ignore[operator]
            code = _compile(tree, path, "exec", dont_inherit=True)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # pytest reports it when it imports the file
        out[_realpath(path)] = _runner(code, path, bool(tell and tell[0]))
    return out


def code_objects(runners: dict[str, types.FunctionType]) -> set[int]:
    """The ids of every code object the runners hold (a module's and, through its constants, every
    function's and class body's in it): code under those file names that is not one of them was
    compiled by someone else."""
    todo = [c for r in runners.values() for c in r.__code__.co_consts if isinstance(c, types.CodeType)]
    seen: set[int] = set()
    while todo:
        code = todo.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return seen


class Preloaded:
    """The finder and loader of the precompiled files (put first on ``sys.meta_path``). What it
    executed is held in closures, not in attributes."""

    def __init__(self, runners: dict[str, types.FunctionType]) -> None:
        self.stems = frozenset(
            os.path.basename(os.path.dirname(p)) if p.endswith("/__init__.py") else os.path.basename(p)[:-3]
            for p in runners
        )
        self.find_spec = _finder(self, frozenset(runners), self.stems)
        self.exec_module, self.verify = _loader(runners)

    def create_module(self, spec: object) -> None:
        return None


def _finder(loader: object, paths: frozenset[str], stems: frozenset[str]) -> object:
    def find_spec(name: str, path: object = None, target: object = None) -> object:
        if name.rpartition(".")[2] not in stems:
            return None
        spec = _find_spec(name, path)
        if spec is None or not spec.origin or _realpath(spec.origin) not in paths:
            return None
        return _spec_from_file(
            name, spec.origin, loader=loader, submodule_search_locations=spec.submodule_search_locations
        )

    return find_spec


def _loader(runners: dict[str, types.FunctionType]) -> tuple[object, object]:
    loaded: list[types.ModuleType] = []  # every module executed here

    def exec_module(module: types.ModuleType) -> None:
        run = runners[_realpath(module.__spec__.origin)]  # type: ignore[union-attr]
        loaded.append(module)
        module.__dict__["__orchbench_guard__"] = _GUARD  # (bound by its guard before it imports)
        run(module.__dict__)

    def verify(items: list, plugins: list, module_class: type, parent: object, path: object) -> list[str]:
        """Tamper evidence: collected test modules and registered conftests from the precompiled
        files that were not executed here. ``parent``, ``path``: pytest's ``Node`` slots' getters
        (bound when the session started: a patched class or property changes nothing)."""
        mine = {id(m) for m in loaded}
        problems: list[str] = []
        seen: set[int] = set()
        for item in items:
            node = item
            while node is not None and not isinstance(node, module_class):
                node = parent(node)  # type: ignore[operator]
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            where = _realpath(str(path(node)))  # type: ignore[operator]
            if where in runners and id(vars(node).get("_obj")) not in mine:
                problems.append(f"test module {where} was not loaded from the kit's compiled copy")
        for plugin in plugins:
            if (
                isinstance(plugin, types.ModuleType)
                and _file_of(plugin) in runners
                and id(plugin) not in mine
            ):
                problems.append(f"conftest {_file_of(plugin)} was not loaded from the kit's compiled copy")
        return problems[:5]

    return exec_module, verify


def session_hooks(preloaded: Preloaded, send: object, into: object) -> object:
    """The pytest hooks (as attributes of ``into``, a plain object pytest registers as a plugin) that
    keep ``preloaded`` first on ``sys.meta_path`` -- pytest puts its rewriting hook ahead of it
    before it loads the first conftests -- and send, after collection, a ``tamper`` line for each
    test module or conftest of the precompiled files that it did not load. Everything they use is
    bound now, in closures: a later patch of a class or module changes nothing here."""
    import pluggy
    import pytest
    from _pytest.nodes import Node

    module_class, get_plugins = pytest.Module, pluggy.PluginManager.get_plugins
    verify, parent, path = preloaded.verify, vars(Node)["parent"].__get__, vars(Node)["path"].__get__

    def first_on_meta_path() -> None:
        meta_path = sys.meta_path  # (the list the import system reads now, should it be another)
        while preloaded in meta_path:
            meta_path.remove(preloaded)
        meta_path.insert(0, preloaded)

    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests() -> None:
        first_on_meta_path()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection() -> None:
        first_on_meta_path()

    def pytest_collection_finish(session: pytest.Session) -> None:
        plugins = get_plugins(session.config.pluginmanager)
        for problem in verify(session.items, plugins, module_class, parent, path):
            send(kind="tamper", message=problem)  # type: ignore[operator]

    vars(into).update({k: v for k, v in locals().items() if k.startswith("pytest_")})
    return into


def _file_of(module: object) -> str:
    name = getattr(module, "__file__", None)
    return _realpath(name) if isinstance(name, str) else ""
