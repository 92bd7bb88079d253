"""The report's tables as readable strings: the per-strategy table, the loop counters, the errors and
the per-role x tier table (:mod:`kit.analysis.report` re-exports them; notebooks call them as
``report.format_*``)."""

from __future__ import annotations

import pandas as pd

from kit.analysis import TOKENS
from kit.records.schema import SEVERITIES


def _tokens(n: float) -> str:
    if pd.isna(n):
        return "-"
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"{n / size:.2f}{suffix}"
    return f"{n:.0f}"


def _mean_ci(mean: float, ci: float, digits: int = 2) -> str:
    if pd.isna(mean):
        return "-"
    return f"{mean:.{digits}f}" if pd.isna(ci) else f"{mean:.{digits}f} ± {ci:.{digits}f}"


def _pct_ci(mean: float, ci: float) -> str:
    if pd.isna(mean):
        return "-"
    return f"{mean:.0%}" if pd.isna(ci) else f"{mean:.0%} ± {ci:.0%}"


def _pct_wilson(rate: float, lo: float, hi: float) -> str:
    if pd.isna(rate):
        return "-"
    return f"{rate:.0%}" if pd.isna(lo) else f"{rate:.0%} [{lo:.0%}, {hi:.0%}]"


def format_strategy_table(table: pd.DataFrame) -> pd.DataFrame:
    """The per-strategy table as readable strings (means per run; ± the 95 % t-interval over repeats,
    [lo, hi] the 95 % Wilson interval of the solved rate; none for a row spanning several tasks)."""
    out = pd.DataFrame(index=table.index)
    out["runs"] = table["runs"].map("{:.0f}".format)
    out["scored"] = [
        f"{s:.0f}" + (f" ({x:.0f} excl.)" if x else "")
        for s, x in zip(table["scored"], table["excluded"], strict=True)
    ]
    # comparable across tasks first: share of runs solved (no critical/major failure), share of
    # requirements failed; then the raw defect counts, which scale with a task's number of requirements
    out["solved [95% Wilson]"] = [
        _pct_wilson(m, lo, hi)
        for m, lo, hi in zip(table["solved_rate"], table["solved_lo"], table["solved_hi"], strict=True)
    ]
    out["failed share ± 95%"] = [
        _pct_ci(m, c) for m, c in zip(table["failed_share"], table["failed_share_ci95"], strict=True)
    ]
    out["defects ± 95%"] = [_mean_ci(m, c) for m, c in zip(table["total"], table["total_ci95"], strict=True)]
    out["crit/maj/min"] = [f"{a:.1f}/{b:.1f}/{c:.1f}" for a, b, c in table[list(SEVERITIES)].to_numpy()]
    out["done✗"] = table["claimed_done_but_failed"].map("{:.0f}".format)
    out["gamed"] = table["gamed"].map("{:.0f}".format)
    out["susp."] = table["suspicious"].map("{:.0f}".format)
    out["unguarded"] = table["unguarded_share"].map(lambda v: "-" if pd.isna(v) else f"{v:.0%}")
    out["tests"] = table["tests_added"].map("{:.1f}".format)
    out["files"] = table["files_touched"].map("{:.1f}".format)
    out["wall s"] = [_mean_ci(m, c, 0) for m, c in zip(table["wall_s"], table["wall_s_ci95"], strict=True)]
    out["calls"] = table["calls"].map("{:.1f}".format)
    for col, name in zip(TOKENS, ("uncached", "cache rd", "cache wr", "output"), strict=True):
        out[name] = table[col].map(_tokens)
    out["cost $"] = [
        _mean_ci(m, c, 4) for m, c in zip(table["cost_usd"], table["cost_usd_ci95"], strict=True)
    ]
    return out


def format_counters(table: pd.DataFrame, width: int = 70) -> pd.DataFrame:
    """The loop counters table (:func:`kit.analysis.summary.counters_table`) as readable strings, each
    non-numeric value cut to ``width`` characters."""
    out = pd.DataFrame(index=table.index)
    out["runs"] = table["runs"].map("{:.0f}".format)
    out["mean / min / max"] = [
        f"{m:.3g} / {lo:.3g} / {hi:.3g}" if m is not None and not pd.isna(m) else _clip(str(text), width)
        for m, lo, hi, text in zip(table["mean"], table["min"], table["max"], table["values"], strict=True)
    ]
    return out


def _clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters (a recorded setting such as a strategy's params dict would
    otherwise widen the whole column; run.json has it whole)."""
    return text if len(text) <= width else text[: width - 3] + "..."


def format_errors(errors: pd.DataFrame, width: int = 160) -> str:
    """One line per errored run: ``run_key: message`` (the message shortened to ``width``)."""
    lines = []
    for row in errors.itertuples():
        message = " ".join(str(row.error).split())
        if len(message) > width:
            message = message[: width - 1] + "…"
        lines.append(f"  {row.run_key}: {message}")
    return "\n".join(lines)


def format_role_tier_table(table: pd.DataFrame) -> pd.DataFrame:
    """The per-role x tier table as readable strings."""
    out = pd.DataFrame(index=table.index)
    out["runs"] = table["runs"].map("{:.0f}".format)
    out["calls"] = table["calls"].map("{:.0f}".format)
    out["failed"] = table["failed"].map("{:.0f}".format)
    for col, name in zip(TOKENS, ("uncached", "cache rd", "cache wr", "output"), strict=True):
        out[name] = table[col].map(_tokens)
    out["cost $"] = table["cost_usd"].map("{:.4f}".format)
    out["share"] = table["cost_share"].map("{:.0%}".format)
    return out
