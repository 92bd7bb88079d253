"""The report (`python -m kit report results/NAME [--format text|markdown|html] [--summary]`): the
summary first (what was loaded, its caveats, who won), then the runs by outcome, the per-strategy table
(defect means over scored runs only, the excluded count beside them), how large the context got, the
reliability over repeats (pass@k, pass^k, flips), where a strategy starts paying off against task size
(the crossover), the loop counters, the errors with their messages, the per-role x tier table and the cache; the HTML report
adds the notebooks' figures. Built as sections (:func:`report_sections`), rendered by
:mod:`kit.analysis.render`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kit.analysis import (
    Records,
    error_runs,
    load,
    outcome_table,
    role_tier_table,
    strategy_table,
)
from kit.analysis.caveat import on_this_machine
from kit.analysis.context import context_table, format_context
from kit.analysis.formats import (  # noqa: F401 - the table formats, importable from here as before
    _tokens,
    format_counters,
    format_errors,
    format_role_tier_table,
    format_strategy_table,
)
from kit.analysis.render import FORMATS, Section, render
from kit.analysis.sections import (  # noqa: F401 - importable from here as before
    cache_lines,
    cache_sections,
    crossover_sections,
    figure_sections,
    reliability_section,
)
from kit.analysis.summary import ORACLE_MODEL, counters_table, groups, summary_lines
from kit.errors import KitError
from kit.records.schema import OUTCOMES, STOP_REASONS, load_run

SCRIPTED_LABEL = "scripted model — pipeline validation, not a benchmark"
SIMULATED_LABEL = (
    "simulated records (kit.analysis.simulate): planted effects to test the analysis, not a benchmark"
)
ORACLE_LABEL = (
    "oracle profile — a pipeline check, not a benchmark: every role played the task's reference solution"
    " (kit/model/oracle.py); a run that is not solved points at the task or the pipeline, not a strategy"
)
EMBEDDED_LABEL = "embedded SmolLM2-135M — real but tiny model"
LOCAL_SERVER_LABEL = (
    "served on this machine: the models named were answered by a server at {bases}, not their provider"
    " (a fake or local server: its numbers are that server's)"
)
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
    if any(m.startswith("simulated/") for m in models):
        out.append(SIMULATED_LABEL)
    if ORACLE_MODEL in models:
        out.append(ORACLE_LABEL)
    elif any(m.startswith("scripted/") for m in models):
        out.append(SCRIPTED_LABEL)
    if any(m.startswith("embedded/") for m in models) or (
        not runs.empty and (runs["profile"] == "local").any()
    ):
        out.append(EMBEDDED_LABEL)
    else:
        out += _local_server_label(runs)
    return out


def _local_server_label(runs: pd.DataFrame) -> list[str]:
    """A run whose tiers' ``api_base`` is this machine (``--api-base http://127.0.0.1:PORT``): the
    provider's model names are on it, but a fake or local server answered."""
    if runs.empty or "api_bases" not in runs:
        return []
    local = runs["api_bases"].map(lambda bs: [b for b in bs.split(",") if b and on_this_machine(b)])
    bases = sorted({b for bs in local for b in bs})
    if not bases:
        return []
    n = int(local.map(bool).sum())
    return [f"{LOCAL_SERVER_LABEL.format(bases=', '.join(bases))} ({n} of {len(runs)} runs)"]


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


#: Outcomes after which a run may or may not have met its requirements: the outcome line says how many
#: of them were solved (``2 done (0 solved)``: the strategy said done, the hidden tests disagree).
SOLVABLE = ("done", "capped", "incomplete", "budget")


def outcome_words(runs: pd.DataFrame, counts: pd.Series) -> str:
    """``2 done (0 solved), 1 error``: each outcome's runs, and how many of them were solved."""
    scored = runs[runs["scored"].astype(bool)] if "scored" in runs else runs
    solved = scored.groupby("outcome")["solved"].sum() if "solved" in scored else pd.Series(dtype=float)
    return ", ".join(
        f"{n} {o}" + (f" ({int(solved.get(o, 0))} solved)" if o in SOLVABLE else "")
        for o, n in counts.items()
        if n
    )


def describe(records: Records, shared: bool = False) -> str:
    """A few lines: what was loaded (the results folder, its runs, tasks, strategies, profiles and
    sandboxes), what was skipped, and the caveats. ``shared`` (a report meant to be sent: markdown,
    HTML): the results folder by its name, not by an absolute path that carries the user's home."""
    runs = records.runs
    where = Path(records.root).name if shared else records.root
    if runs.empty:
        lines = [f"{where}: no complete runs"]
    else:
        boxes = runs["sandbox"].value_counts() if "sandbox" in runs else pd.Series(dtype=int)
        sandboxes = ", ".join(f"{b} ({n} runs)" if len(boxes) > 1 else str(b) for b, n in boxes.items())
        lines = [
            f"{where}: {len(runs)} complete runs; tasks: {', '.join(sorted(set(runs['task'])))}; "
            f"strategies: {', '.join(sorted(set(runs['strategy'])))}; "
            f"profiles: {', '.join(sorted(set(runs['profile'])))}"
            + (f"; sandbox: {sandboxes}" if sandboxes else "")
        ]
    if not runs.empty:
        counts = (
            outcome_table(records, by=("profile",)).drop(columns=["runs", "scored", "stop_reasons"]).sum()
        )
        lines.append("outcomes: " + outcome_words(runs, counts))
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


def summary_section(records: Records, shared: bool = False) -> Section:
    """The first screen: what was loaded and its caveats, then who won in plain words (``shared``:
    :func:`describe`'s)."""
    lines = describe(records, shared).splitlines()
    summary = summary_lines(records)
    return Section("", [*lines, *([""] + summary if summary else [])])


def report_sections(records: Records, figures: bool = False, shared: bool = False) -> list[Section]:
    """The report, section by section (the summary first); with ``figures`` the sections carry the
    figures the notebooks draw (for the HTML report)."""
    head = summary_section(records, shared)
    if records.runs.empty:
        return [head]
    by = groups(records)
    fairness = fairness_lines(records)
    sections = [
        head,
        Section(fairness[0], fairness[1:]),
        Section("Runs by outcome", table=outcome_table(records, by=by), after=outcome_legend(records)),
        Section(
            "Per strategy (means per run; ± = 95 % t-interval over the repeats of one task, [lo, hi] = 95 % "
            "Wilson interval of the solved rate; none for rows that span tasks; solved = no critical/major "
            "requirement failed; failed share = requirements failed / total; done✗ = claimed done but failed)",
            [
                "Scores and defects are means over the scored runs only: errored and interrupted runs are "
                "excluded (the `scored` column counts them); unscored runs count as every requirement failed."
            ],
            table=format_strategy_table(strategy_table(records, by=by)),
        ),
        Section(
            "How large the context got (per strategy × task: prompt tokens of a call, median and largest; "
            "context trims and distinct files read per run; cost per run; failed share and defects over the "
            "scored runs)",
            table=format_context(context_table(records)),
        ),
    ]
    sections.append(reliability_section(records))
    sections += crossover_sections(records, figures=figures)
    counters = counters_table(records)
    if not counters.empty:
        sections.append(
            Section(
                "Loop counters per strategy (from run.json counters; numbers: mean/min/max per run)",
                table=format_counters(counters),
            )
        )
    errors = error_runs(records)
    if not errors.empty:
        sections.append(
            Section(
                f"Errors ({len(errors)} run(s); full messages in run.json; rerun them with "
                "`python -m kit run EXPERIMENT --retry-errors`)",
                format_errors(errors).splitlines(),
            )
        )
    sections.append(
        Section(
            "Per role × tier (sums over all runs; share = of the strategy's cost)",
            table=format_role_tier_table(role_tier_table(records)),
        )
    )
    check = role_tier_table(records, phase="CHECK")
    if not check.empty:  # pdca's CHECK: re-run, scout, auditor, their hand-offs and status lines
        sections.append(
            Section(
                "Of which in pdca's CHECK phase, per role × tier (share = of the strategy's cost)",
                table=format_role_tier_table(check),
            )
        )
    sections += cache_sections(records)
    if figures:
        sections += figure_sections(records)
    return sections


def report(
    results_dir: str | Path,
    fmt: str = "text",
    width: int | None = None,
    summary_only: bool = False,
    summary_last: bool = False,
) -> str:
    """``python -m kit report``: the report as ``fmt`` (text, markdown or html), text fitted to
    ``width``; ``summary_only``: the first screen only; ``summary_last``: the summary after the
    tables (``kit run``'s ending, where the eyes are)."""
    if fmt not in FORMATS:
        raise KitError(f"unknown report format {fmt!r}", f"pick one of: {', '.join(FORMATS)}")
    records = load(results_dir)
    shared = fmt != "text"  # markdown and HTML are made to be sent: no absolute path in them
    sections = (
        [summary_section(records, shared)]
        if summary_only
        else report_sections(records, figures=fmt == "html", shared=shared)
    )
    if summary_last and len(sections) > 1:
        sections = [*sections[1:], Section("", ["=" * 40, *sections[0].lines])]
    title = f"orchbench report: {Path(results_dir).name}"
    return render(sections, fmt, title, width)


def report_text(results_dir: str | Path, width: int | None = None) -> str:
    """The report as plain text (``python -m kit report``), fitted to ``width`` when given."""
    return report(results_dir, "text", width)
