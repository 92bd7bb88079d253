"""A report you can send (issue 32, item 6): `kit report --format text|markdown|html`, `--summary`, text
that fits a terminal, one self-contained HTML file with the notebooks' figures, and `kit run` ending
with the summary last."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser

import pytest

from kit.analysis.report import report
from kit.app.cli import main
from tests.support.records import write_experiment

#: An error message a provider or an agent could have shaped: markdown, HTML and a remote image.
HOSTILE = "ModelError: <script>alert(1)</script> ![7 of 7 met](https://evil.example/x.png) [click](http://evil.example)"


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    exp = write_experiment(tmp_path_factory.mktemp("results"))
    path = exp / "runs" / "micro-slugify__vibe__r1" / "run.json"
    data = json.loads(path.read_text())
    data["outcome"], data["error"] = "error", HOSTILE
    path.write_text(json.dumps(data))
    return exp


def test_text_fits_the_width_and_keeps_every_column(exp):
    wide = report(exp, "text")
    assert max(map(len, wide.splitlines())) > 160  # the per-strategy table alone is wider than that
    narrow = report(exp, "text", width=80)
    assert max(map(len, narrow.splitlines())) <= 80
    for column in ("solved [95% Wilson]", "failed share ± 95%", "cache rd", "cost $", "prompt median"):
        assert column in narrow  # split into blocks, not cut off
    assert narrow.splitlines()[0].startswith(str(exp)[:60])


def test_summary_is_the_first_screen_only(exp):
    text = report(exp, "text", summary_only=True)
    assert "Summary: solved" in text and "outcomes: 3 done (2 solved), 1 error" in text
    assert "Runs by outcome" not in text and "Per role" not in text
    assert len(text.splitlines()) < 25


def test_markdown_has_pipe_tables_and_shows_agent_text_as_text(exp):
    md = report(exp, "markdown")
    assert md.startswith("# orchbench report: fixture\n")
    assert "## Runs by outcome" in md and "|---|" in md
    fenced = re.findall(r"```text\n(.*?)\n```", md, flags=re.S)
    outside = re.sub(r"```text\n.*?\n```", "", md, flags=re.S)
    assert "](http" not in outside and "<script" not in outside  # a link or image never forms ...
    assert any(HOSTILE in block for block in fenced)  # ... the message is kept whole, inside a fence


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_html_is_one_self_contained_file_with_tables_and_figures(exp):
    page = report(exp, "html")
    parser = _Tags()
    parser.feed(page)
    tags = parser.tags
    assert [t for t, _ in tags].count("table") >= 6
    images = [a["src"] for t, a in tags if t == "img"]
    assert len(images) >= 4  # pareto, timeline, tier cost, frontier: the notebooks' figures
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    links = [a.get("src") or a.get("href") for t, a in tags if t in ("img", "a", "link", "script")]
    assert all(link.startswith(("data:", "#")) for link in links)  # nothing to fetch: it opens offline
    assert not any(t == "script" for t, _ in tags)
    csp = next(a for t, a in tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp["content"]
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_cli_writes_each_format_and_rejects_an_unknown_one(exp, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["report", str(exp), "--format", "html", "--out", str(out)]) == 0
    assert out.read_text().startswith("<!doctype html>") and "wrote" in capsys.readouterr().out
    assert main(["report", str(exp), "--summary", "--width", "70"]) == 0
    text = capsys.readouterr().out
    assert "Summary: solved" in text and max(map(len, text.splitlines())) <= 70
    with pytest.raises(SystemExit):
        main(["report", str(exp), "--format", "pdf"])


def test_kit_run_ends_with_the_summary_last(exp, monkeypatch, capsys):
    monkeypatch.setattr("kit.run.runner.run_experiment", lambda *a, **k: exp)
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["run", "scripted-smoke", "--quiet"]) == 1  # one run ended in error
    out = capsys.readouterr().out.rstrip().splitlines()
    assert max(len(line) for line in out if str(exp) not in line) <= 100  # a long path is never cut
    tail = out[-40:]  # (the summary's lines per strategy grew with the verdicts' words)
    assert any(line.startswith("Summary: solved") for line in tail)
    assert out[-1] == f"results: {exp}"
    start = max(i for i, line in enumerate(out) if line.startswith("Summary: solved"))
    assert all("Per role" not in line and "Runs by outcome" not in line for line in out[start:])


def test_runs_answered_by_a_server_on_this_machine_say_so(tmp_path):
    """The README's fake server (``--api-base http://127.0.0.1:PORT``) answers under the provider's model
    names: the report says the numbers are that server's, not the models'."""
    exp = write_experiment(tmp_path / "results")
    assert "served on this machine" not in report(exp, "text", width=200)
    for path in exp.glob("runs/*__vibe__*/run.json"):
        data = json.loads(path.read_text())
        for tier in data["profile_spec"]["tiers"].values():
            tier["api_base"] = "http://127.0.0.1:38505"
        path.write_text(json.dumps(data))
    text = report(exp, "text", width=200, summary_only=True)
    assert (
        "NOTE: served on this machine: the models named were answered by a server at http://127.0.0.1:38505"
        in text
    )
    assert "(2 of 4 runs)" in text


def _wide_boxes(page) -> list:
    """Every table box of the HTML report wider than the page holds (it would hide columns behind a
    scroll bar): its section's title and its width against the room."""
    return page.js(
        "[...document.querySelectorAll('div.wide')].filter(d => d.scrollWidth > d.clientWidth + 1)"
        ".map(d => [d.previousElementSibling ? d.previousElementSibling.innerText.slice(0, 40) : '',"
        " d.scrollWidth, d.clientWidth])"
    )


def test_html_tables_are_split_to_fit_the_page_not_scrolled(exp):
    """A wide table is split into column blocks that repeat the row labels (as the text report does):
    the per-strategy table's cost column was past the right edge of a 1,440 px window, behind a scroll
    bar."""
    page = report(exp, "html")
    section = re.split(r'id="s\d+">Per strategy \(', page)[1].split("<h2")[0]
    tables = re.findall(r"<table.*?</table>", section, flags=re.S)
    assert len(tables) >= 2 and all("<th>strategy</th>" in t for t in tables)  # row labels repeated
    heads = [h for t in tables for h in re.findall(r"<th>([^<]*)</th>", t.split("</tr>")[0])]
    assert "cost $" in heads and "solved [95% Wilson]" in heads  # every column kept, once


@pytest.mark.slow  # a real headless Chromium
def test_html_tables_fit_the_page_in_a_browser(exp, tmp_path):
    from tests.support.browser import browser, chromium_path

    if chromium_path() is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    out = tmp_path / "report.html"
    out.write_text(report(exp, "html"), encoding="utf-8")
    with browser() as page:
        page.show(out.as_uri(), ["Summary: solved"])
        assert page.js("document.querySelectorAll('div.wide').length") >= 6
        assert _wide_boxes(page) == []


def test_the_header_names_the_sandbox_and_a_shared_report_no_absolute_path(exp):
    """issue 41: the report header names the sandbox the runs used; a report made to be sent (markdown,
    HTML) names the results folder by its name -- the absolute path carries the user's home."""
    text = report(exp, "text", summary_only=True)
    assert text.splitlines()[0].startswith(str(exp)) and "sandbox: " in text.splitlines()[0]
    for fmt in ("markdown", "html"):
        shared = report(exp, fmt, summary_only=fmt == "markdown")
        assert str(exp.parent) not in shared and f"{exp.name}: " in shared and "sandbox: " in shared, fmt
