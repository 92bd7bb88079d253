"""The plain-text report (`python -m kit report results/NAME`): the caveats a reader must see, the
runs by outcome, the per-strategy table (defect means over scored runs only, the excluded count
beside them), the errors with their messages and the per-role x tier table, formatted for a terminal
or a notebook."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kit.analysis import (
    TOKENS,
    Records,
    error_runs,
    load,
    outcome_table,
    role_tier_table,
    strategy_table,
)
from kit.analysis.summary import counters_table, summary_lines
from kit.records.schema import OUTCOMES, SEVERITIES, STOP_REASONS, load_run

SCRIPTED_LABEL = "scripted model — pipeline validation, not a benchmark"
EMBEDDED_LABEL = "embedded SmolLM2-135M — real but tiny model"
UNSANDBOXED_LABEL = (
    "unsandboxed: agent commands ran with `sandbox: none` (they could read the kit and other runs)"
)

TAMPERED_LABEL = "tampered: the tests' report was tampered with; scored as every requirement failed"
UNSCORED_LABEL = (
    "unscored: scoring failed (see score.unscored_reason); scored as every requirement failed; "
    "--retry-errors reruns them"
)
GAMED_LABEL = (
    "gamed: a requirement's must-fail twin passed too (a value equal to anything, a patched assertion); "
    "counted as failed (score.gamed_tests)"
)
SUSPICIOUS_LABEL = (
    "suspicious: the code under test read the hidden tests or took frames while they ran "
    "(score.suspicious_evidence); flagged, not re-scored"
)
UNGUARDED_LABEL = (
    "unguarded: requirements whose test has neither a must-fail twin nor a sealed check (their passes are"
    " not checked so)"
)
SEALED_LABEL = (
    "sealed: requirements with a check whose expected value never entered the scoring session (decided"
    " by the kit outside it)"
)


def labels(records: Records) -> list[str]:
    """Caveats a reader must see next to the numbers (illustrative prices, scripted or tiny models)."""
    runs, calls = records.runs, records.calls
    out = []
    models = set(calls["model"]) if not calls.empty else set()
    if not runs.empty:
        models |= {m for ms in runs["models"] for m in ms.split(",") if m}
        illustrative = sorted(set(runs.loc[runs["illustrative_prices"], "price_sheet"]))
        if illustrative:
            out.append(f"illustrative prices (price sheet {', '.join(illustrative)})")
    if not runs.empty and "sandbox" in runs:
        unsandboxed = int((runs["sandbox"] == "none").sum())
        if unsandboxed:
            out.append(f"{UNSANDBOXED_LABEL} ({unsandboxed} of {len(runs)} runs)")
    for column, label in (("tampered", TAMPERED_LABEL), ("unscored", UNSCORED_LABEL)):
        n = int(runs[column].sum()) if not runs.empty and column in runs else 0
        if n:
            out.append(f"{label} ({n} of {len(runs)} runs)")
    out += _twin_labels(runs)
    if any(m.startswith("scripted/") for m in models):
        out.append(SCRIPTED_LABEL)
    if any(m.startswith("embedded/") for m in models) or (
        not runs.empty and (runs["profile"] == "local").any()
    ):
        out.append(EMBEDDED_LABEL)
    return out


def _twin_labels(runs: pd.DataFrame) -> list[str]:
    """Gamed and suspicious runs, and the unguarded requirements (older records have none of them)."""
    if runs.empty or "requirements_gamed" not in runs:
        return []
    out = []
    gamed = int((runs["requirements_gamed"].fillna(0) > 0).sum())
    if gamed:
        out.append(f"{GAMED_LABEL} ({gamed} of {len(runs)} runs)")
    suspicious = int(runs["suspicious"].sum()) if "suspicious" in runs else 0
    if suspicious:
        out.append(f"{SUSPICIOUS_LABEL} ({suspicious} of {len(runs)} runs)")
    unguarded, total = (
        runs["requirements_unguarded"].fillna(0).sum(),
        runs["requirements_total"].fillna(0).sum(),
    )
    if unguarded:
        out.append(f"{UNGUARDED_LABEL} ({unguarded:.0f} of {total:.0f} requirements over all runs)")
    sealed = runs["requirements_sealed"].fillna(0).sum() if "requirements_sealed" in runs else 0
    if sealed:
        out.append(f"{SEALED_LABEL} ({sealed:.0f} of {total:.0f} requirements over all runs)")
    return out


def describe(records: Records) -> str:
    """A few lines: what was loaded, what was skipped, and the caveats."""
    runs = records.runs
    if runs.empty:
        lines = [f"{records.root}: no complete runs"]
    else:
        lines = [
            f"{records.root}: {len(runs)} complete runs; tasks: {', '.join(sorted(set(runs['task'])))}; "
            f"strategies: {', '.join(sorted(set(runs['strategy'])))}; "
            f"profiles: {', '.join(sorted(set(runs['profile'])))}"
        ]
    if not runs.empty:
        counts = (
            outcome_table(records, by=("profile",)).drop(columns=["runs", "scored", "stop_reasons"]).sum()
        )
        lines.append("outcomes: " + ", ".join(f"{n} {o}" for o, n in counts.items() if n))
    if records.incomplete:
        lines.append(
            f"{len(records.incomplete)} incomplete run(s) ignored (no readable run.json; "
            "the next `kit run` redoes them)"
        )
    calls = records.calls
    if not calls.empty and "usage_estimated" in calls:
        estimated = int(calls["usage_estimated"].fillna(False).astype(bool).sum())
        if estimated:
            lines.append(
                f"NOTE: {estimated} of {len(calls)} call attempts came without usage from the provider; "
                "their tokens and cost are litellm token_counter estimates (usage_estimated)"
            )
    lines += [f"NOTE: {label}" for label in labels(records)]
    return "\n".join(lines)


def outcome_legend(records: Records) -> list[str]:
    """The legend of the outcome table: what every outcome means (kit.records.schema.OUTCOMES), then
    each strategy of these runs with its stop reasons and the outcome each one ends in."""
    width = max(map(len, OUTCOMES))
    out = ["Outcomes (the same words in every strategy; stop_reasons = the strategy's own reason)"]
    out += [f"  {name:<{width}}  {meaning}" for name, meaning in OUTCOMES.items()]
    strategies = sorted(set(records.runs["strategy"])) if not records.runs.empty else []
    out.append("  each strategy's stop reasons -> the outcome they end in:")
    for strategy in strategies:
        reasons = STOP_REASONS.get(strategy)
        if reasons:
            out.append(f"  {strategy}: " + ", ".join(f"{r} -> {o}" for r, o in reasons.items()))
    return out


def _budget_text(budget: dict) -> str:
    calls, usd, tokens = (budget.get(k) for k in ("max_model_calls", "max_usd", "max_tokens"))
    parts = [f"{calls} model calls" if calls is not None else "no call cap"]
    parts.append(f"${usd:g}" if usd is not None else "no USD cap")
    parts.append(f"{tokens} tokens" if tokens is not None else "no token cap")
    return ", ".join(parts)


def fairness_lines(records: Records) -> list[str]:
    """Each strategy's role -> tier map and run budget, as its runs' run.json recorded them (one line
    per distinct setting: a results root may mix experiments)."""
    runs = records.runs
    if runs.empty:
        return []
    seen: dict[str, list[str]] = {}
    for strategy, run_dir in zip(runs["strategy"], runs["run_dir"], strict=True):
        run = load_run(run_dir)
        if run is None:
            continue
        tiers = " ".join(f"{role}={tier}" for role, tier in run.role_tiers.items()) or "(map not recorded)"
        line = (
            f"{tiers} | budget: {_budget_text(run.budget)}"
            if run.budget
            else f"{tiers} | budget: not recorded"
        )
        if line not in seen.setdefault(strategy, []):
            seen[strategy].append(line)
    width = max(len(s) for s in seen) if seen else 0
    out = ["Role → tier map and run budget per strategy (from run.json)"]
    for strategy in sorted(seen):
        out += [f"  {strategy:<{width}}  {line}" for line in seen[strategy]]
    return out


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


def cache_lines(records: Records) -> list[str]:
    """Cache busts per strategy × role × tier (and their dollars), the cache-read share per role (main
    agent vs sub-agents) and, in words, every tier whose cache figure is 0 % or missing."""
    from kit.analysis import busts as cache

    found = cache.cache_busts(records)
    out = ["Cache busts per strategy × role × tier (a call that wrote again or left uncached a prefix the "
           "previous call of its conversation had cached; $ = cost beyond a cache hit)"]  # fmt: skip
    if found.empty:
        out.append("  none")
    else:
        table = cache.bust_table(records, found)
        table["lost_tokens"] = table["lost_tokens"].map(_tokens)
        table["extra_usd"] = table["extra_usd"].map("{:.4f}".format)
        out.append(table.to_string())
    share = cache.cache_read_share(records)
    share["read_share"] = share["read_share"].map(lambda v: "-" if pd.isna(v) else f"{v:.0%}")
    share["prompt_tokens"] = share["prompt_tokens"].map(_tokens)
    share["cache_read"] = share["cache_read"].map(_tokens)
    share["calls_per_conversation"] = share["calls_per_conversation"].map("{:.1f}".format)
    out += ["", "Cache-read share per role (main = the strategy's longest conversations)", share.to_string()]
    notes = cache.cache_notes(records, busts=found)
    if notes:
        out += ["", "Why a cache figure is 0 % or missing", *(f"  {n}" for n in notes)]
    return out


def report_text(results_dir: str | Path) -> str:
    """The per-strategy and per-role x tier tables as plain text (``python -m kit report``)."""
    records = load(results_dir)
    parts = [describe(records)]
    if records.runs.empty:
        return parts[0] + "\n"
    by = ("task", "strategy") if records.runs["task"].nunique() > 1 else ("strategy",)
    if records.runs["experiment"].nunique() > 1:  # two settings (e.g. two prompt lab runs): never one row
        by = ("experiment", *by)
    parts += ["", *summary_lines(records)]
    parts += ["", *fairness_lines(records)]
    parts += [
        "",
        "Runs by outcome",
        outcome_table(records, by=by).to_string(),
        *outcome_legend(records),
        "",
        "Per strategy (means per run; ± = 95 % t-interval over the repeats of one task, [lo, hi] = 95 % "
        "Wilson interval of the solved rate; none for rows that span tasks; solved = no critical/major "
        "requirement failed; failed share = requirements failed / total; done✗ = claimed done but failed)",
        "Scores and defects are means over the scored runs only: errored and interrupted runs are "
        "excluded (the `scored` column counts them); unscored runs count as every requirement failed.",
        format_strategy_table(strategy_table(records, by=by)).to_string(),
        "",
    ]
    counters = counters_table(records)
    if not counters.empty:
        parts += [
            "Loop counters per strategy (from run.json counters; numbers: mean/min/max per run)",
            format_counters(counters).to_string(),
            "",
        ]
    errors = error_runs(records)
    if not errors.empty:
        parts += [
            f"Errors ({len(errors)} run(s); full messages in run.json; rerun them with "
            "`python -m kit run EXPERIMENT --retry-errors`)",
            format_errors(errors),
            "",
        ]
    parts += [
        "Per role × tier (sums over all runs; share = of the strategy's cost)",
        format_role_tier_table(role_tier_table(records)).to_string(),
    ]
    check = role_tier_table(records, phase="CHECK")
    if not check.empty:  # pdca's CHECK: re-run, scout, auditor, their hand-offs and status lines
        parts += [
            "",
            "Of which in pdca's CHECK phase, per role × tier (share = of the strategy's cost)",
            format_role_tier_table(check).to_string(),
        ]
    parts += ["", *cache_lines(records)]
    return "\n".join(parts) + "\n"
