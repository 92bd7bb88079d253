"""How large the context got, per strategy x task, beside cost and defects (the report and notebook 01).

Read from the records only:

* prompt tokens per call -- a call's whole prompt as the provider counted it (uncached input + cache
  read + cache write), over its successful attempts: the median and the largest;
* context trims -- the agent loop's ``note`` events ``context_trimmed`` (old tool outputs shortened so
  the prompt fits the window);
* files read -- distinct paths a ``read_file`` tool call read without error, per run (``events.jsonl``:
  the tool event's detail names the path).

Means per run for the counts, so a strategy run three times is not three times as large.
"""

from __future__ import annotations

import ast
import math
import re

import pandas as pd

from kit.analysis.load import Records

COLUMNS = (
    "runs",
    "calls",
    "prompt_median",
    "prompt_max",
    "trims",
    "files_read",
    "cost_usd",
    "failed_share",
    "defects_total",
)
_PATH = re.compile(r"""\bpath=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def read_path(detail: str) -> str | None:
    """The path a ``read_file`` event's detail names (``path='src/a.py', start=1``), or None."""
    found = _PATH.search(str(detail or ""))
    if not found:
        return None
    try:
        value = ast.literal_eval(found.group(1))
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def _files_read(events: pd.DataFrame) -> pd.Series:
    """Per run_key, the distinct paths read without error (0 for runs with none)."""
    if events.empty:
        return pd.Series(dtype=float)
    reads = events[(events["kind"] == "tool") & (events["name"] == "read_file") & events["ok"].astype(bool)]
    paths = reads["detail"].map(read_path)
    return reads.assign(_path=paths).dropna(subset=["_path"]).groupby("run_key")["_path"].nunique()


def _trims(events: pd.DataFrame) -> pd.Series:
    if events.empty:
        return pd.Series(dtype=float)
    trimmed = events[(events["kind"] == "note") & (events["name"] == "context_trimmed")]
    return trimmed.groupby("run_key").size()


def context_table(records: Records) -> pd.DataFrame:
    """One row per (strategy, task): runs, calls per run, the median and the largest prompt of a call
    (tokens), context trims and distinct files read per run, then cost per run and the failed share and
    defects over the scored runs (:data:`COLUMNS`)."""
    runs, calls, events = records.runs, records.calls, records.events
    index = pd.MultiIndex.from_tuples([], names=["strategy", "task"])
    if runs.empty:
        return pd.DataFrame(columns=list(COLUMNS), index=index)
    ok = calls[calls["ok"].astype(bool)] if not calls.empty else calls
    prompt = (
        (ok["input_uncached"] + ok["cache_read"] + ok["cache_write"])
        if not ok.empty
        else pd.Series(dtype=float)
    )
    trims, files = _trims(events), _files_read(events)
    rows = {}
    for key, g in runs.groupby(["strategy", "task"], sort=True):
        keys = set(g["run_key"])
        mine = prompt[ok["run_key"].isin(keys)] if not ok.empty else prompt
        scored = g[g["scored"].astype(bool)]
        rows[key] = {
            "runs": len(g),
            "calls": g["calls"].mean(),
            "prompt_median": float(mine.median()) if len(mine) else math.nan,
            "prompt_max": float(mine.max()) if len(mine) else math.nan,
            "trims": float(sum(trims.get(k, 0) for k in keys)) / len(g),
            "files_read": float(sum(files.get(k, 0) for k in keys)) / len(g),
            "cost_usd": g["cost_usd"].mean(),
            "failed_share": scored["failed_share"].mean() if len(scored) else math.nan,
            "defects_total": scored["defects_total"].mean() if len(scored) else math.nan,
        }
    table = pd.DataFrame.from_dict(rows, orient="index")[list(COLUMNS)]
    table.index = pd.MultiIndex.from_tuples(table.index, names=["strategy", "task"])
    return table


def format_context(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`context_table` as readable strings."""

    def tokens(v: float) -> str:
        if pd.isna(v):
            return "-"
        return f"{v / 1000:.1f}k" if v >= 1000 else f"{v:.0f}"

    out = pd.DataFrame(index=table.index)
    out["runs"] = table["runs"].map("{:.0f}".format)
    out["calls/run"] = table["calls"].map("{:.1f}".format)
    out["prompt median"] = table["prompt_median"].map(tokens)
    out["prompt max"] = table["prompt_max"].map(tokens)
    out["trims/run"] = table["trims"].map("{:.1f}".format)
    out["files read/run"] = table["files_read"].map("{:.1f}".format)
    out["cost $/run"] = table["cost_usd"].map(lambda v: "-" if pd.isna(v) else f"{v:.4f}")
    out["failed share"] = table["failed_share"].map(lambda v: "-" if pd.isna(v) else f"{v:.0%}")
    out["defects"] = table["defects_total"].map(lambda v: "-" if pd.isna(v) else f"{v:.1f}")
    return out
