"""Nothing a repository or an agent wrote reaches the terminal raw: :func:`kit.untrusted.terminal.visible` writes
every control character as its escape, and the report (text, markdown, HTML) and the live progress
bar go through it. Before: a record's error or a task's title printed ESC, BEL and bidi overrides as
they were -- a window title set, a line erased, the clipboard written."""

from __future__ import annotations

import pandas as pd

from kit.analysis.render import Section, render
from kit.untrusted.terminal import visible

TITLE = "\x1b]0;pwned\x07"  # OSC 0: the window's title
ERASE = "\x1b[2K"  # erase the line
CLIP = "\x1b]52;c;cm0gLXJmIH4K\x07"  # OSC 52: write the clipboard
HOSTILE = f"fix {TITLE}{ERASE}{CLIP} \u202eevil\u2028next\r\x9b\x7f\ttab"


def raw_controls(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on (a line break aside)."""
    return sorted({c for c in text if c != "\n" and visible(c) != c})


def test_visible_escapes_every_control_and_keeps_the_rest():
    shown = visible(HOSTILE)
    assert raw_controls(shown) == []
    assert shown == (
        "fix \\x1b]0;pwned\\x07\\x1b[2K\\x1b]52;c;cm0gLXJmIH4K\\x07 \\u202eevil\\u2028next\\r\\x9b\\x7f\\ttab"
    )
    assert visible("a\nb") == "a\\nb" and visible("a\nb", lines=True) == "a\nb"
    assert visible("ünïcode ✓ 名前") == "ünïcode ✓ 名前"
    assert visible(42) == "42"


def test_the_report_in_every_format_shows_a_records_text_escaped():
    table = pd.DataFrame({"error": [HOSTILE]}, index=pd.Index([f"task{TITLE}"], name="task"))
    sections = [Section(f"runs {ERASE}", [HOSTILE], table, [CLIP])]
    for fmt in ("text", "markdown", "html"):
        text = render(sections, fmt, f"report {TITLE}", width=200)
        assert raw_controls(text) == [], fmt
        assert "\\x1b]0;pwned\\x07" in text and "\\u202e" in text, fmt


def test_the_live_progress_line_is_escaped():
    from kit.run.progress import refresh

    class Bar:
        text = ""

        def set_postfix_str(self, text):
            self.text = text

    class State:
        def line(self):
            return f"last: {HOSTILE}"

    bar = Bar()
    refresh(bar, State())
    assert raw_controls(bar.text) == [] and "\\x1b[2K" in bar.text
