"""The report's cache and figure sections (:mod:`kit.analysis.report` puts them after its tables):
cache busts per strategy x role x tier, the cache-read share per role, why a tier's cache figure is 0 %,
and -- in the HTML report -- the notebooks' figures, drawn by the same functions."""

from __future__ import annotations

import pandas as pd

from kit.analysis.formats import _tokens
from kit.analysis.load import Records
from kit.analysis.render import Section, render_text


def cache_sections(records: Records) -> list[Section]:
    """Cache busts per strategy × role × tier (and their dollars), the cache-read share per role (main
    agent vs sub-agents) and, in words, every tier whose cache figure is 0 % or missing."""
    from kit.analysis import busts as cache

    found = cache.cache_busts(records)
    title = (
        "Cache busts per strategy × role × tier (a call that wrote again or left uncached a prefix the "
        "previous call of its conversation had cached; $ = cost beyond a cache hit)"
    )
    if found.empty:
        out = [Section(title, ["  none"])]
    else:
        table = cache.bust_table(records, found)
        table["lost_tokens"] = table["lost_tokens"].map(_tokens)
        table["extra_usd"] = table["extra_usd"].map("{:.4f}".format)
        out = [Section(title, table=table)]
    share = cache.cache_read_share(records)
    share["read_share"] = share["read_share"].map(lambda v: "-" if pd.isna(v) else f"{v:.0%}")
    share["prompt_tokens"] = share["prompt_tokens"].map(_tokens)
    share["cache_read"] = share["cache_read"].map(_tokens)
    share["calls_per_conversation"] = share["calls_per_conversation"].map("{:.1f}".format)
    out.append(
        Section("Cache-read share per role (main = the strategy's longest conversations)", table=share)
    )
    notes = cache.cache_notes(records, busts=found)
    if notes:
        out.append(Section("Why a cache figure is 0 % or missing", [f"  {n}" for n in notes]))
    return out


def cache_lines(records: Records) -> list[str]:
    """:func:`cache_sections` as plain lines."""
    return render_text(cache_sections(records)).rstrip("\n").splitlines()


def figure_sections(records: Records) -> list[Section]:
    """The notebooks' figures (01: cost vs failed share, calls over time; 02: cost per tier; 04: the
    frontier), drawn by the same functions."""
    from kit.analysis import figures, verdict

    runs, calls = records.runs, records.calls
    out = [
        Section(
            "Figure: cost vs failed share per run",
            [
                "One point per scored run; colour = strategy, marker = task; runs left out are counted in the title."
            ],
            figure=lambda: figures.pareto_figure(runs),
        )
    ]
    if not calls.empty:
        out.append(Section("Figure: calls over time by role", figure=lambda: figures.timeline_figure(calls)))
        out.append(
            Section(
                "Figure: cost per tier by token bucket, per strategy",
                figure=lambda: figures.tier_cost_figure(calls),
            )
        )
    frontier = verdict.frontier_table(runs)
    kept = frontier.dropna(subset=["cost_usd", "failed_share"]) if not frontier.empty else frontier
    if not kept.empty:
        out.append(
            Section(
                "Figure: cost-quality frontier per task family",
                figure=lambda: figures.frontier_figure(kept, left_out=len(frontier) - len(kept)),
            )
        )
    return out


CROSSOVER_TITLE = (
    "Where a strategy starts paying off: solved rate and cost per solved task against task size, each "
    "strategy against {baseline}"
)


def crossover_sections(records: Records, figures: bool = False, measure: str = "code_lines") -> list[Section]:
    """The crossover (:mod:`kit.analysis.crossover`) in words and a table; with ``figures``, its figure."""
    from kit.analysis import crossover as cx

    result = cx.crossover(records.runs, measure=measure)
    table = cx.crossover_table(result) if result.crossings else None
    section = Section(
        CROSSOVER_TITLE.format(baseline=result.baseline),
        cx.crossover_lines(result),
        table=table,
        after=[
            "  A crossover is reported only when the gap between the two fitted curves changes across the sizes measured by "
            "more than chance (95 % interval of the change excludes 0); '< N' / '> N' in the table: the interval runs "
            "past the smallest / largest size measured, so the data cannot place that end. docs/analysis.md says what this cannot tell."
        ]
        if not result.status
        else [],
    )
    out = [section]
    if figures and not result.status:
        from kit.analysis.crossover_figures import crossover_figure

        out.append(Section("Figure: solved rate and cost per solved task against task size",
                           figure=lambda: crossover_figure(result)))  # fmt: skip
    return out


def reliability_section(records: Records) -> Section:
    """pass@k, pass^k, flip rate and cost CV per strategy (:mod:`kit.analysis.reliability`)."""
    from kit.analysis import reliability

    table = reliability.reliability_table(records.runs)
    return Section(
        reliability.RELIABILITY_TITLE,
        table=reliability.format_reliability(table) if not table.empty else None,
        after=reliability.reliability_lines(table),
    )
