"""What ``kit compare`` says about noise (:mod:`kit.analysis.compare`): per strategy, whether its
settings (run.json ``settings``: prompts, options, tiers, models, limits, task content, kit version)
are identical on both sides -- then every difference is run-to-run noise, and the strategy says so --
a 95 % interval for each difference, and the order of the changes: strategies whose settings changed
first, those whose settings are identical after them.

The interval is Welch's t interval of the difference of the two sides' means per run (the runs of
two folders are not paired); none with fewer than two runs on a side.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from kit.analysis.prices import TOKENS
from kit.records.schema import load_run

IDENTICAL = "settings identical: differences are run-to-run noise"
#: metric -> how one run's value is read from the runs table (None: the metric has no per-run value)
PER_RUN = ("solved", "failed_share", "calls", "tokens", "cache_read_share", "cost_usd")


def run_settings(runs: pd.DataFrame) -> dict[tuple[str, str], list[dict]]:
    """(strategy, task) -> the settings of each of its runs (run.json; {} for a run without)."""
    out: dict[tuple[str, str], list[dict]] = {}
    for strategy, task, run_dir in runs[["strategy", "task", "run_dir"]].itertuples(index=False):
        record = load_run(Path(run_dir))
        out.setdefault((strategy, task), []).append(dict(record.settings or {}) if record else {})
    return out


def settings_changes(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, list[str] | None]:
    """Per strategy both sides ran (on a common task): the settings keys that differ between the sides
    ([] when identical: every run of it on both sides has the same settings; None when a run has no
    settings recorded -- an older record -- so noise cannot be told from a change)."""
    sa, sb = run_settings(a) if not a.empty else {}, run_settings(b) if not b.empty else {}
    out: dict[str, list[str] | None] = {}
    for key in sorted(set(sa) & set(sb)):
        runs = sa[key] + sb[key]
        if not all(runs):
            out[key[0]] = None
            continue
        if key[0] in out and out[key[0]] is None:
            continue
        keys = out.setdefault(key[0], []) or []
        for name in sorted({k for s in runs for k in s}):
            if len({repr(s.get(name)) for s in runs}) > 1 and name not in keys:
                keys.append(name)
        out[key[0]] = keys
    return out


def _line(strategy: str, keys: list[str] | None) -> str:
    if keys is None:
        return f"  {strategy}: settings not recorded in every run: noise cannot be told from a change"
    return f"  {strategy}: " + (f"settings changed ({', '.join(keys)})" if keys else IDENTICAL)


def per_run(runs: pd.DataFrame, metric: str) -> np.ndarray:
    """One value per run of ``metric`` (solved and failed share over the scored runs only)."""
    if runs.empty:
        return np.array([])
    if metric in ("solved", "failed_share"):
        runs = runs[runs["scored"].astype(bool)]
        values = runs[metric]
    elif metric == "tokens":
        values = runs[list(TOKENS)].sum(axis=1)
    elif metric == "cache_read_share":
        prompt = runs[["input_uncached", "cache_read", "cache_write"]].sum(axis=1)
        values = (runs["cache_read"] / prompt.where(prompt > 0)).dropna()
    else:
        values = runs[metric]
    return values.astype(float).dropna().to_numpy()


def interval(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
    """Welch's ``level`` interval of mean(b) - mean(a); None with fewer than two runs on a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    diff = float(b.mean() - a.mean())
    va, vb = float(a.var(ddof=1)) / len(a), float(b.var(ddof=1)) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff  # no spread on either side: every run gave the same value
    dof = (va + vb) ** 2 / ((va**2 / (len(a) - 1)) + (vb**2 / (len(b) - 1)))
    half = float(stats.t.ppf(0.5 + level / 2, dof)) * se
    return diff - half, diff + half


def annotate(changed: pd.DataFrame, a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The changes table (:func:`kit.analysis.compare.changes_table`) with ``lo`` / ``hi`` (the 95 %
    interval of each numeric difference, NaN where there is none) and ``settings`` (``changed: keys``
    or :data:`IDENTICAL`), strategies whose settings changed first (each keeping its rows' order);
    and one line per strategy saying whether its settings changed."""
    changes = settings_changes(a, b)
    rank = {s: 0 if keys else 1 if keys is None else 2 for s, keys in changes.items()}
    lines = [_line(s, changes[s]) for s in sorted(changes, key=lambda s: (rank[s], s))]
    if changed.empty:
        return changed.assign(lo=[], hi=[], settings=[]), lines
    lo, hi, marks = [], [], []
    for strategy, task, metric in changed.index:
        iv = None
        if metric in PER_RUN:
            side = [
                per_run(r[(r["strategy"] == strategy) & (r["task"] == task)], metric) if not r.empty else []
                for r in (a, b)
            ]
            iv = interval(np.asarray(side[0]), np.asarray(side[1]))
        lo.append(iv[0] if iv else math.nan)
        hi.append(iv[1] if iv else math.nan)
        keys = changes.get(strategy)
        marks.append(IDENTICAL if keys == [] else f"changed: {', '.join(keys)}" if keys else "-")
    table = changed.assign(lo=lo, hi=hi, settings=marks)
    order = sorted(range(len(table)), key=lambda i: (rank.get(table.index[i][0], 1), i))
    return table.iloc[order], lines
