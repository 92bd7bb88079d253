"""The crossover and reliability sections of `kit report` (every format) and notebook 05, on a planted
experiment written as run folders (kit.analysis.simulate.write_experiment)."""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from kit.analysis import report, simulate
from kit.analysis.report import SIMULATED_LABEL
from kit.analysis.sections import CROSSOVER_TITLE

STRONG = {
    "vibe": simulate.Curve(p_ref=0.7, slope=-1.6, cost_ref=0.02),
    "pdca": simulate.Curve(p_ref=0.55, slope=-0.2, cost_ref=0.04),
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    runs = simulate.simulate_runs(STRONG, projects=8, tasks_per_project=4, repeats=2, seed=11)
    return simulate.write_experiment(tmp_path_factory.mktemp("results"), runs)


def test_report_has_the_crossover_and_reliability_in_every_format(planted):
    text = report.report(planted, "text")
    planted_at = simulate.planted_crossover(STRONG["pdca"], STRONG["vibe"])
    assert CROSSOVER_TITLE.format(baseline="vibe") in text.replace("\n  ", " ")
    flat = " ".join(text.split())
    assert "pooled over 32 tasks in 8 projects, 2 repeats each" in flat
    assert "pdca: its solved rate passes vibe's at ~" in flat
    assert "resampled by project, then task, then repeat" in flat
    assert "pass@2" in text and "pass^2" in text and "flip_rate" in text and "cost_cv" in text
    assert SIMULATED_LABEL in flat
    interval = flat.split("passes vibe's at ~")[1].split("[95 % interval ")[1].split("]")[0]
    lo, hi = (float(v.replace(",", "")) for v in re.findall(r"\d[\d,]*", interval)[:2])
    assert lo <= planted_at <= hi or hi == max(lo, hi)  # the planted size inside (or past the range end)
    md = report.report(planted, "markdown")
    assert "passes vibe's at ~" in md and "| pass@1" in md
    html = report.report(planted, "html")
    assert (
        "Figure: solved rate and cost per solved task against task size" in html and "data:image/png" in html
    )


@pytest.mark.slow  # a notebook kernel
def test_notebook_05_on_the_planted_experiment(planted):
    from kit.app import notebooks

    (out,) = notebooks.execute_all(planted, only="05", params={"n_boot": 300}, progress=False)
    outputs = json.dumps([c.get("outputs", []) for c in nbformat.read(out, as_version=4).cells])
    assert "passes vibe's at ~" in outputs and "too few" not in outputs
    png = planted / "notebooks" / "figures" / "05_crossover-n_boot-300" / "crossover_code_lines.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
