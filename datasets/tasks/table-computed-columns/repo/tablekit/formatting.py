"""Output: an aligned text table and CSV."""

from __future__ import annotations

from typing import Any

from tablekit.column import Column
from tablekit.table import Table


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def to_text(table: Table, max_rows: int | None = None) -> str:
    """Columns padded to their widest value; numbers right-aligned; a rule under the header."""
    columns: list[Column] = list(table._columns.values())
    rows = table._rows if max_rows is None else table._rows[:max_rows]
    cells = [[format_value(row[c.name]) for c in columns] for row in rows]
    widths = [max([len(c.name), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        parts = [
            v.rjust(w) if c.numeric else v.ljust(w) for v, w, c in zip(values, widths, columns, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [line([c.name for c in columns]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    hidden = len(table._rows) - len(rows)
    if hidden > 0:
        out.append(f"... ({hidden} more rows)")
    return "\n".join(out) + "\n"


def _csv_field(text: str) -> str:
    if any(ch in text for ch in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def to_csv(table: Table) -> str:
    """Header line and one line per row; floats keep full precision; fields quoted when needed."""
    names = list(table._columns)
    lines = [",".join(_csv_field(n) for n in names)]
    for row in table._rows:
        values = [repr(row[n]) if isinstance(row[n], float) else format_value(row[n]) for n in names]
        lines.append(",".join(_csv_field(v) for v in values))
    return "\n".join(lines) + "\n"
