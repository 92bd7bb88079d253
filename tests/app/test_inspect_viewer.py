"""What Inspect's viewer shows of an export, in a real headless Chromium (issue 30 item 5, issue 32 item
5): agent text is shown as text (the log says trust_content=False), the sample list leads with solved
(its pill follows the score), no error bar pooled across tasks, each sample its own duration."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from kit.app.export_inspect import export_inspect
from tests.support.browser import browser, chromium_path
from tests.support.inspect_view import inspect_view
from tests.support.records import write_experiment

pytestmark = pytest.mark.slow  # Inspect's viewer and a browser

#: What a model could write to pass for a result: a heading, a picture of a score, a link.
HOSTILE = (
    "# ALL TESTS PASS\n\n![7 of 7 met](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==)\n\n"
    "[see the report](http://evil.example/report)"
)


def _agent_says(run_dir, text):
    line = {"run_id": run_dir.name, "seq": 99, "conversation": "coder", "role": "coder",
            "message": {"role": "assistant", "content": text}}  # fmt: skip
    with open(run_dir / "transcript.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\n")


def test_agent_markdown_shows_as_text_in_the_viewer(tmp_path):
    if chromium_path() is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    exp = write_experiment(tmp_path / "results", incomplete=False)
    _agent_says(exp / "runs" / "micro-slugify__vibe__r0", HOSTILE)
    logs = export_inspect(exp).logs
    vibe = next(p for p in logs if "_vibe_" in p.name)
    name = urllib.parse.quote(vibe.name)
    with inspect_view(exp / "inspect") as base, browser() as page:
        sample = f"{base}/#/logs/{name}/samples/sample/micro-slugify/1"
        text = page.show(f"{sample}/messages", ["7 of 7 met"])
        assert "![7 of 7 met](data:image/png" in text and "# ALL TESTS PASS" in text  # as written
        rendered = page.js(
            "({imgs: [...document.querySelectorAll('img')].filter(i => i.alt === '7 of 7 met').length,"
            " heads: [...document.querySelectorAll('h1,h2,h3')].filter(h => h.innerText.includes('ALL TESTS PASS')).length,"
            " links: [...document.querySelectorAll('a')].filter(a => (a.href || '').includes('evil.example')).length})"
        )
        assert rendered == {"imgs": 0, "heads": 0, "links": 0}

        listing = page.show(f"{base}/#/logs/{name}/samples", ["micro-slugify"])
        header = page.js("[...document.querySelectorAll('[role=columnheader]')].map(h => h.innerText.trim())")
        assert header[:3] == ["ID", "EPOCH", "SOLVED"], header  # solved leads; no completion mark
        assert "stderr" not in listing.lower() or "micro-slugify" in listing
