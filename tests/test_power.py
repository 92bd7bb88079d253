"""kit.power: the smallest detectable difference, what a chosen one needs, and a pilot's variance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kit import power


def test_mde_is_2_8_standard_errors_with_the_design_effect():
    a = power.Assumption(sigma2=0.5, icc_task=0.3, icc_project=0.1)
    se = math.sqrt(0.5 / (12 * 3) * (1 + 2 * 0.3 + 3 * (4 - 1) * 0.1))
    assert power.mde(12, 3, 4.0, a) == pytest.approx(2.8016 * se, rel=1e-4)
    assert power.mde(0, 3) == math.inf
    assert power.cluster_size([4, 4, 4, 4]) == 4.0 and power.cluster_size([]) == 1.0


def test_tasks_and_repeats_needed_are_the_fewest_that_reach():
    need = power.tasks_needed(0.2, 3, 1.0)
    assert power.mde(need, 3) <= 0.2 < power.mde(need - 1, 3)
    r = power.repeats_needed(0.6, 12)
    assert power.mde(12, r) <= 0.6 < power.mde(12, r - 1)
    # repeats of a task correlate: the variance has a floor repeats cannot lower
    assert power.repeats_needed(0.1, 12) is None and power.tasks_needed(0, 3) is None


def test_components_recover_the_variance_levels_of_planted_differences():
    rng = np.random.default_rng(0)
    diffs, tasks, projects = [], [], []
    for p in range(40):
        u = rng.normal(0, math.sqrt(0.1))
        for t in range(5):
            v = rng.normal(0, math.sqrt(0.2))
            for _ in range(4):
                diffs.append(u + v + rng.normal(0, math.sqrt(0.7)))
                tasks.append(f"p{p}t{t}")
                projects.append(f"p{p}")
    a = power.components(diffs, tasks, projects)
    assert a.sigma2 == pytest.approx(1.0, abs=0.15)
    assert a.icc_task == pytest.approx(0.3, abs=0.1) and a.icc_project == pytest.approx(0.1, abs=0.07)
    assert "from the pilot (800 paired runs)" in a.words()
    assert power.components([0.0, 0.0, 0.0], ["a", "b", "c"], ["", "", ""]) is None
