"""Paired verdicts: the bootstrap and the power calculation against known answers, pairing, wording."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kit.analysis import verdict
from kit.analysis.figures import pareto_front
from kit.errors import KitError


def _standardised(n: int, seed: int = 1) -> np.ndarray:
    z = np.random.default_rng(seed).normal(size=n)
    return (z - z.mean()) / z.std(ddof=1)  # mean exactly 0, sample sd exactly 1


def test_bootstrap_constant_shift_is_exact():
    a = np.array([3.0, 10.0, 1.0, 7.0])
    assert verdict.bootstrap_diff(a, a - 1.5) == (1.5, 1.5, 1.5)
    mean, lo, hi = verdict.bootstrap_diff([2.0], [1.0])
    assert mean == 1.0 and np.isnan(lo) and np.isnan(hi)


def test_bootstrap_interval_matches_the_normal_theory_answer():
    # 40 paired differences, mean 1, sd 1: the 95 % interval of the mean is 1 ± 1.96/sqrt(40) = ±0.31
    d = 1.0 + _standardised(40)
    b = np.arange(40) * 100.0  # huge between-pair spread: only pairing removes it
    mean, lo, hi = verdict.bootstrap_diff(b + d, b, n_resamples=4000)
    assert mean == pytest.approx(1.0)
    assert lo == pytest.approx(1 - 1.96 / np.sqrt(40), abs=0.06)
    assert hi == pytest.approx(1 + 1.96 / np.sqrt(40), abs=0.06)
    assert verdict.bootstrap_diff(b + d, b, n_resamples=4000) == (mean, lo, hi)  # seeded: repeatable


@pytest.mark.parametrize(("effect", "n"), [(0.5, 34), (0.8, 15), (1.0, 10)])
def test_repeats_needed_matches_the_textbook_power_table(effect, n):
    # paired / one-sample t-test, two-sided alpha 0.05, power 0.8 (G*Power: d=0.5 -> 34, 0.8 -> 15, 1.0 -> 10)
    assert verdict.repeats_needed(effect + _standardised(30)) == n


def test_repeats_needed_edge_cases():
    assert verdict.repeats_needed([0.0, 1.0, -1.0]) is None  # no difference observed
    assert verdict.repeats_needed([2.0, 2.0, 2.0]) == 2  # no spread
    assert verdict.repeats_needed(0.001 + _standardised(30)) is None  # beyond MAX_REPEATS


def _runs(rows):
    return pd.DataFrame(
        rows,
        columns=[
            "task",
            "profile",
            "repeat",
            "strategy",
            "solved",
            "failed_share",
            "defects_total",
            "cost_usd",
        ],
    )


def _fixture_runs(n_repeats: int = 12) -> pd.DataFrame:
    rows = []
    for task in ("exercism-forth", "exercism-react"):
        for r in range(n_repeats):
            # pdca: one defect fewer and $0.40 dearer than vibe on every pair, solved 2 pairs in 3 more often
            vibe_def, vibe_cost = 3 + r % 3, 0.10 + 0.01 * r
            rows.append((task, "p", r, "vibe", 0.0, vibe_def / 10, vibe_def, vibe_cost))
            rows.append(
                (task, "p", r, "pdca", float(r % 3 != 0), (vibe_def - 1) / 10, vibe_def - 1, vibe_cost + 0.40)
            )
    rows.append(("exercism-forth", "p", 99, "vibe", np.nan, np.nan, np.nan, 0.05))  # unpaired, unscored
    return _runs(rows)


def test_compare_pairs_by_task_and_repeat():
    t = verdict.compare(_fixture_runs(), "pdca", "vibe", n_resamples=2000)
    assert t.loc["defects_total", ["diff", "lo", "hi"]].tolist() == [-1.0, -1.0, -1.0]
    assert t.loc["cost_usd", "diff"] == pytest.approx(0.40) and t.loc["cost_usd", "pairs"] == 24
    assert t.loc["solved", "diff"] == pytest.approx(16 / 24)
    assert 0.4 < t.loc["solved", "lo"] < t.loc["solved", "hi"] < 0.9 and t.loc["solved", "p"] < 1e-6


def test_verdict_lines_in_plain_language():
    table = verdict.verdict_table(_fixture_runs(), n_resamples=2000)
    [line] = verdict.verdict_lines(table)
    assert line.startswith("pdca vs vibe: +67 pts solved [")
    assert "-1.00 defects/run [-1.00, -1.00]" in line and "+$0.4000/run [+$0.4000, +$0.4000]" in line
    assert "24 paired runs" in line and "solved differs (interval excludes 0)" in line
    few = verdict.verdict_lines(verdict.verdict_table(_fixture_runs(2), n_resamples=500))[0]
    assert "only 4 pairs: no verdict and no interval -- a verdict needs at least 6" in few
    assert "[" not in few  # four pairs: no interval shown as evidence
    assert verdict.verdict_lines(verdict.verdict_table(_runs([]))) == [
        "no strategy pairs with runs on the same task and repeat: nothing to compare"
    ]


def test_noisy_difference_says_how_many_runs_it_needs():
    rows = []
    noise = _standardised(8, seed=3)
    for r in range(8):
        rows.append(("t", "p", r, "a", 1.0, 0.0, 0.0, 1.0 + 0.3 + noise[r]))
        rows.append(("t", "p", r, "b", 1.0, 0.0, 0.0, 1.0))
    [line] = verdict.verdict_lines(verdict.verdict_table(_runs(rows), n_resamples=2000))
    assert "cost: ~90 paired runs to tell apart" in line  # effect 0.3 sd -> 90 pairs
    assert "solved: no difference observed" in line


def test_baseline_and_duplicate_runs():
    runs = _fixture_runs(3)
    assert verdict.strategy_pairs(["vibe", "pdca", "linear"], baseline="vibe") == [
        ("linear", "vibe"),
        ("pdca", "vibe"),
    ]
    with pytest.raises(KitError, match="baseline strategy 'harness'"):
        verdict.strategy_pairs(["vibe"], baseline="harness")
    with pytest.raises(KitError, match="more than one run"):
        verdict.paired(pd.concat([runs, runs]), "pdca", "vibe")


def test_frontier_per_task_family_and_pareto_on_failed_share():
    runs = _fixture_runs(3)
    runs = pd.concat([runs, _runs([("micro-slugify", "p", 0, "vibe", 1.0, 0.0, 0, 0.01)])], ignore_index=True)
    assert verdict.task_family(runs["task"]) == {
        "exercism-forth": "exercism",
        "exercism-react": "exercism",
        "micro-slugify": "micro-slugify",
    }
    t = verdict.frontier_table(runs)
    assert t.loc[("exercism", "pdca"), "on_frontier"] and t.loc[("exercism", "vibe"), "on_frontier"]
    assert t.loc[("exercism", "pdca"), "runs"] == 6
    dominated = pd.concat([runs, _runs([("exercism-forth", "p", 0, "linear", 0.0, 0.9, 9, 5.0)])])
    assert not verdict.frontier_table(dominated).loc[("exercism", "linear"), "on_frontier"]
    front = pareto_front(runs.dropna(subset=["failed_share"]))
    assert front["failed_share"].is_monotonic_decreasing and front["cost_usd"].is_monotonic_increasing


@pytest.mark.parametrize(
    ("defects_a", "defects_b"),
    [
        ([1.0, 2.0], [3.0, 3.0]),
        ([1.0, 1.0], [3.0, 3.0]),
        ([0.0, 1.0, 2.0, 0.0, 1.0, 3.0], [1.0, 1.0, 2.0, 1.0, 2.0, 3.0]),
    ],
)
def test_verdict_p_value_and_repeats_needed_never_contradict(defects_a, defects_b):
    """Two pairs with a degenerate or two-point interval used to read "differs" while p > 0.05 and
    "2 repeats needed" with 2 already there."""
    rows = []
    for r, (da, db) in enumerate(zip(defects_a, defects_b, strict=True)):
        rows.append(("t", "p", r, "a", 1.0, da / 10, da, 1.0))
        rows.append(("t", "p", r, "b", 1.0, db / 10, db, 1.0))
    table = verdict.verdict_table(_runs(rows), n_resamples=2000)
    for row in table.itertuples():
        if row.verdict == verdict.DIFFERS:
            assert row.p < 0.05 and (row.lo > 0 or row.hi < 0) and row.repeats_needed <= row.pairs
        elif row.verdict == verdict.UNDECIDED:
            assert row.repeats_needed is None or row.repeats_needed > row.pairs
    [line] = verdict.verdict_lines(table)
    defects = table.set_index("metric").loc["defects_total"]
    assert ("defects differs" in line) == (defects["verdict"] == verdict.DIFFERS)
    if len(defects_a) < verdict.FEW_PAIRS:
        assert defects["verdict"] == verdict.UNDECIDED and "defects differs" not in line
        assert f"defects: ~{int(defects['repeats_needed'])} paired runs to tell apart (have 2)" in line


def test_paired_verdict_resamples_by_project_not_by_run():
    """24 pairs from 3 projects of 8 tasks: the difference lives in whole projects (+1 in two, 0 in the
    third). Counted as 24 independent pairs (the old paired bootstrap and t-test) it "differs" with
    p < 1e-6; counted by project, 3 clusters cannot tell, and the line says how it resampled."""
    rows = []
    for p, gain in (("p1", 1.0), ("p2", 1.0), ("p3", 0.0)):
        for t in range(8):
            rows.append((f"{p}-t{t}", "p", 0, "a", gain, 0.0, 0.0, 1.0))
            rows.append((f"{p}-t{t}", "p", 0, "b", 0.0, 0.0, 0.0, 1.0))
    runs = _runs(rows).assign(project=lambda df: df["task"].str.split("-").str[0])
    t = verdict.compare(runs, "a", "b", n_resamples=2000)
    solved = t.loc["solved"]
    assert solved["clusters"] == 3 and solved["verdict"] == verdict.UNDECIDED and solved["p"] > 0.05
    assert solved["lo"] <= 0.0 and solved["clustering"] == "resampled by project, then task, then repeat"
    assert solved["repeats_needed"] > 24  # the design effect: 24 correlated pairs are worth fewer
    [line] = verdict.verdict_lines(verdict.verdict_table(runs, n_resamples=2000))
    assert "24 paired runs in 3 clusters (resampled by project, then task, then repeat)" in line
    assert "smallest solved difference it could detect:" in line
    # without projects every task is its own cluster, and then 24 tasks do tell
    alone = verdict.compare(runs.drop(columns=["project"]), "a", "b", n_resamples=2000).loc["solved"]
    assert alone["clusters"] == 24 and alone["verdict"] == verdict.DIFFERS
    assert alone["clustering"].startswith("resampled by task, then repeat")


def test_smallest_detectable_difference_is_2_8_standard_errors():
    rows = []
    for t in range(10):
        for r in range(2):
            rows.append((f"t{t}", "p", r, "a", float((t + r) % 2), 0.0, 0.0, 1.0))
            rows.append((f"t{t}", "p", r, "b", 0.0, 0.0, 0.0, 1.0))
    solved = verdict.compare(_runs(rows), "a", "b", n_resamples=500).loc["solved"]
    # every task's mean difference is the same (0.5): no measured spread, so the power assumption speaks
    assert solved["mde_from"] == "assumed"
    from kit import power

    assert solved["mde"] == pytest.approx(power.mde(10, 2, 1.0))
