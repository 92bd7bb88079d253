"""The crossover as a reader who has not read the code meets it: the sentences, the table and the
figures' titles (kit.analysis.crossover, crossover_figures) on planted and tiny experiments."""

from __future__ import annotations

import math

from kit.analysis import crossover as cx
from kit.analysis import simulate
from kit.analysis.crossover_figures import crossover_figure


def test_tiny_experiment_of_the_baseline_alone_says_too_few_and_nothing_to_compare():
    runs = simulate.simulate_runs(
        {"vibe": simulate.CROSSING["vibe"]}, projects=1, tasks_per_project=2, seed=0
    )
    result = cx.crossover(runs, n_boot=20)
    line = cx.crossover_lines(result)[0]
    assert cx.FEW in line and "only vibe ran" in line
    assert "code_lines" not in line  # the internal column name is not a word a reader knows
    fig = crossover_figure(result)
    shown = " ".join(t.get_text() for t in fig.texts)
    assert cx.FEW in shown and "not a benchmark" in shown  # and no empty axes drawn
    assert not fig.axes and fig.get_size_inches()[1] < 3
    enough = simulate.simulate_runs(
        {"vibe": simulate.CROSSING["vibe"]}, projects=3, tasks_per_project=4, seed=0
    )
    assert "only the baseline vibe ran" in cx.crossover(enough, n_boot=20).status


def test_no_crossover_names_the_curve_and_gives_no_interval():
    runs = simulate.simulate_runs(simulate.NULL, seed=0)
    result = cx.crossover(runs, n_boot=200, seed=0)
    solved, cost = result.crossings["pdca"]
    assert not solved.reported and not cost.reported
    line = cx.crossover_lines(result)[1]
    assert "solved rate: no crossover inside the sizes measured" in line
    assert "cost per solved task: no crossover inside the sizes measured" in line
    assert "meet near" not in line  # "no crossover" and "the curves meet at N" never in one line
    table = cx.crossover_table(result)
    assert set(table["95 % interval (solved)"]) == {"-"} and set(table["95 % interval (cost)"]) == {"-"}


def test_an_open_interval_end_is_said_in_words_and_one_repeat_is_singular():
    runs = simulate.simulate_runs(simulate.CROSSING, projects=4, tasks_per_project=4, repeats=1, seed=0)
    result = cx.crossover(runs, n_boot=50)
    assert "1 repeat each" in result.pooled
    assert "Only 4 projects to resample" in "\n".join(cx.crossover_lines(result))
    c = cx.Crossing("cost", 377.0, 173.0, math.inf, "drops below", True)
    words = cx.crossing_words(c, result, "pdca")
    assert f"173 to beyond {result.high:,.0f} lines (the largest size measured)" in words
    assert ">" not in words and "<" not in words
    c = cx.Crossing("solved", 30.0, -math.inf, 80.0, "passes", True)
    assert f"below {result.low:,.0f} (the smallest size measured) to 80 lines" in cx.crossing_words(
        c, result, "pdca"
    )


def test_the_figure_title_says_simulated_pooled_and_band():
    runs = simulate.simulate_runs(simulate.CROSSING, seed=3)
    fig = crossover_figure(cx.crossover(runs, n_boot=100))
    title = fig._suptitle.get_text()
    assert title.startswith("SIMULATED records") and "not a benchmark" in title
    assert "pooled over 48 tasks in 12 projects, 3 repeats each" in title and "band = 95 % interval" in title
    assert any("passes vibe" in t.get_text() for ax in fig.axes for t in ax.texts)  # the crossing, labelled
