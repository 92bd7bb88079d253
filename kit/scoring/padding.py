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
line, never inside one (a string's lines are as they were). A class's last line is its body's last
statement's: the blank lines there are that statement's (the class's own draw is made, and unused).

The text is ``ast.unparse``'s, written by its own writer (:class:`_Layout`), which notes where each
statement of a padded body ends and how many lines each function takes as it writes them: the text is
never parsed again (that, and ``ast.unparse`` itself, were half of injection's time). The kit's own
nodes need no position: the writer reads one only for a type comment, which the kit's trees have none of
(they are never parsed with ``type_comments``).
"""

from __future__ import annotations

import ast
import random

from kit import pyast

try:
    from ast import _Unparser as _Writer  # type: ignore[attr-defined]  # (3.11-3.13)
except ImportError:  # pragma: no cover -- 3.14 moved it
    from _ast_unparse import Unparser as _Writer  # type: ignore[import-not-found,no-redef]

JITTER = 6

#: At most this many blank lines in a module: the padding of a body is its functions' count times its
#: longest one's lines, so an added test module of 100 KB (a test of a 50,000-line string, 2,000
#: one-line tests) was padded to 100 MB in the kit's process, one of 1 MB to some 10 GB (RT45-3); the
#: most any of 1,917 real test modules took (the built tasks', site-packages') was 61,014.
MAX_BLANK_LINES = 8_000_000

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


class TooLarge(ValueError):
    """The module's text, once injected, is over what the kit parses (:data:`kit.pyast.MAX_SOURCE_BYTES`),
    or past what ``ast.unparse``'s writer can write: an expression nested a few hundred deep (a sum of
    400 terms), an int literal over Python's 4,300 digits (written in hex) -- RT45-1: the writer's
    error ended an honest run's scoring unscored."""


def unparse_padded(tree: ast.Module, rng: random.Random) -> str:
    """``ast.unparse(tree)`` with the blank lines above; ends with a newline. :class:`TooLarge` when
    the text (unpadded) is over what the kit parses -- a 259 KB module of 5,000 one-test classes is
    2.7 MB with two canaries in each (RT41-8) -- before any blank line is drawn. ``tree`` is left as
    it was (no position is added to the kit's own nodes)."""
    layout = _Layout()
    try:
        text = layout.visit(tree)
    except (RecursionError, ValueError) as e:  # (RT45-1)
        raise TooLarge(f"not written: {type(e).__name__}: {e}"[:200]) from None
    if (size := len(text.encode("utf-8", "surrogateescape"))) > pyast.MAX_SOURCE_BYTES:
        raise TooLarge(f"{size:,} bytes once injected")
    _draw(layout.module, rng, layout.slots, [MAX_BLANK_LINES])
    return "".join(layout.slots).rstrip("\n") + "\n"


#: A statement of a padded body: its length in lines if a function (else 0), the index of the slot
#: for the blank lines after it, and, for a class, its own body's statements
_Stmt = tuple[ast.stmt, int, int, "list | None"]


class _Layout(_Writer):
    """``ast.unparse``'s writer that leaves an empty slot in its output after each statement of the
    module's body and, recursively, of the bodies of its classes (not of a class in a function: not
    padded), noting each function's length; :func:`_draw` then fills the slots with blank lines."""

    def __init__(self, **options: object) -> None:  # (f-strings' parts: a writer of the same type)
        super().__init__(**options)
        self.module: list[_Stmt] = []
        self._pad_next: ast.ClassDef | None = None  # the class whose body is written next, padded
        self._written: list[_Stmt] = []  # the statements of the padded body written last

    @property
    def slots(self) -> list[str]:
        """The text so far, in pieces (the slots among them)."""
        return self._source

    def visit(self, node: ast.AST) -> str:
        self._pad_next, self.module = None, []
        return super().visit(node)

    def get_type_comment(self, node: ast.AST) -> str | None:
        """As the writer's, but a node without a position (the kit's) has no ``# type: ignore``."""
        comment = self._type_ignores.get(getattr(node, "lineno", None)) or node.type_comment  # type: ignore[attr-defined]
        return None if comment is None else f" # type: {comment}"

    def _write_docstring_and_traverse_body(self, node: ast.AST) -> None:
        if not isinstance(node, ast.Module) and node is not self._pad_next:
            super()._write_docstring_and_traverse_body(node)
            return
        self._pad_next = None
        docstring = self.get_raw_docstring(node)
        out: list[_Stmt] = []
        for i, stmt in enumerate(node.body):  # type: ignore[attr-defined]
            start = len(self._source)
            inner = None
            if i == 0 and docstring is not None:
                self._write_docstring(docstring)
            elif isinstance(stmt, ast.ClassDef):
                self._pad_next = stmt
                self.traverse(stmt)
                inner = self._written
            else:
                self.traverse(stmt)
            length = _lines(self._source[start:]) if isinstance(stmt, _FUNCS) else 0
            self._source.append("")
            out.append((stmt, length, len(self._source) - 1, inner))
        self._written = out
        if isinstance(node, ast.Module):
            self.module = out


def _lines(pieces: list[str]) -> int:
    """The lines of a statement's text: it starts with the line break that ends the line before it,
    and a definition's with one more, its blank line (its first line is its first decorator's)."""
    return "".join(pieces).lstrip("\n").count("\n") + 1


def _draw(body: list[_Stmt], rng: random.Random, slots: list[str], room: list[int]) -> None:
    """Blank lines in the slots after the statements of ``body``, then of each class's body after it;
    :class:`TooLarge` once more than ``room[0]`` (what is left of :data:`MAX_BLANK_LINES`) are drawn."""
    span = max((length for stmt, length, _, _ in body if isinstance(stmt, _FUNCS)), default=0) + 1
    for stmt, length, slot, inner in body:
        blank = rng.randint(0, JITTER) + (span - length if isinstance(stmt, _FUNCS) else 0)
        if inner is None:
            room[0] -= blank
            if room[0] < 0:
                raise TooLarge(f"over {MAX_BLANK_LINES:,} blank lines once padded")
            slots[slot] = "\n" * blank
        else:  # (the class's last line is its last statement's, whose blank lines they are)
            _draw(inner, rng, slots, room)
