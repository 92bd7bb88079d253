"""The text of an injected test module, laid out so that where a test starts tells nothing of its length.

pytest's collected items carry each test's first line (``item.location``, cached by pytest: reading it
is library code at work, not evidence), and the code under test can reach the items (RT40c-1/2: through
the assertion-rewrite hook pytest leaves in ``sys.meta_path``). Written as ``ast.unparse`` writes it, the
gap between two tests' first lines is the first one's length: a requirement is the shortest of its
three, a twin its shadow plus one ``assert`` -- enough to tell them apart and forge the report of
requirements and twins only. Here each function of a module's or class's body is followed by blank
lines up to one span for the whole body (its longest function, plus one) and a random 0 to
:data:`JITTER` more; every other statement by a random 0 to :data:`JITTER`. The gap after a function is
then the span plus chance, whatever the function holds. Blank lines go only after a statement's last
line, never inside one (a string's lines are as they were).
"""

from __future__ import annotations

import ast
import random

from kit import pyast

JITTER = 6


class TooLarge(ValueError):
    """The module's text, once injected, is over what the kit parses (:data:`kit.pyast.MAX_SOURCE_BYTES`)."""


def unparse_padded(tree: ast.Module, rng: random.Random) -> str:
    """``ast.unparse(tree)`` with the blank lines above; ends with a newline. :class:`TooLarge` when
    the text is over what the kit parses (its lines are found by parsing it again): a 259 KB module
    of 5,000 one-test classes is 2.7 MB with two canaries in each (RT41-8)."""
    text = ast.unparse(pyast.with_locations(tree))
    if (size := len(text.encode("utf-8", "surrogateescape"))) > pyast.MAX_SOURCE_BYTES:
        raise TooLarge(f"{size:,} bytes once injected")
    lines = text.split("\n")
    extra: dict[int, int] = {}  # 1-based line number -> blank lines to add after it
    _pad(pyast.parse(text).body, rng, extra)  # (one thread at a time: kit/pyast.py)
    out: list[str] = []
    for number, line in enumerate(lines, 1):
        out.append(line)
        out.extend([""] * extra.get(number, 0))
    return "\n".join(out).rstrip("\n") + "\n"


def _pad(body: list[ast.stmt], rng: random.Random, extra: dict[int, int]) -> None:
    funcs = [s for s in body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)]
    span = max((_length(s) for s in funcs), default=0) + 1
    for stmt in body:
        last = stmt.end_lineno or stmt.lineno
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            extra[last] = span - _length(stmt) + rng.randint(0, JITTER)
        else:
            extra[last] = rng.randint(0, JITTER)
        if isinstance(stmt, ast.ClassDef):
            _pad(stmt.body, rng, extra)


def _length(stmt: ast.stmt) -> int:
    first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
    return (stmt.end_lineno or stmt.lineno) - first + 1
