"""How large the context got, per strategy x task (issue 29, item 4): prompt tokens per call (median
and max), context trims and distinct files read per run, beside cost and defects -- in the report."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from kit import analysis
from kit.analysis import context
from kit.analysis.report import report_text
from tests.support.records import write_experiment


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return analysis.load(write_experiment(tmp_path_factory.mktemp("results")))


def _with_events(records):
    """Two pdca runs: r0 read a.py twice and b.py once (and failed to read c.py), its context trimmed
    twice; r1 read a.py once."""
    runs = records.runs.set_index("run_id")["run_key"]
    r0, r1 = runs["micro-slugify__pdca__r0"], runs["micro-slugify__pdca__r1"]
    rows = [
        (r0, "tool", "read_file", "path='a.py'", True),
        (r0, "tool", "read_file", "path='a.py', start=10, end=20", True),
        (r0, "tool", "read_file", 'path="b.py"', True),
        (r0, "tool", "read_file", "path='c.py'", False),
        (r0, "note", "context_trimmed", "shortened 3 tool outputs", True),
        (r0, "note", "context_trimmed", "shortened 1 tool output", True),
        (r1, "tool", "read_file", "path='a.py'", True),
        (r1, "tool", "run", "command='pytest'", True),
    ]
    extra = pd.DataFrame(rows, columns=["run_key", "kind", "name", "detail", "ok"])
    return dataclasses.replace(records, events=pd.concat([records.events, extra], ignore_index=True))


def test_context_per_strategy_and_task(records):
    table = context.context_table(_with_events(records))
    pdca = table.loc[("pdca", "micro-slugify")]
    calls = records.calls[records.calls["strategy"] == "pdca"]
    prompt = calls["input_uncached"] + calls["cache_read"] + calls["cache_write"]
    assert pdca["prompt_median"] == prompt.median() and pdca["prompt_max"] == prompt.max()
    assert pdca["trims"] == 1.0  # 2 trims over 2 runs
    assert pdca["files_read"] == 1.5  # r0: a.py and b.py (c.py failed), r1: a.py
    assert pdca["cost_usd"] == pytest.approx(records.runs.query("strategy == 'pdca'")["cost_usd"].mean())
    vibe = table.loc[("vibe", "micro-slugify")]
    assert vibe["trims"] == 0 and vibe["files_read"] == 0  # the fixture's read_file events name no path
    assert context.read_path("path='x y.py', start=1") == "x y.py" and context.read_path("start=1") is None


def test_the_report_shows_the_context_beside_cost_and_defects(records):
    text = report_text(records.root)
    block = text.split("How large the context got")[1].split("\n\n")[0]
    header = next(line for line in block.splitlines() if "prompt median" in line)
    for column in ("prompt max", "trims/run", "files read/run", "cost $/run", "failed share", "defects"):
        assert column in header
    assert "pdca" in block and "vibe" in block
