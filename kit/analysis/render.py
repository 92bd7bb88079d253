"""The report rendered three ways from one list of :class:`Section`: plain text that fits a terminal's
width (long lines wrapped, wide tables split into column blocks that repeat the row labels), markdown
(pipe tables; text in fenced blocks, so nothing a model wrote is read as markdown), and one
self-contained HTML file (inline style, figures as embedded PNGs, a content security policy that loads
nothing from anywhere: it opens offline, and no text of the records can fetch or run anything).
"""

from __future__ import annotations

import base64
import html
import io
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from kit.untrusted.terminal import visible

FORMATS = ("text", "markdown", "html")


@dataclass
class Section:
    """One part of the report: a title ('' for the opening block), lines of text, a table (strings,
    already formatted), lines after it, and a figure for the HTML report (made only there)."""

    title: str = ""
    lines: list[str] = field(default_factory=list)
    table: pd.DataFrame | None = None
    after: list[str] = field(default_factory=list)
    figure: Callable[[], Figure] | None = None


# --------------------------------------------------------------------------- text


def wrap(line: str, width: int | None) -> list[str]:
    """``line`` wrapped to ``width``, continuation lines indented two past its own indent."""
    if width is None or len(line) <= width:
        return [line]
    indent = len(line) - len(line.lstrip(" "))
    return textwrap.wrap(
        line,
        width=width,
        subsequent_indent=" " * min(indent + 2, width // 2),
        break_on_hyphens=False,
        drop_whitespace=True,
    ) or [line[:width]]


def _cell(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def fit_table(table: pd.DataFrame, width: int | None) -> str:
    """``table`` as text; wider than ``width``, its columns are split into blocks that fit, each
    repeating the row labels (a cell wider than the room left is cut with '…')."""
    text = table.to_string()
    if width is None or max(map(len, text.splitlines()), default=0) <= width or table.shape[1] <= 1:
        return text
    strings = table.astype(str)
    first = strings.iloc[:, [0]]
    first_w = max(len(str(first.columns[0])), int(first.iloc[:, 0].map(len).max() if len(first) else 0))
    label_w = max(map(len, first.to_string().splitlines()), default=0) - first_w - 2
    room = max(12, width - label_w - 2)
    strings = strings.map(lambda v: _cell(v, room))
    return "\n\n".join(strings[cols].to_string() for cols in column_blocks(strings, room))


def column_blocks(strings: pd.DataFrame, room: int) -> list[list[Any]]:
    """The columns of ``strings`` (a table of strings) in consecutive blocks, each at most ``room``
    characters wide (a column two wider than its widest cell or name); a wider column is a block alone."""
    blocks, block, used = [], [], 0
    for col in strings.columns:
        w = max(len(str(col)), int(strings[col].map(len).max() if len(strings) else 0)) + 2
        if block and used + w > room + 2:
            blocks.append(block)
            block, used = [], 0
        block.append(col)
        used += w
    if block:
        blocks.append(block)
    return blocks


#: How many characters of cells a table in the HTML report holds across (about 1,100 px at its font
#: size: the page is 1,200 px wide); a wider table is split into column blocks, each repeating the
#: row labels, so no column hides behind a scroll bar.
HTML_TABLE_CHARS = 140


def html_tables(table: pd.DataFrame, chars: int = HTML_TABLE_CHARS) -> str:
    """``table`` as HTML, split into column blocks that fit :data:`HTML_TABLE_CHARS` (the text report
    splits the same way)."""
    strings = table.astype(str)
    index = table.index.to_frame(index=False).astype(str)
    label_w = sum(max(len(str(n or "")), int(index[c].map(len).max() if len(index) else 0)) + 2
                  for n, c in zip(table.index.names, index.columns, strict=True))  # fmt: skip
    blocks = column_blocks(strings, max(12, chars - label_w)) if table.shape[1] > 1 else [list(table.columns)]
    return "".join(table[cols].to_html(escape=True, border=0) for cols in blocks)


def render_text(sections: list[Section], width: int | None = None) -> str:
    """Plain text; with ``width`` no line is wider than it."""
    parts = []
    for s in sections:
        out = [*wrap(s.title, width)] if s.title else []
        out += [w for line in s.lines for w in wrap(line, width)]
        if s.table is not None:
            out.append(fit_table(s.table, width))
        out += [w for line in s.after for w in wrap(line, width)]
        parts.append("\n".join(out))
    return "\n\n".join(p for p in parts if p) + "\n"


# --------------------------------------------------------------------------- markdown

_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|])")


def md_escape(text: str) -> str:
    """``text`` with markdown's special characters escaped and line breaks as spaces (a table cell:
    no link, image, HTML or emphasis of the records' text is rendered)."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def _fence(lines: list[str]) -> list[str]:
    longest = max((len(m) for line in lines for m in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", *lines, fence]


def md_table(table: pd.DataFrame) -> list[str]:
    """A pipe table: the row labels (index levels) first, then the columns; every cell escaped."""
    names = [str(n) if n is not None else "" for n in table.index.names]
    header = [*names, *map(str, table.columns)]
    rows = []
    for key, row in zip(table.index, table.itertuples(index=False), strict=True):
        key = key if isinstance(key, tuple) else (key,)
        rows.append([*map(str, key), *map(str, row)])
    out = ["| " + " | ".join(md_escape(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in rows]
    return out


def render_markdown(sections: list[Section], title: str) -> str:
    """Markdown: a heading per section, its text in fenced blocks, its table as a pipe table."""
    out = [f"# {' '.join(title.split())}", ""]
    for s in sections:
        if s.title:
            out += [f"## {' '.join(s.title.split())}", ""]  # the kit's own words
        if s.lines:
            out += [*_fence(s.lines), ""]
        if s.table is not None:
            out += [*md_table(s.table), ""]
        if s.after:
            out += [*_fence(s.after), ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- html

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .6em; font-size: .9em; }
pre.summary { font-size: 1em; background: #eef4fb; border-left: 4px solid #4a78b5; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: .2em .5em; text-align: right; vertical-align: top; }
th { background: #f0f0f0; } .wide { overflow-x: auto; }
img { max-width: 100%; border: 1px solid #eee; }
nav li { margin: .1em 0; }
"""


def png_data(fig: Figure) -> str:
    """``fig`` as a data: URL of a PNG."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _anchor(i: int) -> str:
    return f"s{i}"


def render_html(sections: list[Section], title: str) -> str:
    """One self-contained HTML page: no external file, script or font; figures embedded as PNG."""
    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>"]
    toc = [
        f'<li><a href="#{_anchor(i)}">{esc(s.title.split(" (")[0])}</a></li>'
        for i, s in enumerate(sections)
        if s.title
    ]
    if toc:
        body.append("<nav><ul>" + "".join(toc) + "</ul></nav>")
    for i, s in enumerate(sections):
        if s.title:
            body.append(f'<h2 id="{_anchor(i)}">{esc(s.title)}</h2>')
        if s.lines:
            kind = ' class="summary"' if not s.title else ""
            body.append(f"<pre{kind}>" + esc("\n".join(s.lines)) + "</pre>")
        if s.table is not None:
            body.append('<div class="wide">' + html_tables(s.table) + "</div>")
        if s.after:
            body.append("<pre>" + esc("\n".join(s.after)) + "</pre>")
        if s.figure is not None:
            body.append(f'<p><img alt="{esc(s.title)}" src="{png_data(s.figure())}"></p>')
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _visible_table(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its cells, row labels and column names as :func:`~kit.untrusted.terminal.visible` text."""
    shown = table.map(visible)
    shown.columns = [visible(c) if isinstance(c, str) else c for c in shown.columns]
    if isinstance(shown.index, pd.MultiIndex):
        shown.index = shown.index.set_levels([lvl.map(visible) for lvl in shown.index.levels])
    else:
        shown.index = shown.index.map(visible)
    return shown


def visible_sections(sections: list[Section]) -> list[Section]:
    """``sections`` with every piece of text escaped for a terminal or a page (a record's error, a
    stop reason, a task's title can hold what an agent or a repository wrote): each line, title and
    cell through :func:`kit.untrusted.terminal.visible` -- a control character shows as ``\\x1b``, never acts."""
    return [
        Section(
            visible(s.title),
            [visible(line) for line in s.lines],
            None if s.table is None else _visible_table(s.table),
            [visible(line) for line in s.after],
            s.figure,
        )
        for s in sections
    ]


def render(sections: list[Section], fmt: str, title: str, width: int | None = None) -> str:
    """``sections`` as ``fmt`` (:data:`FORMATS`), every text escaped first (:func:`visible_sections`)."""
    sections, title = visible_sections(sections), visible(title)
    if fmt == "markdown":
        return render_markdown(sections, title)
    if fmt == "html":
        return render_html(sections, title)
    return render_text(sections, width)
