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
    assert ax.get_title() == (
        "scripted model: pipeline check, not a benchmark\nCost vs failed share per run: 3 of 4 runs\nleft out (not scored): 1 error"
    )
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["csv-export-stream", "micro-slugify"]
    strategy_legend = next(a for a in ax.artists if a is not ax.get_legend())
    assert [t.get_text() for t in strategy_legend.get_texts()][:2] == ["pdca", "vibe"]
    markers = {c.get_paths()[0].vertices.tobytes() for c in ax.collections}
    assert len(markers) == 2  # one marker shape per task
    assert not ax.texts  # no labels on the points


def test_timeline_says_how_many_runs_it_shows_and_shares_its_x_axis(records):
    fig = figures.timeline_figure(records.calls, max_runs=2)
    assert fig.get_suptitle().split("\n")[1].startswith("Calls over time by role: 2 of 4 runs")
    a, b = fig.axes[:2]
    assert a.get_shared_x_axes().joined(a, b)
    assert (
        figures.timeline_figure(records.calls)
        .get_suptitle()
        .split("\n")[1]
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


def test_share_axes_run_from_0_to_1_and_the_frontier_is_the_pareto_staircase(records):
    """Issue 41: a failed-share axis neither runs below 0 nor zooms to 0.86-1.00; the frontier is drawn
    as the same staircase as the Pareto figure's front, not a diagonal."""
    runs = records.runs.copy()
    runs["failed_share"] = [0.9, 0.95, 0.0, 1.0][: len(runs)] + [0.9] * max(0, len(runs) - 4)
    pareto = figures.pareto_figure(runs).axes[0]
    assert pareto.get_ylim() == (0.0, 1.0)
    high = runs.assign(failed_share=runs["cost_usd"].rank(pct=True) * 0.1 + 0.88)  # all in 0.88-0.98
    assert figures.pareto_figure(high).axes[0].get_ylim() == (0.0, 1.0)
    table = verdict.frontier_table(runs.assign(strategy=[f"s{i}" for i in range(len(runs))]))
    table["on_frontier"] = True  # every point on it: a front of several points
    ax = figures.frontier_figure(table).axes[0]
    assert ax.get_ylim() == (0.0, 1.0)
    [line] = ax.get_lines()
    assert line.get_drawstyle() == "steps-post"


# --------------------------------------------------------------------------- issue 32, item 1


def _bars(ax):
    """(x, y, width) of every bar of ``ax``."""
    return [(p.get_x(), p.get_y() + p.get_height() / 2, p.get_width()) for p in ax.patches]


def test_timeline_range_covers_every_run_and_every_role_that_called_is_drawn(records):
    calls = records.calls.copy()
    late = calls["strategy"] == "vibe"  # the second panel's runs go ten times longer than the first's
    calls.loc[late, "t_s"] = calls.loc[late, "t_s"] * 10
    fig = figures.timeline_figure(calls)
    panels = [ax for ax in fig.axes if ax.get_title(loc="left")]
    assert len(panels) == calls["run_key"].nunique()
    for ax in panels:
        run_key = ax.get_title(loc="left").split(" — ")[1]
        mine = calls[calls["run_key"] == run_key]
        lo, hi = ax.get_xlim()
        assert lo == 0 and hi >= (mine["t_s"] + mine["latency_s"]).max()  # the run's last call ends inside
        labels = [t.get_text().split(" (")[0] for t in ax.get_yticklabels()]
        assert labels == sorted(set(mine["role"]))
        bars = _bars(ax)
        assert len(bars) == len(mine)
        for role, n in mine["role"].value_counts().items():  # every call of every role: a bar in range
            row = [b for b in bars if round(b[1]) == labels.index(role)]
            assert len(row) == n and all(lo <= x and x + w <= hi for x, _, w in row)


def test_tier_cost_bars_are_per_strategy_and_name_the_models(records):
    fig = figures.tier_cost_figure(records.calls)
    panels = {ax.get_title().split(" (")[0]: ax for ax in fig.axes}
    assert set(panels) == {"pdca", "vibe"}  # one panel per strategy, never summed across them
    for strategy, ax in panels.items():
        mine = records.calls[records.calls["strategy"] == strategy]
        heights = {}
        for p, tick in zip(ax.patches, [t for _ in range(4) for t in ax.get_xticklabels()], strict=False):
            heights[tick.get_text()] = heights.get(tick.get_text(), 0) + p.get_height()
        for tier, cost in mine.groupby("tier")["cost_usd"].sum().items():
            assert heights[tier] == pytest.approx(cost)
    assert "cheap: scripted/cheap" in fig.get_suptitle() and "strong: scripted/strong" in fig.get_suptitle()


def test_the_measured_reference_bars_say_whose_runs_they_are(records):
    import pandas as pd

    ref = pd.Series({"cheap": 0.6, "medium": 0.3, "strong": 0.1})
    label = analysis.measured_label(records, "pdca")
    assert label == "measured: pdca, 2 runs (scripted model: pipeline check, not a benchmark)"
    fig = figures.tier_shares_figure(ref, analysis.tier_cost_shares(records, "pdca"), label)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["reference", label]
    assert "pdca" in ax.get_title()


def _heights(ax, label):
    container = next(c for c in ax.containers if c.get_label() == label)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    return dict(zip(ticks, (p.get_height() for p in container.patches), strict=True))


def test_whatif_figures_show_before_and_after_per_tier_and_role(records):
    from kit.analysis import whatif_figures

    moved = analysis.whatif(records, reassign={"executor": "medium"})
    fig = whatif_figures.whatif_figure(moved, "Reassign")
    panel = {ax.get_title(): ax for ax in fig.axes}
    pdca_calls = records.calls[records.calls["strategy"] == "pdca"]
    tiers = panel["pdca: per tier"]
    before = _heights(tiers, "before (as recorded)")
    after = _heights(tiers, "after, cache re-simulated")
    recorded = pdca_calls.groupby("tier")["cost_usd"].sum()
    assert before["cheap"] == pytest.approx(recorded["cheap"]) and after["cheap"] == 0
    executor = pdca_calls[pdca_calls["role"] == "executor"]
    assert after["medium"] > before["medium"] == pytest.approx(recorded["medium"])
    roles = panel["pdca: per role"]
    assert _heights(roles, "after, cache re-simulated")["executor"] == pytest.approx(
        moved.calls.loc[executor.index, "cost_usd"].sum()
    )
    assert _heights(panel["vibe: per tier"], "after, cache re-simulated") == _heights(
        panel["vibe: per tier"], "before (as recorded)"
    )  # vibe has no executor
    other = whatif_figures.whatif_figure(analysis.whatif(records, reassign={"executor": "strong"}))
    strong = {ax.get_title(): ax for ax in other.axes}["pdca: per tier"]
    assert _heights(strong, "after, cache re-simulated") != after  # two what-ifs, two pictures


def test_whatifs_chain_in_one_call(records):
    chained = analysis.whatif(records, reassign={"executor": "strong"}, model={"strong": "fx-medium"})
    c = chained.calls
    executor = c[c["role"] == "executor"]
    assert set(executor["tier"]) == {"strong"} and set(executor["model"]) == {
        "fx-medium"
    }  # moved, then swapped
    assert set(executor["price_input"]) == {3.0}  # fx-medium's price, from the run's recorded sheet
    orchestrator = c[c["role"] == "orchestrator"]
    assert set(orchestrator["model"]) == {"fx-medium"}
    tokens = ["input_uncached", "cache_read", "cache_write", "output"]
    prices = [3.0, 0.3, 3.75, 15.0]
    moved = c[c["tier"] == "strong"]
    expected = sum((moved[t] * p).sum() for t, p in zip(tokens, prices, strict=True)) / 1e6
    assert moved["cost_usd"].sum() == pytest.approx(expected)
    assert "executor -> strong" in chained.note and "strong -> fx-medium" in chained.note
    assert chained.view("strategy").loc["vibe", "delta_usd"] == 0


def test_a_whatif_that_changes_nothing_says_why(records):
    from kit.analysis import whatif_figures

    same_tier = analysis.whatif(records, reassign={"executor": "cheap"})
    assert same_tier.why_unchanged.startswith("the 4 calls it touches already ran on that tier and model")
    assert "no change in cost" in same_tier.note
    ttl = analysis.whatif(records, ttl={"coder": "1h"})  # the fixture's calls have no breakpoint records
    assert "kept as recorded: no breakpoint records" in ttl.why_unchanged
    nothing = analysis.whatif(records, reassign={"scout": "strong"})
    assert nothing.why_unchanged == "no recorded call matched it"
    moved = analysis.whatif(records, reassign={"executor": "medium"})
    assert moved.why_unchanged == "" and "no change" not in moved.note
    fig = whatif_figures.whatif_figure(same_tier)
    assert "NO CHANGE in cost: the 4 calls it touches already ran" in fig.get_suptitle()


@pytest.mark.parametrize(
    ("models", "caveat"),
    [
        ("scripted/oracle-all", "oracle: a pipeline check, not a benchmark"),
        ("scripted/cheap", "scripted model: pipeline check, not a benchmark"),
        ("simulated/strong", "SIMULATED records (planted effects), not a benchmark"),
        ("embedded/smollm2-135m", "embedded SmolLM2-135M: a real but tiny model"),
        ("anthropic/claude-sonnet-4-5", ""),
        (
            "anthropic/claude-sonnet-4-5@http://127.0.0.1:8765",
            "served on this machine (http://127.0.0.1:8765)",
        ),
    ],
)
def test_every_figure_says_in_its_title_what_played_the_runs(records, models, caveat):
    """Issue 41: a figure travels alone, without the report's labels -- an oracle's, a scripted model's,
    simulated or the tiny embedded model's runs say so in every figure's title; a provider's say nothing."""
    import dataclasses

    from kit.analysis import whatif_figures

    models, _, base = models.partition("@")  # a provider's model answered by a server on this machine
    runs = records.runs.assign(models=models, profile="p", api_bases=base)
    calls = records.calls.assign(model=models, profile="p", api_bases=base)
    titles = {
        "pareto": figures.pareto_figure(runs).axes[0].get_title(),
        "timeline": figures.timeline_figure(calls).get_suptitle(),
        "tier cost": figures.tier_cost_figure(calls).get_suptitle(),
        "frontier": figures.frontier_figure(verdict.frontier_table(runs)).get_suptitle(),
        "measured": analysis.measured_label(dataclasses.replace(records, runs=runs, calls=calls), "pdca"),
        "what-if": whatif_figures.whatif_figure(  # (a cache lifetime: the calls keep their models)
            analysis.whatif(dataclasses.replace(records, runs=runs, calls=calls), ttl={"coder": "1h"}), "TTL"
        ).get_suptitle(),
    }
    for name, title in titles.items():
        if caveat:
            assert caveat in title, (name, title)
        else:
            assert "benchmark" not in title and "model:" not in title.split("\n")[0], (name, title)
