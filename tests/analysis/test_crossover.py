"""The crossover analysis against planted effects (kit.analysis.simulate): it finds the planted size,
its 95 % interval covers it, and with nothing planted it keeps quiet. Seeds fixed throughout."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kit.analysis import bootstrap, simulate
from kit.analysis import crossover as cx

PLANTED = simulate.planted_crossover(simulate.CROSSING["pdca"], simulate.CROSSING["vibe"])


def test_planted_crossover_is_recovered_with_an_interval_around_it():
    runs = simulate.simulate_runs(simulate.CROSSING, projects=20, tasks_per_project=5, seed=3)
    result = cx.crossover(runs, n_boot=400, seed=1)
    solved, cost = result.crossings["pdca"]
    assert solved.reported and solved.direction == "passes"
    assert PLANTED / 1.6 < solved.size < PLANTED * 1.6, (solved.size, PLANTED)
    assert solved.lo <= PLANTED <= solved.hi
    assert result.clustering == bootstrap.BY_PROJECT
    lines = "\n".join(cx.crossover_lines(result))
    assert "passes vibe's at ~" in lines and "resampled by project, then task, then repeat" in lines
    assert "pooled over 100 tasks in 20 projects, 3 repeats each" in lines
    # the cost curve: pdca costs twice vibe per run, so its cost per solved task drops below vibe's only
    # where vibe solves less than half as often (planted: ~714 lines)
    planted_cost = simulate.planted_cost_crossover(simulate.CROSSING["pdca"], simulate.CROSSING["vibe"],
                                                   simulate.TOTAL_SD)  # fmt: skip
    assert cost.direction == "drops below"
    assert cost.lo <= planted_cost <= cost.hi


@pytest.mark.slow  # ~10 s of CPU; longer in wall time on a loaded machine
def test_coverage_and_false_positives_over_200_experiments(capsys):
    n, boots = 200, 200
    covered = found = 0
    for i in range(n):
        r = cx.crossover(simulate.simulate_runs(simulate.CROSSING, seed=1000 + i), n_boot=boots, seed=i,
                         details=False)  # fmt: skip
        c = r.crossings["pdca"][0]
        covered += c.lo <= PLANTED <= c.hi
        found += c.reported
    false_solved = false_cost = 0
    for i in range(n):
        r = cx.crossover(
            simulate.simulate_runs(simulate.NULL, seed=5000 + i), n_boot=boots, seed=i, details=False
        )
        false_solved += r.crossings["pdca"][0].reported
        false_cost += r.crossings["pdca"][1].reported
    with capsys.disabled():
        print(f"\ncrossover, {n} planted experiments (48 tasks in 12 projects x 3 repeats, {boots} replicates): "
              f"95 % interval covers the planted {PLANTED:.0f} lines in {covered / n:.1%}, reported in "
              f"{found / n:.1%}; {n} null experiments: a solved crossover reported in {false_solved / n:.1%}, "
              f"a cost crossover in {false_cost / n:.1%}")  # fmt: skip
    assert covered / n >= 0.9
    assert false_solved / n <= 0.1 and false_cost / n <= 0.1
    assert found / n >= 0.3  # and it is not quiet by never saying anything


def test_too_few_tasks_and_records_without_sizes_say_so():
    runs = simulate.simulate_runs(simulate.CROSSING, projects=1, tasks_per_project=3, seed=0)
    result = cx.crossover(runs, n_boot=50)
    assert result.status.startswith(cx.FEW) and not result.crossings
    assert cx.crossover_lines(result)[0].startswith("Task size = code lines of the reference change: too few")
    old = runs.assign(size_code_lines=np.nan)
    result = cx.crossover(old, n_boot=50)
    assert result.status.startswith(cx.FEW)
    assert f"{len(old)} without a task size" in "\n".join(cx.crossover_lines(result))
    with pytest.raises(Exception, match="unknown size measure"):
        cx.crossover(runs, measure="bananas")


def test_no_baseline_runs_is_said():
    runs = simulate.simulate_runs({"pdca": simulate.CROSSING["pdca"]}, seed=0)
    assert "no runs of the baseline vibe" in cx.crossover(runs, n_boot=20).status


def test_unscored_runs_are_left_out_and_counted():
    runs = simulate.simulate_runs(simulate.CROSSING, seed=2)
    runs.loc[:4, ["scored", "solved"]] = (False, np.nan)
    runs.loc[:4, "outcome"] = "error"
    result = cx.crossover(runs, n_boot=50)
    assert "not scored (left out of the solved fit): 5 error" in result.left_out
    assert "pdca" in result.crossings


def test_hierarchical_weights_draw_whole_clusters():
    runs = pd.DataFrame({
        "task": ["a", "a", "b", "b", "c", "c", "d", "d"] * 2, "repeat": [0, 1] * 8,
        "project": ["p", "p", "p", "p", "q", "q", "", ""] * 2, "strategy": ["vibe"] * 8 + ["pdca"] * 8,
    })  # fmt: skip
    table, index = bootstrap.units(runs)
    assert len(table) == 8 and set(table["cluster"]) == {"p", "q", "task:d"}
    w = bootstrap.weights(table, 500, np.random.default_rng(0))
    per_cluster = {c: w[:, (table["cluster"] == c).to_numpy()].sum(1) for c in set(table["cluster"])}
    # a drawn cluster brings as many units as it has, each time: p has 4 units, q and d 2
    assert set(np.unique(per_cluster["p"] % 4)) == {0} and set(np.unique(per_cluster["q"] % 2)) == {0}
    assert (per_cluster["p"] == 0).any() and (per_cluster["p"] >= 8).any()
    rw = bootstrap.run_weights(runs, 50, seed=1)
    assert np.array_equal(rw[:, :8], rw[:, 8:])  # both strategies' runs of one unit weigh the same
    assert bootstrap.clustering_words(runs.assign(project="")) == bootstrap.BY_TASK


def test_percentile_keeps_infinite_ends():
    lo, hi = bootstrap.percentile(np.array([1.0, 2.0, 3.0, math.inf, math.inf] * 20))
    assert lo == 1.0 and hi == math.inf
