"""A pilot experiment's variance, for ``kit run --dry-run --pilot RESULTS``: every pair of its strategies'
solved outcomes on the same task, profile and repeat, pooled, split into the levels of
:func:`kit.power.components` (repeat, task, project)."""

from __future__ import annotations

import itertools
from pathlib import Path

from kit import power
from kit.analysis.load import load
from kit.analysis.verdict import paired
from kit.errors import KitError


def pilot_assumption(results: str | Path) -> power.Assumption:
    """The :class:`kit.power.Assumption` a pilot's results show; a clear error when they cannot."""
    runs = load(results).runs
    if runs.empty or runs["strategy"].nunique() < 2:
        raise KitError(
            f"--pilot {results}: needs the runs of at least two strategies on the same tasks",
            "run a small pilot experiment first (a few tasks, 2+ strategies, 2+ repeats), then give its folder",
        )
    diffs, tasks, projects = [], [], []
    for a, b in itertools.combinations(sorted(set(runs["strategy"])), 2):
        pairs = paired(runs, a, b).dropna(subset=["solved_a", "solved_b"])
        diffs += (pairs["solved_a"] - pairs["solved_b"]).tolist()
        tasks += pairs["task"].astype(str).tolist()
        projects += (
            pairs["project"].fillna("").astype(str).tolist() if "project" in pairs else [""] * len(pairs)
        )
    found = power.components(diffs, tasks, projects)
    if found is None:
        raise KitError(
            f"--pilot {results}: {len(diffs)} paired solved outcomes, none differing: no variance to go on",
            "run more tasks or repeats in the pilot, or drop --pilot to use the stated assumption",
        )
    return found
