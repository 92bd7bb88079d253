"""CSV export: rows (mappings) -> CSV text, streamed to a file-like object."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

SEPARATOR = ","
_NEEDS_QUOTES = (",", '"', "\n", "\r")


def format_value(value: Any) -> str:
    """One field: None -> "", booleans -> true/false, floats -> repr, quoted when needed."""
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = str(value)
    if any(ch in text for ch in _NEEDS_QUOTES):
        text = '"' + text.replace('"', '""') + '"'
    return text


def format_row(values: Sequence[Any]) -> str:
    return SEPARATOR.join(format_value(v) for v in values)


def write_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], out: TextIO) -> int:
    """Write the header and each row to ``out`` as rows are pulled; return the number of rows."""
    out.write(format_row(columns) + "\n")
    n = 0
    for row in rows:
        out.write(format_row([row.get(name) for name in columns]) + "\n")
        n += 1
    return n


def export_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """The CSV text of ``rows``: a header line, then one line per row, each ending with "\\n"."""
    buf = io.StringIO()
    write_csv(rows, columns, buf)
    return buf.getvalue()
