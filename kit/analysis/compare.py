"""Two results folders side by side (``python -m kit compare A B``, and the prompt lab): per strategy x
task the outcome, stop reason, solved, failed share, calls, tokens, cache-read share and cost of A and
of B with the change, then the diff of the prompts the two used.

The prompts: a run that kept its prompt texts (``runs/<id>/prompts/<strategy>/<role>.md``) is diffed
from those; otherwise from the results folder's ``experiment.yaml`` ``prompt_overrides``, where a role
without an override is shown as its ``kit/prompts/`` file as it is *now* (said in the diff's header).
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path

import pandas as pd
import yaml

from kit.analysis.load import Records, load
from kit.analysis.prices import TOKENS
from kit.analysis.report import describe
from kit.errors import KitError
from kit.paths import PROMPTS_DIR, results_root

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
    counts = values.fillna("-").astype(str).value_counts().sort_index()
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


# --------------------------------------------------------------------------- prompts


def run_prompts(folder: Path) -> dict[str, str] | None:
    """``<strategy>/<role>`` -> text from the runs' kept prompts (``runs/*/prompts/``), or None when
    no run kept them. The first run that has a prompt gives it (one experiment has one setting)."""
    found: dict[str, str] = {}
    for file in sorted(folder.glob("runs/*/prompts/**/*")):
        if file.is_file():
            key = "/".join(file.relative_to(folder).parts[3:]).removesuffix(".md")
            found.setdefault(key, file.read_text(encoding="utf-8", errors="replace"))
    return found or None


def _overrides(folder: Path) -> dict[str, str]:
    try:
        spec = yaml.safe_load((folder / "experiment.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    overrides = spec.get("prompt_overrides") if isinstance(spec, dict) else None
    return {str(k): str(v) for k, v in (overrides or {}).items()}


def _file_text(key: str) -> str:
    path = PROMPTS_DIR / f"{key}.md"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def prompt_diff(a: Path, b: Path) -> str:
    """Unified diff of the prompts A and B used, one block per prompt that differs; the first line
    says where the texts came from."""
    kept = [run_prompts(a), run_prompts(b)]
    if kept[0] is not None and kept[1] is not None:
        source, texts = "prompts kept by the runs (runs/<id>/prompts/)", kept
    else:
        source = (
            "prompt_overrides of each experiment.yaml; a prompt without an override is its "
            "kit/prompts/ file as it is now (these runs did not keep their prompts)"
        )
        over = [_overrides(a), _overrides(b)]
        keys = set(over[0]) | set(over[1])
        texts = [{k: o.get(k, _file_text(k)) for k in keys} for o in over]
    blocks = []
    for key in sorted(set(texts[0]) | set(texts[1])):
        x, y = texts[0].get(key, ""), texts[1].get(key, "")
        if x != y:
            blocks += difflib.unified_diff(
                x.splitlines(), y.splitlines(), fromfile=f"A {key}", tofile=f"B {key}", lineterm=""
            )
    body = "\n".join(blocks) if blocks else "(the prompts are the same)"
    return f"Prompt diff (from {source})\n{body}"


def compare_text(a: str | Path, b: str | Path) -> str:
    """``python -m kit compare A B``: what each folder holds, the table, the prompt diff."""
    folders = [resolve(a), resolve(b)]
    records = [load(f) for f in folders]
    lines = []
    for label, rec in zip("AB", records, strict=True):
        lines += [f"{label}: " + describe(rec).replace("\n", f"\n{label}: ")]
    lines += [
        "",
        "Per strategy × task (means per run; solved and failed share over scored runs; "
        "cache-read share = cache reads / prompt tokens; change = B − A)",
        format_compare(compare_table(*records)).to_string(),
        "",
        prompt_diff(*folders),
    ]
    return "\n".join(lines) + "\n"
