"""Figures: tasks told apart, every left-out run counted in the title, the runs shown of how many,
shared axes where runs are compared, no labels drawn on the points."""

from __future__ import annotations

import pytest

from kit import analysis
from kit.analysis import figures, verdict
from tests.support.records import write_experiment


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return analysis.load(write_experiment(tmp_path_factory.mktemp("results")))


def test_pareto_tells_tasks_apart_and_counts_every_run_left_out(records):
    runs = records.runs.copy()
    runs.loc[runs["repeat"] == 1, "task"] = "csv-export-stream"
    first = runs.index[0]
    runs.loc[first, ["outcome", "scored"]] = ["error", False]
    fig = figures.pareto_figure(runs)
    ax = fig.axes[0]
    assert ax.get_title() == "Cost vs failed share per run: 3 of 4 runs\nleft out (not scored): 1 error"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["csv-export-stream", "micro-slugify"]
    strategy_legend = next(a for a in ax.artists if a is not ax.get_legend())
    assert [t.get_text() for t in strategy_legend.get_texts()][:2] == ["pdca", "vibe"]
    markers = {c.get_paths()[0].vertices.tobytes() for c in ax.collections}
    assert len(markers) == 2  # one marker shape per task
    assert not ax.texts  # no labels on the points


def test_timeline_says_how_many_runs_it_shows_and_shares_its_x_axis(records):
    fig = figures.timeline_figure(records.calls, max_runs=2)
    assert fig.get_suptitle().startswith("Calls over time by role: 2 of 4 runs")
    a, b = fig.axes[:2]
    assert a.get_shared_x_axes().joined(a, b)
    assert (
        figures.timeline_figure(records.calls)
        .get_suptitle()
        .startswith("Calls over time by role: all 4 runs")
    )


def test_frontier_has_one_legend_no_point_labels_and_a_shared_y_axis(records):
    runs = records.runs.copy()
    runs.loc[runs["strategy"] == "pdca", "task"] = "exercism-forth"
    runs = runs.assign(task=runs["task"].where(runs["strategy"] == "vibe", "other"))
    fig = figures.frontier_figure(verdict.frontier_table(runs))
    assert len(fig.axes) == 2 and fig.axes[0].get_shared_y_axes().joined(fig.axes[0], fig.axes[1])
    assert all(not ax.texts for ax in fig.axes)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["pdca", "vibe", "frontier"]
