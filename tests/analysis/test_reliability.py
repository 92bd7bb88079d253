"""Reliability over repeats: pass@k, pass^k (unbiased estimators), flip rate, cost CV."""

from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd
import pytest

from kit.analysis import reliability


def _runs(rows):
    return pd.DataFrame(
        rows, columns=["strategy", "task", "repeat", "solved", "cost_usd", "scored", "outcome"]
    )


def test_estimators_match_brute_force_over_all_draws():
    from itertools import combinations

    outcomes = [1, 0, 1, 1, 0]
    for k in range(1, 6):
        draws = list(combinations(outcomes, k))
        assert reliability.pass_at_k(5, 3, k) == pytest.approx(np.mean([any(d) for d in draws]))
        assert reliability.pass_hat_k(5, 3, k) == pytest.approx(np.mean([all(d) for d in draws]))
    assert reliability.pass_hat_k(4, 2, 3) == comb(2, 3) / comb(4, 3) == 0.0


def test_table_per_strategy_with_flips_cost_cv_and_left_out_runs():
    rows = []
    for r in range(3):  # a: task x solved always, task y once in 3; b: never
        rows.append(("a", "x", r, 1.0, 1.0, True, "done"))
        rows.append(("a", "y", r, float(r == 0), [1.0, 2.0, 3.0][r], True, "done"))
        rows.append(("b", "x", r, 0.0, 1.0, True, "done"))
    rows.append(("b", "y", 0, np.nan, 0.5, False, "error"))
    t = reliability.reliability_table(_runs(rows))
    assert t.loc["a", "pass@1"] == pytest.approx((1 + 1 / 3) / 2)
    assert t.loc["a", "pass@3"] == 1.0 and t.loc["a", "pass^3"] == pytest.approx(0.5)
    assert t.loc["a", "pass^2"] == pytest.approx((1 + 0) / 2)
    assert t.loc["a", "flip_rate"] == 0.5 and t.loc["b", "flip_rate"] == 0.0
    assert t.loc["a", "cost_cv"] == pytest.approx((0 + 0.5) / 2)  # y: sd 1 / mean 2
    assert t.loc["b", "not_scored"] == 1 and t.loc["b", "tasks"] == 1
    lines = reliability.reliability_lines(t)
    assert any("Left out (errored or interrupted" in line and "b 1" in line for line in lines)
    shown = reliability.format_reliability(t)
    assert shown.loc["a", "pass^3"] == "50%" and shown.loc["a", "cost_cv"] == "0.25"


def test_uneven_repeats_say_how_many_tasks_a_k_rests_on():
    rows = [("a", "x", r, 1.0, 1.0, True, "done") for r in range(3)] + [("a", "y", 0, 0.0, 1.0, True, "done")]
    t = reliability.reliability_table(_runs(rows))
    assert t.loc["a", "repeats"] == "1-3" and t.loc["a", "tasks@2"] == 1 and t.loc["a", "pass@2"] == 1.0
    once = reliability.reliability_table(_runs([("a", "x", 0, 1.0, 1.0, True, "done")]))
    assert "need repeats" in reliability.reliability_lines(once)[0]
