"""``ast.parse`` for a kit of threads.

CPython 3.11 keeps the AST converter's recursion counter in state the whole interpreter shares, so
two threads turning source into ``ast`` objects at once can fail with ``SystemError: AST constructor
recursion depth mismatch`` -- seen as a scoring that ended ``unscored`` while runs were scored side
by side and as a tool error in an agent's thread. Every ``ast.parse`` in the kit goes through this
one lock (the plugin, alone in its sandboxed process, is the exception).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import gc
import threading
from collections.abc import Iterator

_LOCK = threading.Lock()


#: The largest source the kit parses: ``ast.parse`` takes ~650 times a module's size in memory (a 4 MB
#: test module of a hostile repository took the kit to 2.6 GB), and no real module comes near it.
MAX_SOURCE_BYTES = 2 * 1024 * 1024


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.Module:
    """``ast.parse(source, filename, mode)``, one thread at a time; a source over
    :data:`MAX_SOURCE_BYTES` is a SyntaxError (never parsed), as is one nested too deep to parse."""
    size = len(source.encode("utf-8", "surrogateescape") if isinstance(source, str) else source)
    if size > MAX_SOURCE_BYTES:
        raise SyntaxError(
            f"{filename}: {size:,} bytes: the kit parses no Python source over {MAX_SOURCE_BYTES:,}"
        )
    with _LOCK:
        try:
            return ast.parse(source, filename, mode)  # type: ignore[return-value]
        except RecursionError:  # (3.11: a long flat expression too, during the AST's construction)
            raise SyntaxError(f"{filename}: nested too deep to parse") from None


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused for the block: one that builds and drops syntax trees by
    the hundred thousand nodes (scoring's injection spent a fifth of its time in collections, and
    syntax trees hold no cycles to collect). Re-enabled after, unless it was off before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def after_header(body: list[ast.stmt]) -> int:
    """The index after the module docstring and ``from __future__`` imports."""
    i = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        i = 1
    while i < len(body) and isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__":  # type: ignore[attr-defined]
        i += 1
    return i


_ATOMS = (str, int, float, bool, bytes, complex, type(None), type(Ellipsis))


def clone(node: object) -> object:
    """A deep copy of an ``ast`` node or list of nodes (faster than ``copy.deepcopy``: the kit copies
    every test a twin or canary is made from). Shared nodes come out unshared, but for the
    field-less ``Load``/``Store``/``Del`` contexts, which ``ast.parse`` shares too."""
    if isinstance(node, list):
        return [item if isinstance(item, _ATOMS) else clone(item) for item in node]
    if isinstance(node, ast.AST):
        if isinstance(node, ast.expr_context):
            return node
        new = node.__class__.__new__(node.__class__)
        new.__dict__.update({k: v if isinstance(v, _ATOMS) else clone(v) for k, v in node.__dict__.items()})
        return new
    return copy.deepcopy(node)  # (a tuple or frozenset a rewrite put in a Constant)


def _walk(todo: list[ast.AST], stop: tuple[type, ...] = ()) -> list[ast.AST]:
    """The nodes of ``todo`` and below, not descending into a node of a ``stop`` type (itself kept):
    ``ast.iter_child_nodes``, inlined -- ``ast.walk`` is four times slower, and the kit walks whole
    test modules several times per scoring."""
    out: list[ast.AST] = []
    node_type = ast.AST
    while todo:
        node = todo.pop()
        out.append(node)
        if stop and isinstance(node, stop):
            continue
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, node_type):
                todo.append(value)
            elif isinstance(value, list):
                todo.extend(v for v in value if isinstance(v, node_type))
    return out


def nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree``, itself first (``ast.walk``'s nodes, in another order)."""
    return _walk([tree])


_NAMING = ("name", "id", "asname", "arg", "attr")
_NAMED_BY: dict[type, tuple[str, ...]] = {}  # node class -> which of _NAMING are its fields


def identifiers(tree: ast.AST) -> set[str]:
    """Every name ``tree`` defines, binds, imports or reads, attributes' too: each node's ``name``,
    ``id``, ``asname``, ``arg`` and ``attr`` that is set, and a ``global``'s or ``nonlocal``'s names.
    (Only the fields its class has are read: most nodes have none.)"""
    out: set[str] = set()
    for node in nodes(tree):
        cls = node.__class__
        if (fields := _NAMED_BY.get(cls)) is None:
            fields = _NAMED_BY[cls] = tuple(f for f in _NAMING if f in cls._fields)
        for name in fields:
            if value := getattr(node, name, None):
                out.add(str(value))
        if cls is ast.Global or cls is ast.Nonlocal:
            out.update(node.names)  # type: ignore[attr-defined]
    return out


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def own_nodes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of ``func``'s body, not descending into nested functions, classes or lambdas."""
    return _walk(list(func.body), _SCOPES)
