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


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.Module:
    """``ast.parse(source, filename, mode)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename, mode)  # type: ignore[return-value]
