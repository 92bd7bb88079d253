"""Matplotlib figures from the analysis tables, saved as PNG; every function returns the file's Path.

Figures are drawn on :class:`matplotlib.figure.Figure` objects rendered by the Agg canvas, without
pyplot: nothing touches the process-wide backend, so they work the same in a kernel, a test or a CLI.
With no data a figure still gets written, saying so, so a notebook never breaks on an empty folder.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from kit.analysis import cache_economics
from kit.analysis.caveat import caveat
from kit.analysis.tables import order_tiers

BUCKET_LABELS = {
    "cost_uncached": "uncached input",
    "cost_cache_read": "cache read",
    "cost_cache_write": "cache write",
    "cost_output": "output",
}
TIER_COLORS = {"cheap": "tab:green", "medium": "tab:orange", "strong": "tab:red"}


def _new(width: float = 7.0, height: float = 4.5) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _head(caveat: str, title: str) -> str:
    """A figure's title with what its records are first (:func:`kit.analysis.summary.caveat`)."""
    return f"{textwrap.fill(caveat, 64)}\n{title}" if caveat else title


def _empty(path: str | Path, title: str, message: str) -> Path:
    fig = _new(6, 2.5)
    ax = fig.subplots()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return _save(fig, path)


Y_LABELS = {
    "failed_share": "share of requirements failed (0 = all met)",
    "defects_total": "defects (acceptance failures)",
}


def pareto_front(runs: pd.DataFrame, y: str = "failed_share") -> pd.DataFrame:
    """The runs no other run beats on both cost and ``y`` (sorted by cost)."""
    pts = runs.dropna(subset=["cost_usd", y]).sort_values(["cost_usd", y])
    front, best = [], float("inf")
    for idx, row in pts.iterrows():
        if row[y] < best:
            front.append(idx)
            best = row[y]
    return pts.loc[front]


def scored_runs(runs: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The runs a defects plot may show (``scored``), and a note on the others, e.g.
    'left out (not scored): 2 error, 1 interrupted' ('' when none are left out)."""
    if runs.empty or "scored" not in runs:
        return runs, ""
    keep = runs["scored"].astype(bool)
    out = runs.loc[~keep, "outcome"].value_counts().sort_index()
    note = "left out (not scored): " + ", ".join(f"{n} {o}" for o, n in out.items()) if len(out) else ""
    return runs[keep], note


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")


def left_out_note(runs: pd.DataFrame, y: str) -> tuple[pd.DataFrame, str]:
    """The runs a cost-vs-``y`` plot can place (scored, with a cost and a ``y``) and a note counting
    every other run by why it is left out ('' when none is)."""
    shown, note = scored_runs(runs)
    if shown.empty:
        return shown, note
    missing = shown[["cost_usd", y]].isna().any(axis=1)
    if missing.any():
        extra = f"{int(missing.sum())} without a cost or {y}"
        note = f"{note}, {extra}" if note else f"left out: {extra}"
    return shown[~missing], note


#: Metrics that are shares: their axis is always 0 to 1 (never below 0, never zoomed to a sliver).
SHARES = frozenset({"failed_share", "solved", "solved_rate", "cache_read_share"})


def _share_axis(ax: Any) -> None:
    """A y axis of shares: exactly 0 to 1, the points on its edges drawn whole."""
    ax.set_ylim(0.0, 1.0)
    for artist in ax.collections:
        artist.set_clip_on(False)


def pareto_figure(runs: pd.DataFrame, y: str = "failed_share") -> Figure:
    """The figure :func:`pareto` saves: colour = strategy, marker = task (two legends), the title
    counting the runs shown of all runs and every run left out."""
    total = len(runs)
    title = _head(caveat(runs), f"Cost vs {'failed share' if y == 'failed_share' else y} per run")
    runs, note = left_out_note(runs, y)
    fig = _new()
    ax = fig.subplots()
    if runs.empty:
        ax.set_title(title)
        ax.text(0.5, 0.5, "no scored runs" + (f"\n{note}" if note else ""), ha="center", va="center",
                transform=ax.transAxes)  # fmt: skip
        ax.set_axis_off()
        return fig
    strategies = sorted(set(runs["strategy"]))
    tasks = sorted(set(runs["task"]))
    colours = {s: f"C{i % 10}" for i, s in enumerate(strategies)}
    markers = {t: MARKERS[i % len(MARKERS)] for i, t in enumerate(tasks)}
    for (strategy, task), g in runs.groupby(["strategy", "task"], sort=True):
        ax.scatter(g["cost_usd"], g[y], color=colours[strategy], marker=markers[task], s=45, alpha=0.8)
    front = pareto_front(runs, y)
    if len(front) > 1:
        ax.step(front["cost_usd"], front[y], where="post", color="grey", lw=1, ls="--")
    if y in SHARES:
        _share_axis(ax)
    ax.set_xlabel("cost per run (USD)")
    ax.set_ylabel(Y_LABELS.get(y, y))
    ax.set_title(f"{title}: {len(runs)} of {total} runs" + (f"\n{note}" if note else ""))
    handles = [Line2D([], [], color=colours[s], marker="o", ls="", label=s) for s in strategies]
    if len(front) > 1:
        handles.append(Line2D([], [], color="grey", ls="--", label="Pareto front"))
    first = ax.legend(handles=handles, title="strategy", fontsize="small", loc="upper left",
                      bbox_to_anchor=(1.01, 1.0))  # fmt: skip
    ax.add_artist(first)
    task_handles = [Line2D([], [], color="black", marker=markers[t], ls="", label=t) for t in tasks]
    ax.legend(
        handles=task_handles, title="task", fontsize="small", loc="lower left", bbox_to_anchor=(1.01, 0.0)
    )
    return fig


def pareto(runs: pd.DataFrame, path: str | Path, y: str = "failed_share") -> Path:
    """Cost vs ``y`` (by default the share of requirements failed, comparable across tasks with
    different numbers of requirements), one point per scored run, colour = strategy, marker = task;
    the Pareto front as a step line. Runs that were not scored (error, interrupted ...) or lack a cost
    are left out, and the title counts them."""
    return _save(pareto_figure(runs, y), path)


def models_per_tier(calls: pd.DataFrame) -> str:
    """``cheap: m1; medium: m2, m3`` -- the models that answered each tier's calls (what a per-tier bar
    pools when a profile changed between runs)."""
    if calls.empty:
        return ""
    pairs = calls.groupby("tier")["model"].agg(lambda m: ", ".join(sorted(set(map(str, m)))))
    return "; ".join(f"{tier}: {pairs[tier]}" for tier in order_tiers(pairs.index))


def tier_cost_figure(calls: pd.DataFrame) -> Figure:
    """The figure :func:`tier_cost_bars` saves: one panel per strategy (never pooled across
    strategies), per tier one stacked bar of cost by token bucket, summed over the strategy's runs; the
    title names the models of each tier."""
    strategies = sorted(set(calls["strategy"]))
    fig = _new(2.6 * len(strategies) + 2.2, 4.4)
    axes = fig.subplots(1, len(strategies), squeeze=False, sharey=True)[0]
    for ax, strategy in zip(axes, strategies, strict=True):
        mine = calls[calls["strategy"] == strategy]
        table = cache_economics(mine)
        bottom = pd.Series(0.0, index=table.index)
        for col, label in BUCKET_LABELS.items():
            values = table[col].fillna(0.0)
            ax.bar(list(table.index), values, bottom=bottom, label=label)
            bottom = bottom + values
        ax.set_title(f"{strategy} ({mine['run_key'].nunique()} runs)", fontsize="small")
    axes[0].set_ylabel("USD (sum over the strategy's runs)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize="small")
    models = textwrap.fill(f"models: {models_per_tier(calls)}", 90)
    fig.suptitle(
        _head(caveat(calls), f"Cost per tier by token bucket, per strategy\n{models}"), fontsize="medium"
    )
    return fig


def tier_cost_bars(calls: pd.DataFrame, path: str | Path) -> Path:
    """Per strategy (one panel each), per tier one stacked bar of cost: uncached input / cache read /
    cache write / output; the title names the models behind each tier."""
    title = "Cost per tier by token bucket"
    if calls.empty:
        return _empty(path, title, "no calls")
    return _save(tier_cost_figure(calls), path)


def timeline_figure(calls: pd.DataFrame, max_runs: int = 6) -> Figure:
    """The figure :func:`timeline` saves: the runs shown of all runs in the title, one x range for every
    panel that covers the last call of every run shown, and every role that made calls in a run drawn
    as a row of its panel (a call's bar at least 0.5 % of the range wide, so a fast call stays visible)."""
    total = calls["run_key"].nunique()
    firsts = calls.sort_values(["strategy", "repeat", "run_key"]).drop_duplicates("run_key")
    order = pd.concat([firsts.drop_duplicates("strategy"), firsts]).drop_duplicates("run_key")
    run_keys = list(order["run_key"])[:max_runs]
    shown = calls[calls["run_key"].isin(run_keys)]
    ends = (shown["t_s"].fillna(0.0) + shown["latency_s"].fillna(0.0).clip(lower=0.0)).max()
    right = max(float(ends) if pd.notna(ends) else 0.0, 1.0) * 1.02
    rows = int(shown.groupby("run_key")["role"].nunique().sum())
    fig = _new(8, 1.0 + 0.28 * rows + 0.9 * len(run_keys))
    axes = fig.subplots(len(run_keys), 1, squeeze=False, sharex=True)[:, 0]
    for ax, run_key in zip(axes, run_keys, strict=True):
        c = calls[calls["run_key"] == run_key]
        roles = sorted(set(c["role"]))
        for tier, g in c.groupby("tier"):
            ax.barh(
                g["role"].map(roles.index),
                g["latency_s"].fillna(0.0).clip(lower=right * 0.005),
                left=g["t_s"].fillna(0.0),
                height=0.6,
                color=TIER_COLORS.get(tier, "tab:blue"),
                label=tier,
            )
        ax.set_yticks(range(len(roles)), [f"{r} ({int((c['role'] == r).sum())})" for r in roles])
        ax.set_ylim(-0.6, len(roles) - 0.4)
        ax.set_title(f"{c['strategy'].iloc[0]} — {run_key}", fontsize="small", loc="left")
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes[0].set_xlim(0, right)  # shared: one range that covers every run shown
    axes[-1].set_xlabel("seconds since run start")
    what = f"all {total} runs" if len(run_keys) == total else f"{len(run_keys)} of {total} runs"
    fig.suptitle(
        _head(
            caveat(calls),
            f"Calls over time by role: {what} (first repeat of each strategy first; calls per role in brackets)",
        )
    )
    return fig


def timeline(calls: pd.DataFrame, path: str | Path, max_runs: int = 6) -> Path:
    """One panel per run (the first ``max_runs``, one repeat per strategy first; the title says how
    many of how many): each call is a bar from its start to its end, x = seconds since the run started
    (shared by the panels), y = role, colour = tier."""
    if calls.empty:
        return _empty(path, "Calls over time by role", "no calls")
    return _save(timeline_figure(calls, max_runs), path)


def tier_shares_figure(reference: pd.Series, measured: pd.Series, measured_label: str = "measured") -> Figure:
    """The figure :func:`tier_shares_vs_reference` saves (``measured_label`` says whose runs the measured
    bars are, e.g. "measured: pdca, 3 runs")."""
    tiers = list(dict.fromkeys([*reference.index, *measured.index]))
    fig = _new()
    ax = fig.subplots()
    x = range(len(tiers))
    ax.bar([i - 0.2 for i in x], [100 * reference.get(t, 0.0) for t in tiers], width=0.4, label="reference")
    if measured.notna().any():
        heights = [100 * (0.0 if pd.isna(measured.get(t)) else measured.get(t)) for t in tiers]
        ax.bar([i + 0.2 for i in x], heights, width=0.4, label=measured_label)
    else:
        ax.text(0.98, 0.95, f"no {measured_label}", ha="right", va="top", transform=ax.transAxes)
    ax.set_xticks(list(x), tiers)
    ax.set_ylabel("% of cost")
    ax.set_title(f"Share of cost per tier: the reference vs {measured_label}")
    ax.legend(fontsize="small")
    return fig


def tier_shares_vs_reference(
    reference: pd.Series, measured: pd.Series, path: str | Path, measured_label: str = "measured"
) -> Path:
    """Side-by-side bars of the share of cost per tier: the reference figures vs the measured runs
    (``measured_label`` names them: whose strategy, how many runs)."""
    return _save(tier_shares_figure(reference, measured, measured_label), path)


def frontier_figure(table: pd.DataFrame, left_out: int = 0) -> Figure:
    """The figure :func:`frontier` saves: one panel per family, sharing the y axis; colour = strategy,
    the same in every panel, named in one legend (no labels on the points, which overlapped)."""
    families = list(dict.fromkeys(table.index.get_level_values("family")))
    strategies = sorted(set(table.index.get_level_values("strategy")))
    colours = {s: f"C{i % 10}" for i, s in enumerate(strategies)}
    fig = _new(4.2 * len(families) + 2.0, 4.0)
    axes = fig.subplots(1, len(families), squeeze=False, sharey=True)[0]
    for ax, family in zip(axes, families, strict=True):
        t = table.loc[family]
        for strategy, row in t.iterrows():
            ax.scatter(row["cost_usd"], row["failed_share"], s=60, color=colours[strategy])
        front = t[t["on_frontier"]].sort_values("cost_usd")
        if len(front) > 1:  # the same staircase as the Pareto figure's front
            ax.step(front["cost_usd"], front["failed_share"], where="post", color="grey", lw=1, ls="--")
        _share_axis(ax)
        ax.set_title(f"{family} ({int(t['runs'].sum())} runs)", fontsize="small")
        ax.set_xlabel("mean cost per run (USD)")
    axes[0].set_ylabel(Y_LABELS["failed_share"])
    handles = [Line2D([], [], color=colours[s], marker="o", ls="", label=s) for s in strategies]
    handles.append(Line2D([], [], color="grey", ls="--", label="frontier"))
    fig.legend(handles=handles, loc="outside right upper", fontsize="small")
    note = f" ({left_out} strategy x family rows without a score left out)" if left_out else ""
    fig.suptitle(_head(table.attrs.get("caveat", ""), f"Cost-quality frontier per task family{note}"))
    return fig


def frontier(table: pd.DataFrame, path: str | Path) -> Path:
    """One panel per task family: each strategy's mean cost vs mean failed share
    (:func:`kit.analysis.verdict.frontier_table`); the strategies on the family's frontier joined by the
    Pareto figure's staircase; the failed share's axis from 0 to 1."""
    title = "Cost-quality frontier per task family"
    kept = table.dropna(subset=["cost_usd", "failed_share"]) if not table.empty else table
    if kept.empty:
        return _empty(path, title, "no scored runs")
    return _save(frontier_figure(kept, left_out=len(table) - len(kept)), path)
