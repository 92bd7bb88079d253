"""Reliability over repeats, per strategy: would it solve a task again?

Per task a strategy ran ``n`` scored repeats of, ``c`` of them solved:

* ``pass@k`` -- the chance that at least one of ``k`` repeats drawn from the ``n`` solves it:
  ``1 - C(n - c, k) / C(n, k)`` (the unbiased estimator of Chen et al. 2021), averaged over tasks;
* ``pass^k`` -- the chance that all ``k`` drawn repeats solve it: ``C(c, k) / C(n, k)`` (tau-bench's
  unbiased estimator), averaged over tasks. pass@1 = pass^1 = the solved rate; the gap between pass@k
  and pass^k as k grows is how much the strategy's success is luck;
* ``flip rate`` -- the share of tasks (with at least 2 scored repeats) whose solved outcome differs
  between repeats;
* ``cost CV`` -- per task, the coefficient of variation of cost per run over its repeats (standard
  deviation / mean), averaged over tasks with at least 2 repeats and a mean cost above 0.

``k`` runs up to the most repeats any task has; a k is averaged over the tasks with at least k scored
repeats, and the table says how many tasks that is when it is fewer than all. Errored and interrupted
runs are not repeats of a measurement: they are left out and counted.

What it cannot tell: with 2 or 3 repeats, pass^k for the largest k rests on one or two draws per
task; and a flip rate says nothing about which repeat was right.
"""

from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd


def pass_at_k(n: int, c: int, k: int) -> float:
    """At least one of ``k`` of ``n`` repeats (``c`` solved) solves: 1 - C(n-c, k) / C(n, k)."""
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """All ``k`` of ``n`` repeats (``c`` solved) solve: C(c, k) / C(n, k)."""
    return comb(c, k) / comb(n, k)


def reliability_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per strategy: tasks, repeats (min-max per task), pass@k and pass^k for every k (as
    ``pass@k`` / ``pass^k`` columns; ``tasks@k`` where fewer tasks have k repeats), flip_rate, cost_cv,
    not_scored (errored or interrupted runs left out)."""
    if runs.empty:
        return pd.DataFrame()
    scored = runs[runs["scored"].astype(bool) & runs["solved"].notna()] if "scored" in runs else runs
    rows = {}
    for strategy, g in runs.groupby("strategy", sort=True):
        mine = scored[scored["strategy"] == strategy]
        per_task = mine.groupby("task")["solved"].agg(["size", "sum"])
        n, c = per_task["size"].to_numpy(int), per_task["sum"].to_numpy(float).round().astype(int)
        row: dict[str, object] = {
            "tasks": len(per_task),
            "repeats": _span(n),
            "not_scored": len(g) - len(mine),
        }
        for k in range(1, int(n.max()) + 1 if len(n) else 1):
            have = n >= k
            row[f"pass@{k}"] = float(
                np.mean([pass_at_k(a, b, k) for a, b in zip(n[have], c[have], strict=True)])
            )
            row[f"pass^{k}"] = float(
                np.mean([pass_hat_k(a, b, k) for a, b in zip(n[have], c[have], strict=True)])
            )
            if have.sum() < len(n):
                row[f"tasks@{k}"] = int(have.sum())
        multi = per_task[per_task["size"] >= 2]
        flips = (multi["sum"] > 0) & (multi["sum"] < multi["size"])
        row["flip_rate"] = float(flips.mean()) if len(multi) else np.nan
        row["cost_cv"] = _cost_cv(g)
        rows[strategy] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "strategy"
    ks = sorted({int(col.split("@")[1]) for col in table.columns if col.startswith("pass@")})
    order = ["tasks", "repeats", *[f"pass@{k}" for k in ks], *[f"pass^{k}" for k in ks],
             *[f"tasks@{k}" for k in ks if f"tasks@{k}" in table], "flip_rate", "cost_cv", "not_scored"]  # fmt: skip
    return table[order]


def _span(n: np.ndarray) -> str:
    if not len(n):
        return "0"
    return f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}"


def _cost_cv(runs: pd.DataFrame) -> float:
    g = runs.groupby("task")["cost_usd"]
    stats = pd.DataFrame({"n": g.size(), "mean": g.mean(), "sd": g.std(ddof=1)})
    stats = stats[(stats["n"] >= 2) & (stats["mean"] > 0)]
    return float((stats["sd"] / stats["mean"]).mean()) if len(stats) else np.nan


def format_reliability(table: pd.DataFrame) -> pd.DataFrame:
    """The table as strings: shares in %, CV as a ratio, '-' where not defined."""
    out = table.astype(object).copy()
    for col in out.columns:
        if col.startswith(("pass@", "pass^")) or col == "flip_rate":
            out[col] = [("-" if pd.isna(v) else f"{v:.0%}") for v in table[col]]
        elif col == "cost_cv":
            out[col] = [("-" if pd.isna(v) else f"{v:.2f}") for v in table[col]]
        elif col.startswith("tasks@"):
            out[col] = [("-" if pd.isna(v) else f"{int(v)}") for v in table[col]]
    return out


RELIABILITY_TITLE = (
    "Reliability over repeats per strategy (pass@k = at least one of k repeats solves the task, pass^k = all k "
    "do, unbiased estimators averaged over tasks; flip rate = share of tasks whose solved outcome differs "
    "between repeats; cost CV = sd / mean of cost per run over a task's repeats, averaged over tasks)"
)


def reliability_lines(table: pd.DataFrame) -> list[str]:
    """Notes under the table: what a single repeat cannot show, and the runs left out."""
    if table.empty:
        return []
    out = []
    if (table["repeats"].astype(str) == "1").all():
        out.append(
            "  Every task ran once per strategy: pass@k and pass^k need repeats (experiment `repeats`)."
        )
    left = table["not_scored"]
    if left.sum():
        out.append("  Left out (errored or interrupted, not repeats of a measurement): "
                   + ", ".join(f"{s} {int(n)}" for s, n in left.items() if n))  # fmt: skip
    return out
