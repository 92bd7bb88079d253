"""Who won, in plain words (the top of ``kit report`` and of notebook 01), and the strategies' loop
counters as recorded in run.json.

The summary leads with each strategy's solved and failed shares; runs that ended ``done`` (the
strategy's own success end) but were not solved are counted on a line of their own. Per strategy: how
many it solved (no critical or major requirement failed) of those scored, its mean failed share, its
runs and their outcomes, its cost per run -- point values over all its runs, with no interval, since runs
of different tasks are not repeats of one measurement. Then the *paired* verdict
(:func:`kit.analysis.verdict.compare`: same task, profile and repeat) against the best other strategy,
with its 95 % interval, or "no verdict" and why (too few pairs to trust an interval: none is shown;
or an interval that still includes 0) and the pairs it would need. The best strategy is the one with the
highest solved share, then the lowest failed share, then the lowest cost.
"""

from __future__ import annotations

import json

import pandas as pd

from kit.analysis import bootstrap, verdict
from kit.analysis.caveat import ORACLE_MODEL
from kit.analysis.load import OUTCOME_ORDER, Records
from kit.errors import KitError

RANKING = "highest solved share, then lowest failed share, then lowest cost per run"


def strategy_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per strategy: runs, tasks, scored, solved (count), solved_rate, failed_share (scored runs),
    cost_usd (mean per run over all runs), outcomes (``2 done, 1 capped``) and done_unsolved (runs
    that ended ``done`` -- the strategy's own success end -- yet a critical or major requirement
    failed), ordered best first (:data:`RANKING`)."""
    cols = [
        "runs",
        "tasks",
        "scored",
        "solved",
        "solved_rate",
        "failed_share",
        "cost_usd",
        "outcomes",
        "done_unsolved",
    ]
    if runs.empty:
        return pd.DataFrame(columns=cols, index=pd.Index([], name="strategy"))
    rows = {}
    for strategy, g in runs.groupby("strategy", sort=True):
        scored = g[g["scored"].astype(bool)]
        rows[strategy] = {
            "runs": len(g),
            "tasks": g["task"].nunique(),
            "scored": len(scored),
            "solved": int(scored["solved"].sum()),
            "solved_rate": scored["solved"].mean(),
            "failed_share": scored["failed_share"].mean(),
            "cost_usd": g["cost_usd"].mean(),
            "outcomes": outcome_counts(g["outcome"]) if "outcome" in g else "-",
            "done_unsolved": int(((scored["outcome"] == "done") & (scored["solved"] != 1.0)).sum())
            if "outcome" in scored
            else 0,
        }
    table = pd.DataFrame.from_dict(rows, orient="index")[cols]
    table.index.name = "strategy"
    key = pd.DataFrame(
        {
            "s": -table["solved_rate"].fillna(-1.0),
            "f": table["failed_share"].fillna(2.0),
            "c": table["cost_usd"].fillna(float("inf")),
        }
    )
    return table.loc[key.sort_values(["s", "f", "c"], kind="stable").index]


def outcome_counts(outcomes: pd.Series) -> str:
    """``2 done, 1 capped``: how often each outcome occurred, in the kit's order of outcomes."""
    counts = outcomes.value_counts()
    order = [o for o in OUTCOME_ORDER if o in counts.index] + sorted(
        o for o in counts.index if o not in OUTCOME_ORDER
    )
    return ", ".join(f"{int(counts[o])} {o}" for o in order)


def _share(value: float) -> str:
    return "-" if pd.isna(value) else f"{value:.0%}"


def _solved(row: pd.Series) -> str:
    if not row["scored"]:
        return f"0/0 (none scored of {int(row['runs'])})"
    return f"{int(row['solved'])}/{int(row['scored'])} ({row['solved_rate']:.0%})"


def shares_line(table: pd.DataFrame, tag: str = "") -> str:
    """The summary's first line: each strategy's solved and failed shares, best first (``tag``: what
    played the runs, when it was no model: a pipeline check)."""
    solved = ", ".join(f"{s} {_solved(row)}" for s, row in table.astype(object).iterrows())
    failed = ", ".join(f"{s} {_share(row['failed_share'])}" for s, row in table.astype(object).iterrows())
    return f"Summary{f' ({tag})' if tag else ''}: solved {solved}; failed share {failed}."


def pipeline_check(runs: pd.DataFrame) -> str:
    """What the headline says first when the oracle played the runs: a pipeline check (other scripted
    models' runs carry the report's scripted-model note)."""
    models = {m for ms in runs.get("models", pd.Series(dtype=str)) for m in str(ms).split(",") if m}
    if ORACLE_MODEL in models:
        return "pipeline check, not a benchmark: the oracle played each task's reference solution"
    return ""


def done_unsolved_line(table: pd.DataFrame) -> str | None:
    """Runs that ended ``done`` but were not solved, per strategy (None when there are none)."""
    bad = table[table["done_unsolved"] > 0]
    if bad.empty:
        return None
    parts = ", ".join(
        f"{s} {int(row['done_unsolved'])} of {int(row['runs'])} run(s)"
        for s, row in bad.astype(object).iterrows()
    )
    return f"  Ended `done` but NOT solved (a critical or major requirement failed): {parts}."


def _interval(metric: str, row: pd.Series) -> str:
    """The mean paired difference, and its interval only where it is evidence: with fewer than
    :data:`verdict.FEW_PAIRS` pairs a bootstrap interval is too narrow to mean anything (all equal
    differences even give a zero-width one), so none is shown -- :func:`_reading` says why."""
    unit, fmt, _ = verdict.FORMATS[metric]
    if pd.isna(row["lo"]) or int(row["pairs"]) < verdict.FEW_PAIRS:
        return f"{fmt(row['diff'])}{unit}"
    return f"{fmt(row['diff'])}{unit} [{fmt(row['lo'])}, {fmt(row['hi'])}]"


def _reading(row: pd.Series) -> str:
    """The verdict on one metric in words, with the pairs behind it and, without one, why."""
    pairs, state = int(row["pairs"]), row["verdict"]
    if state == verdict.DIFFERS:
        return f"differs ({pairs} paired runs)"
    if state == verdict.SAME:
        return f"no difference observed ({pairs} paired runs)"
    need = row["repeats_needed"]
    need_text = f"~{int(need)}" if need is not None and not pd.isna(need) else f"over {verdict.MAX_REPEATS}"
    if pairs < verdict.FEW_PAIRS:
        return (
            f"no verdict: {pairs} paired run(s), and a verdict needs at least {verdict.FEW_PAIRS} (fewer "
            f"give an interval too narrow to trust); need {need_text}"
        )
    return f"no verdict yet: the interval still includes 0 (have {pairs} paired runs, need {need_text})"


def paired_verdict(runs: pd.DataFrame, a: str, b: str) -> tuple[str, pd.DataFrame | None]:
    """``a`` against ``b`` on solved and cost, in words, and the comparison table (None if none)."""
    try:
        table = verdict.compare(runs, a, b, n_resamples=2000)
    except KitError as e:
        return f"vs {b}: cannot pair the runs ({e})", None
    if table.empty or "solved" not in table.index or table.loc["solved", "pairs"] == 0:
        return f"vs {b}: no paired runs (none on the same task and repeat)", table
    parts = [
        f"{_interval(m, table.loc[m])}: {_reading(table.loc[m])}"
        for m in ("solved", "cost_usd")
        if m in table.index and table.loc[m, "pairs"] > 0
    ]
    solved = table.loc["solved"]
    if not pd.isna(solved.get("mde")):
        parts.append(verdict.detectable_words(solved))
    return f"vs {b}: " + "; ".join(parts), table


def _headline(order: list[str], tables: dict[str, pd.DataFrame | None]) -> str:
    if len(order) < 2:
        return f"One strategy ({order[0]}): nothing to compare it with." if order else "No runs."
    best, runner = order[0], order[1]
    t = tables.get(best)
    if t is None or "solved" not in t.index or t.loc["solved", "pairs"] == 0:
        return f"No winner: {best} leads ({RANKING}), but it has no runs paired with {runner}'s."
    solved, cost = t.loc["solved"], t.loc["cost_usd"] if "cost_usd" in t.index else None
    if solved["verdict"] == verdict.DIFFERS and solved["diff"] > 0:
        return (f"Winner: {best}: it solved more runs than {runner}, {_interval('solved', solved)}, "
                f"{verdict.clusters_words(solved)}.")  # fmt: skip
    if (
        solved["verdict"] == verdict.SAME
        and cost is not None
        and cost["verdict"] == verdict.DIFFERS
        and cost["diff"] < 0
    ):
        return (f"Winner: {best}: it solved as many runs as {runner} and cost less, {_interval('cost_usd', cost)}, "
                f"{verdict.clusters_words(cost)}.")  # fmt: skip
    return (
        f"No winner yet: {best} leads on the numbers; its solved rate against {runner}'s: {_reading(solved)}."
    )


def summary_lines(records: Records) -> list[str]:
    """The plain-words summary: a headline, then one line per strategy (best first)."""
    runs = records.runs
    if runs.empty:
        return []
    if runs["experiment"].nunique() > 1:
        names = ", ".join(sorted(set(runs["experiment"])))
        return [
            f"Summary: this folder holds several experiments ({names}); runs of different settings are "
            "not paired: run `python -m kit report` on each experiment folder, or `python -m kit compare A B`."
        ]
    table = strategy_summary(runs)
    order = list(table.index)
    lines, tables = [], {}
    for strategy, row in table.astype(object).iterrows():
        other = order[0] if strategy != order[0] else (order[1] if len(order) > 1 else None)
        text = (
            f"  {strategy}: solved {_solved(row)}, failed share {_share(row['failed_share'])}; "
            f"{int(row['runs'])} runs on {int(row['tasks'])} task(s), outcomes: {row['outcomes']}; "
            f"${row['cost_usd']:.4f} per run"
        )
        if other is not None:
            words, tables[strategy] = paired_verdict(runs, strategy, other)
            text += f"; {words}"
        lines.append(text)
    unsolved = done_unsolved_line(table)
    head = [
        shares_line(table, pipeline_check(runs)),
        "  " + _headline(order, tables),
        *([unsolved] if unsolved else []),
        f"  (best first: {RANKING}; point values over all runs, no interval across tasks; "
        f"verdicts pair runs by task and repeat, 95 % bootstrap intervals {bootstrap.clustering_words(runs)})",
    ]
    return head + lines


def groups(records: Records) -> tuple[str, ...]:
    """How ``kit report`` groups its tables: by strategy, by task too when there are several (an
    interval is over the repeats of one task), by experiment too when there are several (two settings
    never share a row)."""
    runs = records.runs
    by: tuple[str, ...] = ("strategy",)
    if not runs.empty and runs["task"].nunique() > 1:
        by = ("task", *by)
    if not runs.empty and runs["experiment"].nunique() > 1:
        by = ("experiment", *by)
    return by


def counters_table(records: Records) -> pd.DataFrame:
    """Per (strategy, counter) from run.json ``counters``: runs that recorded it, and for numbers the
    mean, min and max per run; for other values (a stop reason, a list) how often each occurred. A
    counter that is a mapping (pdca's ``role_calls``, ``gate_rejections_by_gate``) is one row per key,
    ``role_calls.auditor`` -- a key a run did not record counts 0 there -- so no value is cut short."""
    runs = records.runs
    cols = ["runs", "mean", "min", "max", "values"]
    counter_cols = [c for c in runs.columns if c.startswith("counter_")] if not runs.empty else []
    rows = []
    for strategy, g in runs.groupby("strategy", sort=True) if counter_cols else []:
        for col in counter_cols:
            values = g[col].dropna()
            if not values.empty:
                rows += [(strategy, *row) for row in _counter_rows(col.removeprefix("counter_"), values)]
    table = pd.DataFrame(rows, columns=["strategy", "counter", *cols])
    return table.set_index(["strategy", "counter"])


def _counter_rows(name: str, values: pd.Series) -> list[tuple]:
    """(counter, runs, mean, min, max, values) rows of one counter over a strategy's runs."""
    parsed = values.map(_parse)
    if parsed.map(lambda v: isinstance(v, dict)).all() and parsed.map(bool).any():
        keys = sorted({k for d in parsed for k in d}, key=str)
        if all(isinstance(d.get(k), int | float) and not isinstance(d.get(k), bool) or k not in d
               for d in parsed for k in keys):  # fmt: skip
            parsed = parsed.map(lambda d: {k: d.get(k, 0) for k in keys})  # a count not recorded is 0
        return [
            row
            for k in keys
            for row in _counter_rows(f"{name}.{k}", parsed.map(lambda d, k=k: d.get(k)).dropna())
        ]
    numbers = pd.to_numeric(values, errors="coerce")
    if numbers.notna().all() and values.map(lambda v: not isinstance(v, bool | str)).all():
        return [(name, len(values), numbers.mean(), numbers.min(), numbers.max(), "")]
    counts = values.map(lambda v: v if isinstance(v, str) else json.dumps(v)).value_counts()
    text = ", ".join(f"{v} ×{n}" if n > 1 else str(v) for v, n in counts.sort_index().items())
    return [(name, len(values), None, None, None, text)]


def _parse(value: object) -> object:
    """A counter's value as recorded: the runs table keeps a mapping or list as JSON text."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
