"""``ast.parse`` for a kit of threads.

CPython 3.11 keeps the AST converter's recursion counter in state the whole interpreter shares, so
two threads turning source into ``ast`` objects at once can fail with ``SystemError: AST constructor
recursion depth mismatch`` -- seen as a scoring that ended ``unscored`` while runs were scored side
by side and as a tool error in an agent's thread. Every ``ast.parse`` in the kit goes through this
one lock (the plugin, alone in its sandboxed process, is the exception).
"""

from __future__ import annotations

import ast
import threading

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


def after_header(body: list[ast.stmt]) -> int:
    """The index after the module docstring and ``from __future__`` imports."""
    i = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        i = 1
    while i < len(body) and isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__":  # type: ignore[attr-defined]
        i += 1
    return i
