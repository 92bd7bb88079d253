"""Which files of a change are tests, which test functions it added or changed, and a test module cut
down to chosen tests -- all read with ``ast``; nothing of the repository is imported.

**Test side.** A file is on the test side when its name is a test module's (``test_*.py``,
``*_test.py``, or a ``--tests`` glob), it is a ``conftest.py``, or it sits under a ``tests/``,
``test/`` or ``testing/`` folder (helpers and data). Everything else the change touches is the
reference solution.

**Test data laid with the hidden tests.** Besides the conftests, test packages' ``__init__.py``,
helper modules and pytest configuration on the hidden modules' paths, ``acceptance/`` gets the data
files the hidden tests read: those a string literal of a laid file names (by file or folder name),
and those the hidden tests were seen to open in the importer's probes with the change -- the probes
lay every test-side data file under the hidden modules' top folders, and the scoring session's audit
hook reports which data files of the tree the tests (not the code under test) open, wherever they
live: a golden file outside any test folder is laid too, so an agent cannot write its own.

**Tests a change added or changed.** Per test function -- a module-level ``test*`` function or a
``test*`` method of a test class (``Test*`` or a ``unittest.TestCase`` subclass) -- keyed as pytest
names it (``Class::name``): added when the base module lacks it, changed when its ``ast`` (decorators
included, positions and comments not) differs from the base's.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import PurePosixPath

from kit import pyast
from kit.tasks.requirements import TEST_FILE_RE, is_test_class, is_test_func

TEST_DIRS = frozenset({"tests", "test", "testing"})

FuncNode = ast.FunctionDef | ast.AsyncFunctionDef


def is_test_module(path: str, globs: list[str] | None = None) -> bool:
    """A Python test module: pytest's default names, or (when given) a path matching one of ``globs``."""
    if not path.endswith(".py") or PurePosixPath(path).name == "conftest.py":
        return False
    if globs:
        return any(fnmatch.fnmatchcase(path, g) for g in globs)
    return bool(TEST_FILE_RE.match(PurePosixPath(path).name))


def is_test_side(path: str, globs: list[str] | None = None) -> bool:
    """A test module, a conftest, or anything under a tests/-like folder (see the module docstring)."""
    rel = PurePosixPath(path)
    return (
        is_test_module(path, globs)
        or rel.name == "conftest.py"
        or any(part in TEST_DIRS for part in rel.parts[:-1])
        or bool(globs and any(fnmatch.fnmatchcase(path, g) for g in globs))
    )


def parse(source: str | bytes, name: str) -> ast.Module | None:
    """The module's ``ast``, or None when it does not parse."""
    try:
        return pyast.parse(source, filename=name)
    except (SyntaxError, ValueError, RecursionError):
        return None


def test_functions(tree: ast.Module) -> dict[str, FuncNode]:
    """``name`` or ``Class::name`` -> node, for every test function pytest would collect from source."""
    out: dict[str, FuncNode] = {}
    for node in tree.body:
        if is_test_func(node):
            out[node.name] = node  # type: ignore[union-attr,assignment]
        elif is_test_class(node):
            for sub in node.body:  # type: ignore[union-attr]
                if is_test_func(sub):
                    out[f"{node.name}::{sub.name}"] = sub  # type: ignore[union-attr]
    return out


def _shape(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def changed_tests(base: ast.Module | None, head: ast.Module) -> tuple[list[str], list[str], list[str]]:
    """(added, changed, removed) test keys between a module's base and head versions."""
    old = test_functions(base) if base is not None else {}
    new = test_functions(head)
    added = [k for k in new if k not in old]
    changed = [k for k in new if k in old and _shape(new[k]) != _shape(old[k])]
    removed = [k for k in old if k not in new]
    return added, changed, removed


# --------------------------------------------------------------------------- cutting a module down


def _span(node: ast.stmt) -> tuple[int, int]:
    """0-based [start, end) line span of a statement, its decorators included."""
    decorators = getattr(node, "decorator_list", [])
    first = min([node.lineno, *(d.lineno for d in decorators)]) - 1
    return first, node.end_lineno or node.lineno


def _base_names(cls: ast.ClassDef) -> set[str]:
    return {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in cls.bases}


def reduce_module(source: str, keep: set[str]) -> str:
    """``source`` with every test function not keyed in ``keep`` removed. A test class left without
    tests is removed too, unless a kept class derives from it (then it keeps its other members, and
    ``pass`` if nothing is left). Everything else -- imports, helpers, fixtures, non-test classes,
    the non-test methods of test classes -- stays as written, but a module-level call of a removed
    test function (a test run at import) goes with it."""
    tree = pyast.parse(source)
    lines = source.splitlines(keepends=True)
    kept_classes = {k.split("::")[0] for k in keep if "::" in k}
    needed = set(kept_classes)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    todo = list(kept_classes)
    while todo:  # base classes (defined here) of kept classes stay
        name = todo.pop()
        for base in _base_names(classes[name]) if name in classes else set():
            if base in classes and base not in needed:
                needed.add(base)
                todo.append(base)
    cuts: list[tuple[int, int, str]] = []
    removed = {n.name for n in tree.body if is_test_func(n) and n.name not in keep}  # type: ignore[union-attr]
    for node in tree.body:
        gone = is_test_func(node) and node.name in removed  # type: ignore[union-attr]
        if gone or _calls_one_of(node, removed):  # a removed test, or a call of one at import (boltons)
            cuts.append((*_span(node), ""))
        elif is_test_class(node):
            cls: ast.ClassDef = node  # type: ignore[assignment]
            if cls.name not in needed:
                cuts.append((*_span(cls), ""))
                continue
            drop = [s for s in cls.body if is_test_func(s) and f"{cls.name}::{s.name}" not in keep]  # type: ignore[union-attr]
            for sub in drop:
                cuts.append((*_span(sub), ""))
            if len(drop) == len(cls.body):
                indent = re.match(r"\s*", lines[cls.body[0].lineno - 1]).group(0)  # type: ignore[union-attr]
                cuts.append((_span(cls.body[0])[0], _span(cls.body[0])[0], f"{indent}pass\n"))
    for start, end, text in sorted(cuts, reverse=True):
        lines[start:end] = [text] if text else []
    return "".join(lines)


def _calls_one_of(node: ast.stmt, names: set[str]) -> bool:
    """A module-level statement that is just a call of one of ``names`` (``test_x()``)."""
    call = node.value if isinstance(node, ast.Expr) else None
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names


# --------------------------------------------------------------------------- names the base may lack

STAND_IN = "_Unavailable"
STAND_IN_SOURCE = f'''

class {STAND_IN}:
    """A name the code under test does not provide (written by kit tasks import-git): using it fails
    only the tests that use it."""

    def __init__(self, module, name):
        self._where = (module, name)

    def _fail(self):
        raise ImportError("cannot import name %r from %r" % (self._where[1], self._where[0]))

    def __call__(self, *args, **kwargs):
        self._fail()

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._fail()

'''


def tolerant_imports(source: str, packages: set[str]) -> str:
    """``source`` with each module-level ``from <package> import a, b as c`` (``<package>`` one of
    the repo's own top-level names) written as one ``try: from ... import a / except ImportError:
    a = _Unavailable(...)`` per name, so a name the code under test lacks fails only the tests
    that use it, not the import of the whole module. Other statements are left as written."""
    tree = pyast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node in tree.body:
        if not (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and node.module
            and node.module.split(".")[0] in packages
            and not any(a.name == "*" for a in node.names)
        ):
            continue
        text = ""
        for alias in node.names:
            bound = alias.asname or alias.name
            clause = f"{alias.name} as {alias.asname}" if alias.asname else alias.name
            text += (
                f"try:\n    from {node.module} import {clause}\nexcept ImportError:\n"
                f"    {bound} = {STAND_IN}({node.module!r}, {alias.name!r})\n"
            )
        edits.append((node.lineno - 1, node.end_lineno or node.lineno, text))
    if not edits:
        return source
    for start, end, text in sorted(edits, reverse=True):
        lines[start:end] = [text]
    after = _header_end(tree)
    return "".join(lines[:after]) + STAND_IN_SOURCE.lstrip("\n") + "".join(lines[after:])


def _header_end(tree: ast.Module) -> int:
    """The line after a module docstring and ``from __future__`` imports."""
    after = 0
    for node in tree.body:
        doc = (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        )
        if doc or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            after = node.end_lineno or after
        else:
            break
    return after


# --------------------------------------------------------------------------- what a module uses


def local_imports(tree: ast.Module, module_path: str) -> list[str]:
    """Candidate repo-relative paths of the modules ``tree`` (at ``module_path``) imports: absolute
    names from the repository's root and from the module's own folder, relative ones from its package."""
    folder = PurePosixPath(module_path).parent
    out: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        base = PurePosixPath()
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = folder
                for _ in range(node.level - 1):
                    base = base.parent
                mod = (node.module or "").replace(".", "/")
                out += _module_files(base / mod if mod else base)
                out += [
                    p
                    for a in node.names
                    for p in _module_files((base / mod) / a.name if mod else base / a.name)
                ]
                continue
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        for name in filter(None, names):
            rel = PurePosixPath(name.replace(".", "/"))
            for root in (PurePosixPath(), folder):
                out += _module_files(root / rel)
                out += [f"{p}/__init__.py" for p in (root / rel).parents if str(p) not in ("", ".")]
    return sorted(set(out))


def _module_files(stem: PurePosixPath) -> list[str]:
    s = str(stem)
    if s in ("", "."):
        return []
    return [f"{s}.py", f"{s}/__init__.py"]


def string_literals(tree: ast.Module) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
