"""Text from a repository or an agent, made safe to print: :func:`visible` is the one function every
place the kit prints such text goes through (``import-git``'s progress, summary and errors,
``kit tasks list`` and ``validate``, the report in every format, ``kit compare``, the live progress
bar, the CLI's error line).

A commit subject, a test name, a path, a model's error message can hold bytes a terminal obeys:
``ESC ] 0 ; title BEL`` retitles the window, ``ESC [ 2K`` erases the line being read, ``ESC ] 52``
writes the clipboard, ``CR`` overprints, and the Unicode bidi overrides (U+202E ...) and line
separators reorder or split what is shown. :func:`visible` writes each as its escape -- ``\\x1b``,
``\\r``, ``\\u202e`` -- so it shows, and does nothing: the C0 controls (tab and newline included,
unless ``lines``), DEL, the C1 controls (U+0080-U+009F), the bidi embeddings, overrides, isolates
and marks, and U+2028 / U+2029.
"""

from __future__ import annotations

#: Code points :func:`visible` writes as escapes (``\n`` aside when the kit lays out the lines).
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
UNSAFE = frozenset((*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI, 0x2028, 0x2029))


def _escape(cp: int) -> str:
    named = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
    return named.get(cp) or (f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}")


_TABLE = {cp: _escape(cp) for cp in UNSAFE}
_TABLE_LINES = {cp: esc for cp, esc in _TABLE.items() if cp != 0x0A}


def visible(text: object, lines: bool = False) -> str:
    """``text`` (any object: its ``str``) with every control character, DEL, C1 control, bidi
    control and line separator written as a visible escape (``\\x1b``, ``\\u202e``). With ``lines``
    a ``\\n`` stays a line break: for text whose lines the kit laid out itself."""
    return str(text).translate(_TABLE_LINES if lines else _TABLE)
