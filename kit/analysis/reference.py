"""Reference figures published by others (``datasets/reference/*.yaml``) and what follows from them.

The files hold raw numbers only, with their source. Everything shown (shares of cost per tier, the
cache write/read price ratio, the cold/warm turn ratio) is computed here, so a reader can check it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict

from kit.analysis import repo_path
from kit.config import load_yaml_model
from kit.paths import REFERENCE_DIR

DEFAULT = REFERENCE_DIR / "pdca_writeup.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TierFigures(_Strict):
    messages: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


class Totals(_Strict):
    hours: float
    sessions: int
    messages: int
    cost_usd: float


class CachePrices(_Strict):
    """USD per 1M tokens for one tier's cache."""

    tier: str
    cache_read: float
    cache_write: float


class Turns(_Strict):
    """Cost in USD of one turn that hits the cache (warm) and of one that does not (cold)."""

    warm_usd: float
    cold_usd: float


class ComparisonRun(_Strict):
    series: str
    task: str
    strategy: str
    minutes: float | None = None
    cost_usd: float | None = None
    own_tests: int | None = None


class Reference(_Strict):
    """One published set of figures."""

    name: str
    source: str
    notes: str = ""
    tiers: dict[str, TierFigures]
    totals: Totals
    cache_prices: CachePrices
    turns: Turns
    comparison_runs: list[ComparisonRun] = []


def load_reference(path: str | Path = DEFAULT) -> Reference:
    """Read a reference file (a path relative to the repository root, or absolute)."""
    return load_yaml_model(repo_path(path), Reference, "reference figures")


def tier_shares(ref: Reference) -> pd.Series:
    """Share (0..1) of the total cost per tier, computed from the per-tier costs."""
    cost = pd.Series({tier: t.cost_usd for tier, t in ref.tiers.items()}, dtype=float)
    return (cost / cost.sum()).rename("share")


def cache_write_read_ratio(ref: Reference) -> float:
    """How many times a cache write costs a cache read, per token."""
    return ref.cache_prices.cache_write / ref.cache_prices.cache_read


def cold_warm_ratio(ref: Reference) -> float:
    """How many times a cold turn costs a warm one."""
    return ref.turns.cold_usd / ref.turns.warm_usd


def tier_table(ref: Reference) -> pd.DataFrame:
    """The per-tier figures with the computed share of cost and cost per message."""
    table = pd.DataFrame.from_dict({tier: t.model_dump() for tier, t in ref.tiers.items()}, orient="index")
    table.index.name = "tier"
    table["share"] = tier_shares(ref)
    table["usd_per_message"] = table["cost_usd"] / table["messages"]
    return table


def comparison_table(ref: Reference) -> pd.DataFrame:
    """The published comparison runs, one row each."""
    return pd.DataFrame([r.model_dump() for r in ref.comparison_runs])


def headline(ref: Reference) -> str:
    """The computed figures in three lines, with the source."""
    shares = ", ".join(f"{tier} {share:.0%}" for tier, share in tier_shares(ref).items())
    cp, turns = ref.cache_prices, ref.turns
    return "\n".join(
        [
            f"source: {ref.source}",
            f"share of cost per tier (computed from ${ref.totals.cost_usd:.2f} in total): {shares}",
            f"{cp.tier} tier cache write / read price: ${cp.cache_write}/M vs ${cp.cache_read}/M = "
            f"{cache_write_read_ratio(ref):.0f}x",
            f"cold / warm turn: ${turns.cold_usd} vs ${turns.warm_usd} = {cold_warm_ratio(ref):.2f}x",
        ]
    )


def shares_vs_measured(ref: Reference, measured: pd.Series) -> pd.DataFrame:
    """Reference and measured shares of cost per tier side by side (measured NaN when absent)."""
    ref_shares = tier_shares(ref)
    index = list(dict.fromkeys([*ref_shares.index, *measured.index]))
    return pd.DataFrame(
        {"reference": ref_shares.reindex(index), "measured": measured.reindex(index).astype(float)},
        index=pd.Index(index, name="tier"),
    )


def warm_cold_vs_reference(ref: Reference, economics: pd.DataFrame) -> pd.DataFrame:
    """Measured warm and cold turn medians per tier (from
    :func:`~kit.analysis.tables.cache_economics`, which uses the write-up's definitions: cold = wrote its
    prompt to the cache and read nothing; warm = a repeated turn whose prefix was read entirely from the
    cache) and their ratio, with the write-up's own figures as the last row."""
    cols = ["warm_turn_usd", "cold_turn_usd", "cold_warm_ratio", "warm_turns", "cold_turns"]
    measured = economics.reindex(columns=cols).copy()
    measured.index = [f"measured: {tier}" for tier in measured.index]
    published = pd.DataFrame(
        [[ref.turns.warm_usd, ref.turns.cold_usd, cold_warm_ratio(ref), math.nan, math.nan]],
        columns=cols,
        index=[f"write-up: {ref.cache_prices.tier}"],
    )
    return pd.concat([measured, published]).rename_axis("turns")
