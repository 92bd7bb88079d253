"""Two results folders side by side (``python -m kit compare A B [--strategies X,Y] [--tasks T]``, and
the prompt lab): per strategy x task the outcome, stop reason, solved, failed share, calls, tokens,
cache-read share and cost of A and of B with the change, then the diff of the prompts the two used.

By default only the strategy x task pairs both sides ran are compared (a pair only one side ran is
one line), the metrics that moved come first -- strategies whose settings changed before those whose
settings are identical on both sides (marked: their differences are run-to-run noise), then quality,
cost and effort -- each with its 95 % interval (:mod:`kit.analysis.compare_noise`), and the prompt
diff covers the strategies both ran.

The prompts: :mod:`kit.analysis.prompt_diff`.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from kit.analysis import compare_noise
from kit.analysis.load import Records, load
from kit.analysis.prices import TOKENS
from kit.analysis.prompt_diff import prompt_diff, run_prompts  # noqa: F401 - importable from here as before
from kit.analysis.report import describe
from kit.errors import KitError
from kit.paths import results_root
from kit.untrusted.terminal import visible

METRICS = (
    "runs",
    "outcome",
    "stop_reason",
    "solved",
    "failed_share",
    "calls",
    "tokens",
    "cache_read_share",
    "cost_usd",
)
TEXT_METRICS = ("outcome", "stop_reason")
PERCENT = ("solved", "failed_share", "cache_read_share")


def resolve(folder: str | Path) -> Path:
    """A results folder as given, or ``<results root>/<name>`` for an experiment name."""
    path = Path(folder).expanduser()
    for candidate in (path, results_root() / str(folder)):
        if candidate.is_dir():
            return candidate.resolve()
    raise KitError(
        f"no results folder {folder!r} (looked at {path} and {results_root() / str(folder)})",
        "give a results folder (results/NAME) or the name of an experiment that has run",
    )


def _counts(values: pd.Series) -> str:
    counts = values.fillna("-").astype(str).replace("", "-").value_counts().sort_index()
    return ", ".join(v if n == 1 else f"{v}×{n}" for v, n in counts.items())


def _stop_reasons(runs: pd.DataFrame) -> pd.Series:
    for column in ("stop_reason", "counter_stop_reason"):
        if column in runs:
            return runs[column]
    return pd.Series("-", index=runs.index)


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (strategy, task): the :data:`METRICS` (means per run; solved and failed share over
    the scored runs only; cache-read share = cache reads / all prompt tokens)."""
    rows = {}
    if runs.empty:
        return pd.DataFrame(
            columns=list(METRICS), index=pd.MultiIndex.from_tuples([], names=["strategy", "task"])
        )
    runs = runs.assign(_stop=_stop_reasons(runs))
    for key, g in runs.groupby(["strategy", "task"], sort=True):
        scored = g[g["scored"].astype(bool)]
        prompt = float(g[["input_uncached", "cache_read", "cache_write"]].sum().sum())
        rows[key] = {
            "runs": len(g),
            "outcome": _counts(g["outcome"]),
            "stop_reason": _counts(g["_stop"]),
            "solved": scored["solved"].mean() if len(scored) else math.nan,
            "failed_share": scored["failed_share"].mean() if len(scored) else math.nan,
            "calls": g["calls"].mean(),
            "tokens": g[list(TOKENS)].sum(axis=1).mean(),
            "cache_read_share": float(g["cache_read"].sum()) / prompt if prompt > 0 else math.nan,
            "cost_usd": g["cost_usd"].mean(),
        }
    table = pd.DataFrame.from_dict(rows, orient="index")[list(METRICS)]
    table.index.names = ["strategy", "task"]
    return table


def compare_table(a: Records | pd.DataFrame, b: Records | pd.DataFrame) -> pd.DataFrame:
    """Index (strategy, task, metric); columns A, B and change (B - A for numbers, "" for text; "-"
    where one side has no runs of that strategy and task)."""
    sides = [summary(x.runs if isinstance(x, Records) else x) for x in (a, b)]
    keys = sorted(set(sides[0].index) | set(sides[1].index))
    rows = []
    for strategy, task in keys:
        for metric in METRICS:
            va, vb = (s.loc[(strategy, task), metric] if (strategy, task) in s.index else None for s in sides)
            change = "" if metric in TEXT_METRICS or va is None or vb is None else float(vb) - float(va)
            rows.append((strategy, task, metric, va, vb, change))
    table = pd.DataFrame(rows, columns=["strategy", "task", "metric", "A", "B", "change"])
    return table.set_index(["strategy", "task", "metric"])


def _fmt(metric: str, value: object, signed: bool = False) -> str:
    if value is None or (isinstance(value, str) and value == ""):
        return "-" if not signed else ""
    if isinstance(value, str):
        return value
    v = float(value)
    if math.isnan(v):
        return "-"
    sign = "+" if signed else ""
    if metric in PERCENT:
        return f"{round(v * 100) + 0.0:{sign}.0f} pts" if signed else f"{v:.0%}"
    if metric == "cost_usd":
        digits = 4 if abs(v) >= 0.0001 or v == 0 else 6  # a change below $0.0001 still shows
        return f"{'-' if v < 0 else '+' if signed else ''}${abs(v):.{digits}f}"
    if metric in ("runs", "tokens"):
        return f"{v:{sign},.0f}"
    return f"{v:{sign},.1f}"


def format_compare(table: pd.DataFrame) -> pd.DataFrame:
    """The comparison as readable strings (shares in %, changes in points, cost in $)."""
    out = pd.DataFrame(index=table.index)
    metrics = table.index.get_level_values("metric")
    out["A"] = [_fmt(m, v) for m, v in zip(metrics, table["A"], strict=True)]
    out["B"] = [_fmt(m, v) for m, v in zip(metrics, table["B"], strict=True)]
    out["change"] = [_fmt(m, v, signed=True) for m, v in zip(metrics, table["change"], strict=True)]
    return out


def _format_changes(changed: pd.DataFrame) -> pd.DataFrame:
    """The changes view as strings: A, B, change, its 95 % interval and the strategy's settings mark."""
    out = format_compare(changed)
    metrics = changed.index.get_level_values("metric")
    out["95% interval"] = [
        "-" if pd.isna(lo) else f"[{_fmt(m, lo, signed=True)}, {_fmt(m, hi, signed=True)}]"
        for m, lo, hi in zip(metrics, changed["lo"], changed["hi"], strict=True)
    ]
    out["settings"] = list(changed["settings"])
    return out


#: The order of the changes view: what the change did to quality first, then to money and effort.
CHANGE_ORDER = (
    "solved",
    "failed_share",
    "outcome",
    "stop_reason",
    "cost_usd",
    "tokens",
    "calls",
    "cache_read_share",
    "runs",
)


def _changed(metric: str, a: object, b: object, change: object) -> bool:
    if metric in TEXT_METRICS:  # the same outcomes in other numbers of runs is no change
        return a is not None and b is not None and _names_of(a) != _names_of(b)
    if isinstance(change, str) or change is None:
        return False
    step = 0.005 if metric in PERCENT else 1e-12  # a share moved by less than half a point shows as +0
    return not math.isnan(float(change)) and abs(float(change)) >= step


def _names_of(counts: object) -> set[str]:
    """``done×2, capped`` -> {done, capped}."""
    return {part.strip().rsplit("×", 1)[0] for part in str(counts).split(", ")}


def changes_table(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`compare_table` whose value moved (a number changed, a text differs), quality
    metrics first (:data:`CHANGE_ORDER`), then per metric the largest change first."""
    rows = [
        (key, CHANGE_ORDER.index(key[2]) if key[2] in CHANGE_ORDER else len(CHANGE_ORDER),
         -abs(float(r["change"])) if not isinstance(r["change"], str) else 0.0)
        for key, r in table.iterrows()
        if _changed(key[2], r["A"], r["B"], r["change"])
    ]  # fmt: skip
    order = [key for key, _, _ in sorted(rows, key=lambda t: (t[1], t[2]))]
    return table.loc[order] if order else table.iloc[:0]


def _only_line(side: str, keys: list[tuple[str, str]], runs: pd.DataFrame) -> str:
    counts = runs.groupby(["strategy", "task"]).size() if not runs.empty else pd.Series(dtype=int)
    pairs = ", ".join(f"{s} × {t} ({int(counts.get((s, t), 0))} runs)" for s, t in keys)
    return f"only {side} ran: {pairs} (not compared)"


def _filtered(records: Records, strategies: list[str] | None, tasks: list[str] | None) -> pd.DataFrame:
    runs = records.runs
    if runs.empty:
        return runs
    if strategies:
        runs = runs[runs["strategy"].isin(strategies)]
    if tasks:
        runs = runs[runs["task"].isin(tasks)]
    return runs


def _check_names(records: list[Records], strategies: list[str] | None, tasks: list[str] | None) -> None:
    for name, wanted in (("strategy", strategies), ("task", tasks)):
        known = set().union(*(set(r.runs[name]) for r in records if not r.runs.empty))
        unknown = sorted(set(wanted or ()) - known)
        if unknown:
            raise KitError(
                f"--{name if name == 'task' else 'strategie'}s: neither side ran {', '.join(unknown)}",
                f"pick from: {', '.join(sorted(known)) or '(no runs)'}",
            )


def paired_lines(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Per strategy both sides ran: B - A on the same task and repeat (paired), with 95 % intervals from
    the cluster bootstrap (project, then task, then repeat) and the smallest solved difference the pair
    could detect (:func:`kit.analysis.verdict.compare`)."""
    from kit.analysis import verdict

    out = ["Paired B − A per strategy (same task and repeat; 95 % intervals, clusters as said)"]
    both = sorted(set(a["strategy"]) & set(b["strategy"])) if not a.empty and not b.empty else []
    for strategy in both:
        sides = [x[x["strategy"] == strategy].assign(strategy=label) for x, label in ((a, "A"), (b, "B"))]
        common = [c for c in sides[0].columns if c in sides[1].columns]
        runs = pd.concat([s[common] for s in sides], ignore_index=True)
        try:
            table = verdict.compare(runs, "B", "A", n_resamples=2000).rename_axis("metric").reset_index()
        except KitError as e:
            out.append(f"  {strategy}: cannot pair ({e})")
            continue
        [line] = verdict.verdict_lines(table.assign(a="B", b="A"))
        out.append(f"  {strategy}: " + line.removeprefix("B vs A: "))
    if not both:
        out.append("  (no strategy both sides ran)")
    return out


def reliability_lines(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """The reliability table (pass@k, pass^k, flip rate, cost CV) of each side."""
    from kit.analysis import reliability

    out = [reliability.RELIABILITY_TITLE]
    for label, runs in (("A", a), ("B", b)):
        table = reliability.reliability_table(runs)
        if table.empty:
            out.append(f"{label}: no runs")
            continue
        shown = reliability.format_reliability(table)
        shown.index = [f"{label}: {s}" for s in shown.index]
        out += [shown.to_string(), *reliability.reliability_lines(table)]
    return out


def compare_text(
    a: str | Path,
    b: str | Path,
    strategies: list[str] | None = None,
    tasks: list[str] | None = None,
    every_pair: bool = False,
) -> str:
    """``python -m kit compare A B``: what each folder holds; what only one side ran, in a line each;
    the metrics that changed (quality first); the table of the pairs both ran; the prompt diff of the
    strategies both ran. ``strategies`` / ``tasks`` narrow both sides; ``every_pair`` shows the pairs
    only one side ran in the table too."""
    folders = [resolve(a), resolve(b)]
    records = [load(f) for f in folders]
    _check_names(records, strategies, tasks)
    runs = [_filtered(r, strategies, tasks) for r in records]
    sides = [
        set(map(tuple, r[["strategy", "task"]].drop_duplicates().to_numpy())) if not r.empty else set()
        for r in runs
    ]
    both = sides[0] & sides[1]
    lines = []
    for label, rec in zip("AB", records, strict=True):
        lines += [f"{label}: " + describe(rec).replace("\n", f"\n{label}: ")]
    if strategies or tasks:
        lines.append(
            f"compared: strategies {', '.join(strategies or ['all'])}; tasks {', '.join(tasks or ['all'])}"
        )
    for side, mine, other, r in (("A", sides[0], sides[1], runs[0]), ("B", sides[1], sides[0], runs[1])):
        only = sorted(mine - other)
        if only:
            lines.append(_only_line(side, only, r))
    keep = (
        (lambda df: df)
        if every_pair
        else (
            lambda df: (
                df[[k in both for k in zip(df["strategy"], df["task"], strict=True)]] if not df.empty else df
            )
        )
    )
    table = compare_table(keep(runs[0]), keep(runs[1]))
    changed, settings = compare_noise.annotate(changes_table(table), keep(runs[0]), keep(runs[1]))
    lines += [
        "",
        "What changed (B − A; strategies whose settings changed first, then quality, cost and effort; "
        "means per run, with the 95 % interval of each difference)",
        *settings,
    ]
    lines.append(
        _format_changes(changed).to_string() if not changed.empty else "  nothing: every metric is the same"
    )
    lines += [
        "",
        "Per strategy × task (means per run; solved and failed share over scored runs; "
        "cache-read share = cache reads / prompt tokens; change = B − A)",
        format_compare(table).to_string() if not table.empty else "  (no strategy × task both sides ran)",
        "",
        *paired_lines(keep(runs[0]), keep(runs[1])),
        "",
        *reliability_lines(keep(runs[0]), keep(runs[1])),
        "",
        prompt_diff(*folders, strategies={s for s, _ in both} if not every_pair else None),
    ]
    return visible("\n".join(lines), lines=True) + "\n"  # (a record's text escaped: kit.untrusted.terminal)
