"""Tables over loaded :class:`~kit.analysis.Records`: per strategy, outcomes, errors, per role x tier,
tier cost shares, cost buckets and cache economics; and the 95 % t-interval helpers they use."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
from scipy import stats as scipy_stats

from kit.analysis.cachesim import TOLERANCE, left_cached
from kit.analysis.caveat import caveat
from kit.analysis.load import OUTCOME_ORDER, Records
from kit.analysis.prices import BUCKETS, TOKENS
from kit.config import TIERS
from kit.records.schema import SEVERITIES, stop_reason_key

# --------------------------------------------------------------------------- statistics


def t_critical_95(df: int) -> float:
    """Two-sided 95 % Student-t critical value for ``df`` degrees of freedom (NaN for df < 1)."""
    if df < 1:
        return math.nan
    return float(scipy_stats.t.ppf(0.975, df))


def ci95_halfwidth(values: Sequence[float] | pd.Series) -> float:
    """Half-width of the 95 % t-interval of the mean; NaN with fewer than two values."""
    s = pd.Series(values, dtype=float).dropna()
    if len(s) < 2:
        return math.nan
    return t_critical_95(len(s) - 1) * float(s.std(ddof=1)) / math.sqrt(len(s))


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion k / n (NaNs when n is 0): right at 0 % and 100 %
    and with few runs, where the t-interval of 0/1 values collapses to a point."""
    if n <= 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# --------------------------------------------------------------------------- tables


def strategy_table(records: Records, by: Sequence[str] = ("strategy",)) -> pd.DataFrame:
    """One row per strategy (or per ``by`` group) over its repeats.

    It leads with the scores comparable across tasks (:func:`comparable_scores`): ``solved_rate``
    (share of scored runs with no critical or major failure) and ``failed_share`` (mean share of
    requirements failed), then the raw defect counts, which depend on how many requirements a task has;
    ``failed_share_<severity>`` (the share failed among the requirements of that severity) come last.
    All of these are means over the *scored* runs only (``excluded`` = the runs left out of them:
    error and interrupted; tampered and unscored runs count, with every requirement failed -- see
    :func:`outcome_table` and :func:`is_scored`); time, calls,
    tokens and cost are means over all runs (that money was spent). ``runs``, ``scored``,
    ``excluded`` and ``claimed_done_but_failed`` are counts; ``gamed`` counts the scored runs with a
    requirement whose must-fail twin passed, ``suspicious`` the runs whose code was seen reading the
    hidden tests or taking frames, ``unguarded_share`` is the share of requirements (over the scored
    runs) that had neither a twin nor a sealed check; ``*_ci95`` is the half-width of the 95 % t-interval of the mean over
    repeats (NaN with one run), and ``solved_lo`` / ``solved_hi`` the 95 % Wilson interval of the
    solved rate. Intervals are over the repeats of one task: a group that spans several tasks gets
    none (NaN), since runs of different tasks are not repeats of one measurement.
    """
    runs = records.runs
    columns = [
        "runs",
        "scored",
        "solved_rate",
        "solved_rate_ci95",
        "failed_share",
        "failed_share_ci95",
        "excluded",
        *[c for sev in (*SEVERITIES, "total") for c in (sev, f"{sev}_ci95")],
        "claimed_done_but_failed",
        "gamed",
        "suspicious",
        "unguarded_share",
        "tests_added",
        "files_touched",
        "wall_s",
        "wall_s_ci95",
        "calls",
        *TOKENS,
        "cost_usd",
        "cost_usd_ci95",
        *[f"failed_share_{sev}" for sev in SEVERITIES],
        "solved_lo",
        "solved_hi",
    ]
    if runs.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name=by[0]))
    rows = {}
    for key, g in runs.groupby(list(by), sort=True):
        scored = g[g["scored"].astype(bool)]
        row: dict[str, float] = {"runs": len(g), "scored": len(scored), "excluded": len(g) - len(scored)}
        for name in ("solved", "failed_share"):
            key_name = "solved_rate" if name == "solved" else name
            row[key_name] = scored[name].mean()
            row[f"{key_name}_ci95"] = ci95_halfwidth(scored[name])
        for sev in (*SEVERITIES, "total"):
            row[sev] = scored[f"defects_{sev}"].mean()
            row[f"{sev}_ci95"] = ci95_halfwidth(scored[f"defects_{sev}"])
        row["claimed_done_but_failed"] = int(scored["claimed_done_but_failed"].sum())
        row["gamed"] = int((scored["requirements_gamed"].fillna(0) > 0).sum())
        row["suspicious"] = int(g["suspicious"].sum())
        total = scored["requirements_total"].sum()
        row["unguarded_share"] = (
            scored["requirements_unguarded"].fillna(0).sum() / total if total else math.nan
        )
        for name in ("tests_added", "files_touched", "wall_s", "calls", *TOKENS, "cost_usd"):
            row[name] = g[name].mean()
        for sev in SEVERITIES:
            row[f"failed_share_{sev}"] = scored[f"failed_share_{sev}"].mean()
        row["wall_s_ci95"] = ci95_halfwidth(g["wall_s"])
        row["cost_usd_ci95"] = ci95_halfwidth(g["cost_usd"])
        row["solved_lo"], row["solved_hi"] = (
            wilson(int(scored["solved"].sum()), len(scored)) if len(scored) > 1 else (math.nan, math.nan)
        )
        if g["task"].nunique() > 1:  # not repeats of one measurement: no interval
            row.update({c: math.nan for c in row if c.endswith("_ci95") or c in ("solved_lo", "solved_hi")})
        rows[key if len(by) > 1 else key[0]] = row
    table = pd.DataFrame.from_dict(rows, orient="index")[columns]
    table.index.names = list(by)
    return table


def outcome_table(records: Records, by: Sequence[str] = ("strategy",)) -> pd.DataFrame:
    """How many runs of each strategy (or ``by`` group) ended in each outcome, plus ``runs`` and
    ``scored`` (the runs the defect means are taken over), and last ``stop_reasons``: every outcome
    with the strategy's stop reasons behind it and their counts (``done: converged-clean 2; capped:
    cycle-cap 1``; see :func:`stop_reason_text`). The outcomes' meanings are
    :data:`kit.records.schema.OUTCOMES` (the report prints them as a legend)."""
    runs = records.runs
    if runs.empty:
        return pd.DataFrame(columns=["runs", "scored", "stop_reasons"], index=pd.Index([], name=by[0]))
    counts = runs.groupby([*by, "outcome"]).size().unstack("outcome", fill_value=0)
    order = [o for o in OUTCOME_ORDER if o in counts.columns]
    counts = counts[order + sorted(c for c in counts.columns if c not in order)]
    counts.columns.name = None
    grouped = runs.groupby(list(by))
    counts.insert(0, "runs", grouped.size())
    counts.insert(1, "scored", grouped["scored"].sum().astype(int))
    counts["stop_reasons"] = grouped.apply(stop_reason_text, include_groups=False)
    return counts


def stop_reason_text(runs: pd.DataFrame) -> str:
    """``outcome: stop reason count, ...; outcome: ...`` over ``runs`` (outcomes in OUTCOME_ORDER, stop
    reasons without their detail, ``-`` for a run that recorded none)."""
    reasons = runs["stop_reason"] if "stop_reason" in runs else pd.Series("", index=runs.index)
    keys = reasons.fillna("").map(lambda r: stop_reason_key(str(r)) or "-")
    pairs = pd.DataFrame({"outcome": runs["outcome"], "reason": keys}).value_counts()
    rank = {o: i for i, o in enumerate(OUTCOME_ORDER)}
    parts = []
    for outcome in sorted({o for o, _ in pairs.index}, key=lambda o: (rank.get(o, len(rank)), o)):
        found = sorted((r, n) for (o, r), n in pairs.items() if o == outcome)
        parts.append(f"{outcome}: " + ", ".join(f"{r} {n}" for r, n in found))
    return "; ".join(parts)


def error_runs(records: Records) -> pd.DataFrame:
    """The runs that ended in ``error``, with their message (run_key, task, strategy, repeat, error)."""
    cols = ["run_key", "task", "strategy", "repeat", "error"]
    runs = records.runs
    if runs.empty:
        return pd.DataFrame(columns=cols)
    bad = runs[runs["outcome"] == "error"]
    return bad[cols].fillna({"error": "(no message)"}).reset_index(drop=True)


def role_tier_table(records: Records, phase: str | None = None) -> pd.DataFrame:
    """Per (strategy, role, tier), summed over all runs: calls, tokens, cost and its share of the
    strategy. With ``phase``, only the calls made in that phase (the calls' ``phase``, e.g. pdca's
    ``CHECK``); the share stays of the strategy's whole cost."""
    calls = records.calls
    cols = ["runs", "calls", "failed", *TOKENS, "cost_usd", "cost_share"]
    strategy_cost = calls.groupby("strategy")["cost_usd"].sum() if not calls.empty else None
    if phase is not None and not calls.empty:
        calls = calls[calls["phase"] == phase] if "phase" in calls else calls.iloc[:0]
    if calls.empty:
        return pd.DataFrame(
            columns=cols, index=pd.MultiIndex.from_tuples([], names=["strategy", "role", "tier"])
        )
    g = calls.groupby(["strategy", "role", "tier"], sort=True)
    table = g[list(TOKENS) + ["cost_usd"]].sum()
    table.insert(0, "runs", g["run_key"].nunique())
    table.insert(1, "calls", g.size())
    table.insert(2, "failed", g["ok"].apply(lambda s: int((~s.astype(bool)).sum())))
    by_strategy = strategy_cost.reindex(table.index.get_level_values("strategy")).to_numpy()
    whole = pd.Series(by_strategy, index=table.index)
    table["cost_share"] = (table["cost_usd"] / whole.where(whole > 0)).fillna(0.0)
    return table[cols]


def order_tiers(index: pd.Index) -> list[str]:
    return [t for t in TIERS if t in index] + sorted(t for t in index if t not in TIERS)


def tier_cost_shares(records: Records, strategy: str | None = None) -> pd.Series:
    """Share (0..1) of the cost spent on each tier, over all runs or those of ``strategy``; empty if none."""
    calls = records.calls if strategy is None else records.calls[records.calls["strategy"] == strategy]
    cost = calls.groupby("tier")["cost_usd"].sum() if not calls.empty else pd.Series(dtype=float)
    cost = cost.reindex(order_tiers(cost.index))
    total = cost.sum()
    return (cost / total if total > 0 else cost * math.nan).rename("share")


def runs_note(records: Records, strategy: str) -> str:
    """One line: how many runs of ``strategy`` there are to measure (or that there are none)."""
    n = int((records.runs["strategy"] == strategy).sum()) if not records.runs.empty else 0
    if n == 0:
        return f"no {strategy} runs in {records.root}: nothing measured to compare"
    return f"measured: {n} {strategy} run(s) in {records.root}"


def measured_label(records: Records, strategy: str) -> str:
    """Whose runs a measured bar pools, for a figure's legend: ``measured: pdca, 3 runs``."""
    n = int((records.runs["strategy"] == strategy).sum()) if not records.runs.empty else 0
    what = caveat(records.runs) if not records.runs.empty else ""
    return f"measured: {strategy}, {n} run{'s' if n != 1 else ''}" + (f" ({what})" if what else "")


def bucket_costs(calls: pd.DataFrame) -> pd.DataFrame:
    """``calls`` plus ``cost_uncached``, ``cost_cache_read``, ``cost_cache_write``, ``cost_output``.

    Each bucket is its tokens times the call's own price (``price_*`` columns, USD per 1M tokens).
    """
    out = calls.copy()
    for tokens, (price, cost) in BUCKETS.items():
        out[cost] = out[tokens].astype(float) * out[price].astype(float) / 1_000_000
    if "cache_write_1h" in out and "price_cache_write_1h" in out:  # 1-hour writes at their own price
        extra = out["price_cache_write_1h"].astype(float) - out["price_cache_write"].astype(float)
        out["cost_cache_write"] += out["cache_write_1h"].astype(float) * extra / 1_000_000
    return out


def _conversation_key(calls: pd.DataFrame) -> pd.Series:
    conv = calls["conversation"].astype(object).where(calls["conversation"].notna(), calls["role"])
    return calls["run_key"].astype(str) + "/" + conv.astype(str)


def cache_economics(records: Records | pd.DataFrame) -> pd.DataFrame:
    """Per tier: what reading, writing, uncached input and output each cost, and warm vs cold turns.

    * ``hit_ratio`` -- cache_read / (input_uncached + cache_read + cache_write);
    * ``warm_turn_usd`` -- median cost of the warm turns, as the PDCA write-up defines them: a repeated
      turn of a conversation (conversation id, else the role, within a run) whose prefix was read
      entirely from the cache -- it read at least what the previous call left cached (less 128 tokens,
      an automatic cache's step), so only the new suffix was written or uncached;
    * ``cold_turn_usd`` -- median cost of the cold turns: calls that wrote their prompt to the cache and
      read nothing (cache_write > 0, cache_read == 0);
    * ``warm_turns`` / ``cold_turns`` -- how many calls each median is over;
    * ``cold_warm_ratio`` -- cold / warm (NaN when either is missing).
    A call that read part of its prefix and wrote the rest again (a cache bust,
    :mod:`kit.analysis.busts`) is neither.
    """
    calls = records.calls if isinstance(records, Records) else records
    cols = [
        "calls",
        *TOKENS,
        "cost_uncached",
        "cost_cache_read",
        "cost_cache_write",
        "cost_output",
        "cost_usd",
        "hit_ratio",
        "warm_turn_usd",
        "cold_turn_usd",
        "cold_warm_ratio",
        "warm_turns",
        "cold_turns",
    ]
    if calls.empty:
        return pd.DataFrame(columns=cols, index=pd.Index([], name="tier"))
    c = bucket_costs(calls)
    c["_conv"] = _conversation_key(c)
    c = c.sort_values(["_conv", "seq"], kind="stable")
    before = left_cached(c).groupby(c["_conv"]).shift()  # what the previous call left cached
    warm_mask = before.notna() & (c["cache_read"] > 0) & (c["cache_read"] >= before - TOLERANCE)
    cold_mask = (c["cache_write"] > 0) & (c["cache_read"] == 0)
    cold = c[cold_mask].groupby("tier")["cost_usd"].agg(["median", "size"])
    warm = c[warm_mask].groupby("tier")["cost_usd"].agg(["median", "size"])
    g = c.groupby("tier")
    table = g[
        [*TOKENS, "cost_uncached", "cost_cache_read", "cost_cache_write", "cost_output", "cost_usd"]
    ].sum()
    table.insert(0, "calls", g.size())
    prompt = table["input_uncached"] + table["cache_read"] + table["cache_write"]
    table["hit_ratio"] = (table["cache_read"] / prompt.where(prompt > 0)).fillna(0.0)
    table["warm_turn_usd"] = warm["median"].reindex(table.index)
    table["cold_turn_usd"] = cold["median"].reindex(table.index)
    table["warm_turns"] = warm["size"].reindex(table.index).fillna(0).astype("int64")
    table["cold_turns"] = cold["size"].reindex(table.index).fillna(0).astype("int64")
    table["cold_warm_ratio"] = table["cold_turn_usd"] / table["warm_turn_usd"].where(
        table["warm_turn_usd"] > 0
    )
    return table.reindex(order_tiers(table.index))[cols]
