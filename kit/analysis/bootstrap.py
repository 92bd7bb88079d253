"""The hierarchical (cluster) bootstrap every paired statistic of the kit resamples with: project ->
task -> repeat, as count weights so that a thousand replicates are one numpy array.

The unit of a paired comparison is a (task, repeat): every strategy's run of that task and repeat
comes along together, so a replicate keeps the pairing. A replicate draws the clusters (projects) with
replacement, then within each drawn cluster its tasks with replacement, then within each drawn task
its repeats with replacement. A task whose record has no project (``project == ''``) is a cluster of
its own -- then the bootstrap is task -> repeat. The result is, per replicate, how many times each
unit was drawn: a weight every statistic multiplies its runs by.

Resampling every level over-states the spread a little when the lower levels vary much (each level's
draw adds its own noise); it never under-states it the way a bootstrap over runs does when runs of
one project or one task go together. What it cannot fix: with few clusters (under about 8) any
bootstrap interval is too narrow; the callers say so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: How clustering is described next to every paired number.
BY_PROJECT = "resampled by project, then task, then repeat"
BY_TASK = "resampled by task, then repeat; no projects recorded: each task is its own cluster"


def cluster_of(runs: pd.DataFrame) -> pd.Series:
    """Each run's cluster: its ``project``, or its task when it has none."""
    task = runs["task"].astype(str)
    if "project" not in runs:
        return task
    project = runs["project"].fillna("").astype(str)
    return project.where(project != "", "task:" + task)


def clustering_words(runs: pd.DataFrame) -> str:
    """:data:`BY_PROJECT` when any run names a project, else :data:`BY_TASK`."""
    has = "project" in runs and (runs["project"].fillna("").astype(str) != "").any()
    return BY_PROJECT if has else BY_TASK


def units(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The (cluster, task, repeat) units of ``runs`` (one row each, sorted) and each run's unit index."""
    keys = pd.DataFrame(
        {"cluster": cluster_of(runs).to_numpy(), "task": runs["task"].astype(str).to_numpy(),
         "repeat": runs["repeat"].to_numpy()}
    )  # fmt: skip
    codes = [pd.factorize(keys[c], sort=True)[0] for c in ("cluster", "task", "repeat")]
    flat = (codes[0] * (codes[1].max() + 1) + codes[1]) * (codes[2].max() + 1) + codes[2]
    _, first, index = np.unique(flat, return_index=True, return_inverse=True)
    return keys.iloc[first].reset_index(drop=True), index


def weights(table: pd.DataFrame, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, units) draw counts of a hierarchical bootstrap over the :func:`units` table (sorted by
    cluster, task, repeat).

    Drawing ``k`` times with replacement from ``n`` items ``n`` each is one multinomial of ``k * n``
    draws, which is how each level is drawn for all replicates at once."""
    out = np.zeros((n_boot, len(table)), dtype=np.int64)
    if table.empty:
        return out
    cluster = pd.factorize(table["cluster"])[0]
    task = pd.factorize(table["cluster"] + "\0" + table["task"])[0]
    n_c = cluster.max() + 1
    c_count = rng.multinomial(n_c, np.full(n_c, 1 / n_c), size=n_boot)
    task_cluster = np.zeros(task.max() + 1, dtype=np.int64)
    task_cluster[task] = cluster
    t_count = np.zeros((n_boot, len(task_cluster)), dtype=np.int64)
    for ci in range(n_c):
        mine = np.flatnonzero(task_cluster == ci)
        t_count[:, mine] = rng.multinomial(c_count[:, ci] * len(mine), np.full(len(mine), 1 / len(mine)))
    starts = np.flatnonzero(np.r_[True, task[1:] != task[:-1]])
    for a, b in zip(starts, [*starts[1:], len(task)], strict=True):
        n_r = b - a
        out[:, a:b] = rng.multinomial(t_count[:, task[a]] * n_r, np.full(n_r, 1 / n_r))
    return out


def run_weights(runs: pd.DataFrame, n_boot: int, seed: int = 0) -> np.ndarray:
    """(n_boot, runs) weights: each run weighs as often as its (task, repeat) unit was drawn."""
    table, index = units(runs)
    return weights(table, n_boot, np.random.default_rng(seed))[:, index]


def percentile(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` percentile interval of finite and infinite values alike (inf sorts last)."""
    v = np.sort(np.asarray(values, dtype=float)[~np.isnan(values)])
    if v.size == 0:
        return np.nan, np.nan
    lo = v[int(np.floor((1 - level) / 2 * (v.size - 1)))]
    hi = v[int(np.ceil((1 + level) / 2 * (v.size - 1)))]
    return float(lo), float(hi)
