"""CSV export: rows (mappings) -> CSV text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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


def export_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """The CSV text of ``rows``: a header line, then one line per row, each ending with "\\n"."""
    lines = [format_row(columns)]
    for row in rows:
        lines.append(format_row([row.get(name) for name in columns]))
    return "\n".join(lines) + "\n"
