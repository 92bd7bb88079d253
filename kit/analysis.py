"""Records -> pandas tables: per strategy, per role x tier, cache economics, re-pricing (the text report is kit.report).

Everything here reads only the run folders written by :mod:`kit.records` (``run.json``,
``calls.jsonl``, ``events.jsonl``), through its models. A run folder without ``run.json`` is an
incomplete run: it is listed in :attr:`Records.incomplete` and left out of every table.

Column conventions (one place, so notebooks and tests agree):

* ``runs``  -- one row per ``run.json``: identity (run_key = ``<experiment folder>/<run folder>``, unique
  under a results root; run_id, experiment, task, strategy, profile, repeat),
  outcome, times (wall_s, model_s, tool_s), ``calls``; the score flattened (requirements_total,
  tests_added, files_touched, ... , ``defects_critical`` / ``_major`` / ``_minor`` / ``defects_total``,
  ``claimed_done_but_failed``, ``tampered``, ``unscored`` -- both recorded as every requirement failed;
  ``scored`` (:func:`is_scored`) says whether the run counts in the score means: tampered and
  unscored runs do, errored and interrupted runs do not); loop counters as ``counter_<name>``; the usage totals under the
  token names of the call records (input_uncached, cache_read, cache_write, output, reasoning, cost_usd).
* ``calls`` -- one row per call attempt (every :class:`~kit.records.CallRecord` field but raw_usage),
  plus the run's identity columns, ``price_key`` (the tier's ``price`` or ``model`` in the run's
  profile), the four prices of that key in the run's price sheet (``price_input`` ... USD per 1M tokens,
  NaN when the sheet lacks the key) and ``t_s`` (seconds since the run started).
* ``events`` -- one row per event, plus identity columns and ``t_s``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ValidationError
from scipy import stats as scipy_stats

from kit import columnar
from kit.config import TIERS, PriceSheet, Profile, load_price_sheet, load_profile
from kit.errors import ConfigError, KitError
from kit.paths import REPO_ROOT
from kit.records import CALLS, EVENTS, SEVERITIES, CallRecord, EventRecord, RunRecord, load_run

TOKENS = ("input_uncached", "cache_read", "cache_write", "output")
BUCKETS = {  # token column -> (price column, cost column)
    "input_uncached": ("price_input", "cost_uncached"),
    "cache_read": ("price_cache_read", "cost_cache_read"),
    "cache_write": ("price_cache_write", "cost_cache_write"),
    "output": ("price_output", "cost_output"),
}
PRICE_COLUMNS = {  # price column -> ModelPrice field
    "price_input": "input",
    "price_output": "output",
    "price_cache_read": "cache_read",
    "price_cache_write": "cache_write",
}
RUN_IDENTITY = ("run_key", "run_id", "experiment", "task", "strategy", "profile", "repeat")


def repo_path(path: str | Path) -> Path:
    """``path`` as is when absolute, else relative to the repository root (notebooks run elsewhere)."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path


# --------------------------------------------------------------------------- loading


@dataclass
class Records:
    """The record files of one experiment folder (or of every experiment under a results root)."""

    root: Path
    runs: pd.DataFrame
    calls: pd.DataFrame
    events: pd.DataFrame
    incomplete: list[Path] = field(default_factory=list)
    price_sheets: dict[str, dict[str, Any]] = field(default_factory=dict)  # run_key -> PriceSheet dict
    profile_specs: dict[str, dict[str, Any]] = field(default_factory=dict)  # run_key -> Profile dict


def _experiments(root: Path) -> list[Path]:
    """Experiment folders of ``root``: itself when it has ``runs/``, else every ``*/runs`` under it."""
    if (root / "runs").is_dir():
        return [root]
    return sorted(p.parent for p in root.glob("*/runs") if p.is_dir())


def _run_dirs(exp: Path) -> list[str]:
    with os.scandir(exp / "runs") as entries:
        return sorted(e.path for e in entries if e.is_dir())


def _seconds(stamps: pd.Series) -> pd.Series:
    return pd.to_datetime(stamps, utc=True, errors="coerce", format="ISO8601")


def _price_key(profile_spec: dict[str, Any], tier: str, model: str) -> str:
    spec = (profile_spec.get("tiers") or {}).get(tier) or {}
    return spec.get("price") or spec.get("model") or model


def _run_key(run_dir: Path) -> str:
    """``<experiment folder>/<run folder>``: unique under a results root (run ids repeat across experiments)."""
    return f"{run_dir.parent.parent.name}/{run_dir.name}"


def _identity(run: RunRecord, run_dir: Path) -> dict[str, Any]:
    return {"run_key": _run_key(run_dir), **{k: getattr(run, k) for k in RUN_IDENTITY[1:]}}


def _run_row(run: RunRecord, run_dir: Path) -> dict[str, Any]:
    row = _identity(run, run_dir)
    row.update(
        outcome=run.outcome,
        claimed_done=run.claimed_done,
        error=run.error,
        started_at=run.started_at,
        wall_s=run.wall_s,
        model_s=run.model_s,
        tool_s=run.tool_s,
        calls=run.calls,
        price_sheet=run.price_sheet.get("name", ""),
        illustrative_prices=bool(run.price_sheet.get("illustrative", False)),
        models=",".join(sorted({t.get("model", "") for t in (run.profile_spec.get("tiers") or {}).values()})),
        scored=is_scored(run),
        sandbox=run.sandbox or "none",  # runs recorded before the field existed had no sandbox
    )
    score = run.score.model_dump() if run.score is not None else {}
    for name in (
        "requirements_total",
        "requirements_failed",
        "own_tests_total",
        "regressions",
        "tests_added",
        "files_touched",
        "lines_added",
        "lines_removed",
        "scoring_s",
    ):
        row[name] = score.get(name, math.nan)
    row["claimed_done_but_failed"] = bool(score.get("claimed_done_but_failed", False))
    row["tampered"] = bool(score.get("tampered", False))  # scored as every requirement failed
    row["unscored"] = bool(score.get("unscored_reason"))  # scoring failed: every requirement failed
    defects = score.get("defects") or {}
    for sev in SEVERITIES:
        row[f"defects_{sev}"] = defects.get(sev, 0) if score else math.nan
    row["defects_total"] = sum(defects.values()) if score else math.nan
    row.update(comparable_scores(score if row["scored"] else {}))  # NaN: left out of the means
    for name, value in run.counters.items():
        scalar = value is None or isinstance(value, bool | int | float | str)
        row[f"counter_{name}"] = value if scalar else json.dumps(value, default=str)
    totals = run.totals.model_dump()
    for name in (*TOKENS, "reasoning", "cost_usd"):
        row[name] = totals[name]
    row["run_dir"] = str(run_dir)
    return row


#: Outcomes whose score (if any) is not a measurement of the strategy: the run failed or was cut short.
UNSCORED_OUTCOMES = ("error", "interrupted")
#: The order outcomes are shown in; others follow alphabetically.
OUTCOME_ORDER = (
    "done",
    "pass",
    "all-pass",
    "converged-clean",
    "capped",
    "incomplete",
    "budget",
    "tampered",
    "unscored",
    "error",
    "interrupted",
)


def is_scored(run: RunRecord) -> bool:
    """Does this run count in the score and defect means? A tampered run does (its score fails every
    requirement), and so does a run the scorer could not score (``unscored``: issue 10's rule -- a
    scoring failure is a scored run with every requirement failed, never a run that silently drops
    out of the means; the report counts them and ``--retry-errors`` reruns them). An errored or
    interrupted run does not: it is counted apart."""
    if run.score is None:
        return False
    return run.outcome not in UNSCORED_OUTCOMES


def comparable_scores(score: Mapping[str, Any]) -> dict[str, Any]:
    """Scores comparable across tasks with different numbers of requirements, from a run's score dict:

    * ``failed_share`` -- requirements_failed / requirements_total (0 = all met, 1 = none);
    * ``failed_share_<severity>`` -- failed / total of that severity (NaN when the task has none, or
      the record predates per-severity totals);
    * ``solved`` -- 1.0 when no critical or major requirement failed, else 0.0;
    * ``all_passed`` -- 1.0 when no requirement failed at all;
    * ``baseline_broken`` -- acceptance tests that passed on the starting code and fail at the end.

    All NaN for an unscored run (no score): it is left out of the means, and counted by ``scored``.
    """
    out: dict[str, Any] = {"failed_share": math.nan, "solved": math.nan, "all_passed": math.nan}
    out |= {f"failed_share_{sev}": math.nan for sev in SEVERITIES}
    out["baseline_broken"] = math.nan
    if not score:
        return out
    total, failed = score.get("requirements_total", 0), score.get("requirements_failed", 0)
    defects = score.get("defects") or {}
    by_sev = score.get("requirements_by_severity") or {}
    out["failed_share"] = failed / total if total else math.nan
    for sev in SEVERITIES:
        n = by_sev.get(sev, 0)
        out[f"failed_share_{sev}"] = defects.get(sev, 0) / n if n else math.nan
    out["solved"] = float(defects.get("critical", 0) + defects.get("major", 0) == 0)
    out["all_passed"] = float(failed == 0)
    out["baseline_broken"] = len(score.get("baseline_broken") or [])
    return out


def load(results_dir: str | Path, missing_ok: bool = False) -> Records:
    """Read every complete run under ``results_dir`` (an experiment folder or a results root).

    Per experiment folder, the tables come from its cache (``.analysis/``, see
    :mod:`kit.columnar`) when that was built from exactly the run folders there now; otherwise calls
    and events are read from the runs' Parquet copies in one dataset scan (a copy missing or older
    than its JSONL is rebuilt from the JSONL first: the JSONL is the source of truth) and the cache
    is rewritten. A folder that does not exist is an error, or with ``missing_ok`` an empty
    :class:`Records`.
    """
    root = repo_path(results_dir)
    if not root.is_dir() and not missing_ok:
        raise KitError(f"no results folder {root}", "run an experiment first: python -m kit run <exp>")
    parts = [_load_experiment(exp) for exp in (_experiments(root) if root.is_dir() else [])]
    if len(parts) == 1:
        return dataclasses.replace(parts[0], root=root)
    frames = {}
    for name in ("runs", "calls", "events"):
        non_empty = [getattr(p, name) for p in parts if not getattr(p, name).empty]
        frames[name] = pd.concat(non_empty, ignore_index=True) if non_empty else getattr(_empty(root), name)
    return Records(
        root=root,
        **frames,
        incomplete=[d for p in parts for d in p.incomplete],
        price_sheets={k: v for p in parts for k, v in p.price_sheets.items()},
        profile_specs={k: v for p in parts for k, v in p.profile_specs.items()},
    )


_TABLES = ["runs", "calls", "events"]


def _empty(root: Path) -> Records:
    return _build(root, [], [])


def _load_experiment(exp: Path) -> Records:
    """One experiment folder, from its cache when that is current, else built and cached."""
    signatures, incomplete = {}, []
    for d in _run_dirs(exp):
        sig = columnar.signature(d)
        if sig is None:
            incomplete.append(Path(d))
        else:
            signatures[os.path.basename(d)] = sig
    expect = {
        "schema": columnar.schema_version(),
        "experiment": str(exp.resolve()),  # run_key and run_dir depend on it
        "runs": signatures,
        "incomplete": [d.name for d in incomplete],
    }
    if signatures:
        cached = columnar.read_cache(exp, expect, _TABLES)
        if cached is not None:
            manifest, frames = cached
            return Records(exp, **frames, incomplete=incomplete, **_dicts(manifest, frames["runs"]))
    built = _build(exp, [exp / "runs" / name for name in signatures], incomplete)
    if not signatures or len(built.runs) != len(signatures):  # none, or an unreadable run.json: no cache
        return built
    keys = built.runs["run_key"].tolist()
    sheet_of, sheets = _intern([built.price_sheets[k] for k in keys])
    spec_of, specs = _intern([built.profile_specs[k] for k in keys])
    manifest = {
        **expect,
        "sheets": list(sheets),
        "specs": list(specs),
        "sheet_of": sheet_of.tolist(),
        "spec_of": spec_of.tolist(),
    }
    frames = {name: getattr(built, name) for name in _TABLES}
    if columnar.write_cache(exp, manifest, frames):
        cached = columnar.read_cache(exp, expect, _TABLES)  # the same frames either way, to the dtype
        if cached is not None:
            return Records(exp, **cached[1], incomplete=incomplete, **_dicts(cached[0], cached[1]["runs"]))
    return built


def _dicts(manifest: dict[str, Any], runs: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    keys = runs["run_key"].tolist()
    sheets, specs = manifest["sheets"], manifest["specs"]
    return {
        "price_sheets": {k: sheets[i] for k, i in zip(keys, manifest["sheet_of"], strict=True)},
        "profile_specs": {k: specs[i] for k, i in zip(keys, manifest["spec_of"], strict=True)},
    }


def _build(root: Path, run_dirs: list[Path], incomplete: list[Path]) -> Records:
    """The tables of ``run_dirs`` (each with a run.json), read from the run folders."""
    runs, done = [], []
    sheets: dict[str, dict[str, Any]] = {}
    specs: dict[str, dict[str, Any]] = {}
    for run_dir in run_dirs:
        run = load_run(run_dir)
        if run is None:  # removed since it was listed
            incomplete.append(run_dir)
            continue
        runs.append(_run_row(run, run_dir))
        key = runs[-1]["run_key"]
        sheets[key], specs[key] = run.price_sheet, run.profile_spec
        done.append(run_dir)
    runs_df = pd.DataFrame(runs)
    calls = _log_frame(done, runs_df, CALLS, [f for f in CallRecord.model_fields if f != "raw_usage"])
    calls = _with_prices(calls, runs_df, sheets, specs)
    events = _log_frame(done, runs_df, EVENTS, list(EventRecord.model_fields))
    return Records(
        root=root,
        runs=runs_df,
        calls=_with_offsets(calls, "started_at", runs_df),
        events=_with_offsets(events, "at", runs_df),
        incomplete=incomplete,
        price_sheets=sheets,
        profile_specs=specs,
    )


def _log_frame(done: list[Path], runs: pd.DataFrame, log: str, fields: list[str]) -> pd.DataFrame:
    """The rows of ``log`` of every run in ``done`` (one Parquet dataset scan; rebuilt copies from
    memory), in run order then file order, with the identity columns of run.json and ``_run`` (the
    run's row in ``runs``)."""
    model = columnar.COPIES[log][1]
    files, file_runs, rebuilt = [], {}, []
    for i, run_dir in enumerate(done):
        table = columnar.ensure_parquet(run_dir, log)
        if table is None:
            path = run_dir / columnar.COPIES[log][0]
            files.append(path)
            file_runs[str(path)] = i
        else:
            table = columnar.fill_defaults(table.select(fields), model)
            rebuilt.append(table.append_column("_run", pa.array(np.full(table.num_rows, i, np.int32))))
    scanned = columnar.scan(files, model, fields)
    names = scanned.column(columnar.FILENAME).combine_chunks().dictionary_encode()
    index = np.array([file_runs[f] for f in names.dictionary.to_pylist()], dtype=np.int32)
    run_of_row = index[names.indices.to_numpy(zero_copy_only=False)] if len(index) else np.zeros(0, np.int32)
    scanned = scanned.drop_columns([columnar.FILENAME]).append_column("_run", pa.array(run_of_row))
    table = pa.concat_tables([scanned, *rebuilt]) if rebuilt else scanned
    order = table.column("_run").to_numpy()
    if len(order) > 1 and (np.diff(order) < 0).any():
        table = table.take(np.argsort(order, kind="stable"))
        order = table.column("_run").to_numpy()
    df = table.drop_columns(["_run"]).to_pandas()
    for name in RUN_IDENTITY:
        values = pa.array(runs[name].tolist()) if not runs.empty else pa.array([], pa.string())
        df[name] = values.take(pa.array(order)).to_pandas() if len(df) else pd.Series([], dtype=object)
    df["_run"] = order
    return df


def _tier_lookup(
    specs: Sequence[Mapping[str, Any]], tiers: Sequence[str], vocab: dict[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Per (profile, tier): the vocab id of the tier's model and of its price key (-1: no such tier)."""
    models = np.full((len(specs), len(tiers)), -1, dtype=np.int64)
    keys = models.copy()
    for s, spec in enumerate(specs):
        for t, tier in enumerate(tiers):
            entry = (spec.get("tiers") or {}).get(tier)
            if entry is None:
                continue
            model = entry.get("model") or ""
            models[s, t] = vocab.setdefault(model, len(vocab))
            keys[s, t] = vocab.setdefault(entry.get("price") or model, len(vocab))
    return models, keys


def _price_matrix(sheets: Sequence[Mapping[str, Any]], vocab: dict[str, int]) -> np.ndarray:
    """prices[sheet, key, column] (USD per 1M tokens, in PRICE_COLUMNS order; NaN: not in the sheet)."""
    out = np.full((len(sheets), len(vocab), len(PRICE_COLUMNS)), np.nan)
    for s, sheet in enumerate(sheets):
        for key, price in (sheet.get("prices") or {}).items():
            if key in vocab:
                out[s, vocab[key]] = [price.get(f, np.nan) for f in PRICE_COLUMNS.values()]
    return out


def _codes(values: pd.Series) -> tuple[np.ndarray, list[str]]:
    codes, uniques = pd.factorize(values)
    return codes, [str(u) for u in uniques]


def _with_prices(
    calls: pd.DataFrame,
    runs: pd.DataFrame,
    sheets: Mapping[str, Mapping[str, Any]],
    specs: Mapping[str, Mapping[str, Any]],
) -> pd.DataFrame:
    """Add ``price_key`` (the tier's key in the run's profile, else the model) and the four prices of
    that key in the run's price sheet -- vectorised over the rows, one lookup table per distinct profile
    and sheet."""
    keys = runs["run_key"].tolist() if not runs.empty else []
    spec_ids, spec_list = _intern([specs[k] for k in keys])
    sheet_ids, sheet_list = _intern([sheets[k] for k in keys])
    run = calls["_run"].to_numpy()
    tier_codes, tiers = _codes(calls["tier"])
    model_codes, models = _codes(calls["model"])
    vocab: dict[str, int] = {}
    _, tier_keys = _tier_lookup(spec_list, tiers, vocab)
    model_keys = np.array([vocab.setdefault(m, len(vocab)) for m in models], dtype=np.int64)
    key_ids = tier_keys[spec_ids[run], tier_codes] if len(calls) else np.zeros(0, np.int64)
    key_ids = np.where(key_ids >= 0, key_ids, model_keys[model_codes] if len(models) else key_ids)
    names = pa.array(list(vocab), pa.string())
    calls["price_key"] = (
        names.take(pa.array(key_ids)).to_pandas() if len(calls) else pd.Series([], dtype=object)
    )
    prices = _price_matrix(sheet_list, vocab)
    for j, col in enumerate(PRICE_COLUMNS):
        calls[col] = prices[sheet_ids[run], key_ids, j] if len(calls) else pd.Series([], dtype=float)
    return calls


def _instants(stamps: pd.Series) -> np.ndarray:
    """ISO 8601 stamps as datetime64[us] UTC (NaT where unparsable); Arrow's parser, pandas' as fallback."""
    try:
        parsed = pc.cast(pa.array(stamps, pa.string(), from_pandas=True), pa.timestamp("us", tz="UTC"))
        return parsed.to_numpy(zero_copy_only=False).astype("datetime64[us]")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _seconds(stamps).dt.tz_convert(None).to_numpy().astype("datetime64[us]")


def _with_offsets(df: pd.DataFrame, stamp: str, runs: pd.DataFrame) -> pd.DataFrame:
    """Add ``t_s``: seconds since the run started (run.json started_at, else its first record)."""
    run = df.pop("_run").to_numpy()
    if df.empty:
        return df.assign(t_s=pd.Series(dtype=float))
    at = _instants(df[stamp])
    start = _instants(runs["started_at"].astype(object).where(runs["started_at"] != "", None))[run]
    missing = np.isnat(start)
    if missing.any():
        first = pd.Series(at).groupby(run).transform("min").to_numpy().astype("datetime64[us]")
        start = np.where(missing, first, start)
    seconds = (at - start).astype("timedelta64[us]").astype(np.int64) / 1e6
    return df.assign(t_s=np.where(np.isnat(at) | np.isnat(start), np.nan, seconds))


def _intern(dicts: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, list[Mapping[str, Any]]]:
    """(index of each dict among the distinct ones, the distinct ones): runs share sheets and profiles."""
    distinct: list[Mapping[str, Any]] = []
    ids = np.empty(len(dicts), dtype=np.int32)
    for i, d in enumerate(dicts):
        if distinct and d == distinct[-1]:
            ids[i] = len(distinct) - 1
            continue
        for j, seen in enumerate(distinct):
            if d == seen:
                ids[i] = j
                break
        else:
            distinct.append(d)
            ids[i] = len(distinct) - 1
    return ids, distinct


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


# --------------------------------------------------------------------------- tables


def strategy_table(records: Records, by: Sequence[str] = ("strategy",)) -> pd.DataFrame:
    """One row per strategy (or per ``by`` group) over its repeats.

    It leads with the scores comparable across tasks (:func:`comparable_scores`): ``solved_rate``
    (share of scored runs with no critical or major failure) and ``failed_share`` (mean share of
    requirements failed), then the raw defect counts, which depend on how many requirements a task has;
    ``failed_share_<severity>`` (the share failed among the requirements of that severity) come last.
    All of these are means over the *scored* runs only (``excluded`` = the runs left out of them:
    error, interrupted, unscored -- see :func:`outcome_table` and :func:`is_scored`); time, calls,
    tokens and cost are means over all runs (that money was spent). ``runs``, ``scored``,
    ``excluded`` and ``claimed_done_but_failed`` are counts; ``*_ci95`` is the half-width of the 95 %
    t-interval of the mean over repeats (NaN with one run).
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
        "tests_added",
        "files_touched",
        "wall_s",
        "wall_s_ci95",
        "calls",
        *TOKENS,
        "cost_usd",
        "cost_usd_ci95",
        *[f"failed_share_{sev}" for sev in SEVERITIES],
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
        for name in ("tests_added", "files_touched", "wall_s", "calls", *TOKENS, "cost_usd"):
            row[name] = g[name].mean()
        for sev in SEVERITIES:
            row[f"failed_share_{sev}"] = scored[f"failed_share_{sev}"].mean()
        row["wall_s_ci95"] = ci95_halfwidth(g["wall_s"])
        row["cost_usd_ci95"] = ci95_halfwidth(g["cost_usd"])
        rows[key if len(by) > 1 else key[0]] = row
    table = pd.DataFrame.from_dict(rows, orient="index")[columns]
    table.index.names = list(by)
    return table


def outcome_table(records: Records, by: Sequence[str] = ("strategy",)) -> pd.DataFrame:
    """How many runs of each strategy (or ``by`` group) ended in each outcome, plus ``runs`` and
    ``scored`` (the runs the defect means are taken over)."""
    runs = records.runs
    if runs.empty:
        return pd.DataFrame(columns=["runs", "scored"], index=pd.Index([], name=by[0]))
    counts = runs.groupby([*by, "outcome"]).size().unstack("outcome", fill_value=0)
    order = [o for o in OUTCOME_ORDER if o in counts.columns]
    counts = counts[order + sorted(c for c in counts.columns if c not in order)]
    counts.columns.name = None
    grouped = runs.groupby(list(by))
    counts.insert(0, "runs", grouped.size())
    counts.insert(1, "scored", grouped["scored"].sum().astype(int))
    return counts


def error_runs(records: Records) -> pd.DataFrame:
    """The runs that ended in ``error``, with their message (run_key, task, strategy, repeat, error)."""
    cols = ["run_key", "task", "strategy", "repeat", "error"]
    runs = records.runs
    if runs.empty:
        return pd.DataFrame(columns=cols)
    bad = runs[runs["outcome"] == "error"]
    return bad[cols].fillna({"error": "(no message)"}).reset_index(drop=True)


def role_tier_table(records: Records) -> pd.DataFrame:
    """Per (strategy, role, tier), summed over all runs: calls, tokens, cost and its share of the strategy."""
    calls = records.calls
    cols = ["runs", "calls", "failed", *TOKENS, "cost_usd", "cost_share"]
    if calls.empty:
        return pd.DataFrame(
            columns=cols, index=pd.MultiIndex.from_tuples([], names=["strategy", "role", "tier"])
        )
    g = calls.groupby(["strategy", "role", "tier"], sort=True)
    table = g[list(TOKENS) + ["cost_usd"]].sum()
    table.insert(0, "runs", g["run_key"].nunique())
    table.insert(1, "calls", g.size())
    table.insert(2, "failed", g["ok"].apply(lambda s: int((~s.astype(bool)).sum())))
    strategy_cost = table.groupby(level="strategy")["cost_usd"].transform("sum")
    table["cost_share"] = (table["cost_usd"] / strategy_cost.where(strategy_cost > 0)).fillna(0.0)
    return table[cols]


def _order_tiers(index: pd.Index) -> list[str]:
    return [t for t in TIERS if t in index] + sorted(t for t in index if t not in TIERS)


def tier_cost_shares(records: Records, strategy: str | None = None) -> pd.Series:
    """Share (0..1) of the cost spent on each tier, over all runs or those of ``strategy``; empty if none."""
    calls = records.calls if strategy is None else records.calls[records.calls["strategy"] == strategy]
    cost = calls.groupby("tier")["cost_usd"].sum() if not calls.empty else pd.Series(dtype=float)
    cost = cost.reindex(_order_tiers(cost.index))
    total = cost.sum()
    return (cost / total if total > 0 else cost * math.nan).rename("share")


def runs_note(records: Records, strategy: str) -> str:
    """One line: how many runs of ``strategy`` there are to measure (or that there are none)."""
    n = int((records.runs["strategy"] == strategy).sum()) if not records.runs.empty else 0
    if n == 0:
        return f"no {strategy} runs in {records.root}: nothing measured to compare"
    return f"measured: {n} {strategy} run(s) in {records.root}"


def bucket_costs(calls: pd.DataFrame) -> pd.DataFrame:
    """``calls`` plus ``cost_uncached``, ``cost_cache_read``, ``cost_cache_write``, ``cost_output``.

    Each bucket is its tokens times the call's own price (``price_*`` columns, USD per 1M tokens).
    """
    out = calls.copy()
    for tokens, (price, cost) in BUCKETS.items():
        out[cost] = out[tokens].astype(float) * out[price].astype(float) / 1_000_000
    return out


def _conversation_key(calls: pd.DataFrame) -> pd.Series:
    conv = calls["conversation"].astype(object).where(calls["conversation"].notna(), calls["role"])
    return calls["run_key"].astype(str) + "/" + conv.astype(str)


def cache_economics(records: Records | pd.DataFrame) -> pd.DataFrame:
    """Per tier: what reading, writing, uncached input and output each cost, and warm vs cold turns.

    * ``hit_ratio`` -- cache_read / (input_uncached + cache_read + cache_write);
    * ``warm_turn_usd`` -- median cost of the calls that read from the cache (cache_read > 0);
    * ``cold_turn_usd`` -- median cost of the first call of each conversation (conversation id, else
      the role, within a run) when it read nothing from the cache: the turn that pays for the prompt;
    * ``cold_warm_ratio`` -- cold / warm (NaN when either is missing).
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
    ]
    if calls.empty:
        return pd.DataFrame(columns=cols, index=pd.Index([], name="tier"))
    c = bucket_costs(calls)
    c["_conv"] = _conversation_key(c)
    first = c.groupby("_conv")["seq"].transform("min") == c["seq"]
    cold = c[first & (c["cache_read"] == 0)].groupby("tier")["cost_usd"].median()
    warm = c[c["cache_read"] > 0].groupby("tier")["cost_usd"].median()
    g = c.groupby("tier")
    table = g[
        [*TOKENS, "cost_uncached", "cost_cache_read", "cost_cache_write", "cost_output", "cost_usd"]
    ].sum()
    table.insert(0, "calls", g.size())
    prompt = table["input_uncached"] + table["cache_read"] + table["cache_write"]
    table["hit_ratio"] = (table["cache_read"] / prompt.where(prompt > 0)).fillna(0.0)
    table["warm_turn_usd"] = warm.reindex(table.index)
    table["cold_turn_usd"] = cold.reindex(table.index)
    table["cold_warm_ratio"] = table["cold_turn_usd"] / table["warm_turn_usd"].where(
        table["warm_turn_usd"] > 0
    )
    return table.reindex(_order_tiers(table.index))[cols]


# --------------------------------------------------------------------------- re-pricing


def _validate(model: type[PriceSheet] | type[Profile], data: Mapping[str, Any], what: str) -> Any:
    try:
        return model.model_validate(dict(data))
    except ValidationError as e:
        raise ConfigError(
            f"not a usable {what}: {e.error_count()} problem(s), first: {e.errors()[0]['msg']}",
            f"runs record their {what} in run.json; pass one explicitly (a name under datasets/)",
        ) from None


def _as_sheet(price_sheet: PriceSheet | Mapping[str, Any] | str | Path) -> PriceSheet:
    if isinstance(price_sheet, PriceSheet):
        return price_sheet
    if isinstance(price_sheet, Mapping):
        return _validate(PriceSheet, price_sheet, "price sheet")
    return load_price_sheet(repo_path(price_sheet) if Path(price_sheet).suffix else price_sheet)


def _as_profile(profile: Profile | Mapping[str, Any] | str | Path) -> Profile:
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, Mapping):
        return _validate(Profile, profile, "profile")
    return load_profile(repo_path(profile) if Path(profile).suffix else profile)[0]


def _missing_keys(sheet: PriceSheet, keys: Sequence[str]) -> ConfigError:
    return ConfigError(
        f"price sheet {sheet.name!r} has no price for {', '.join(map(repr, sorted(set(keys))))}",
        f"add them to the sheet, or pass a profile whose tiers use keys from: {', '.join(sorted(sheet.prices))}",
    )


def _sheet_prices(sheet: PriceSheet, keys: Sequence[str]) -> np.ndarray:
    """prices[key, column] of ``keys`` under ``sheet`` (PRICE_COLUMNS order); a missing key is an error."""
    missing = [k for k in keys if k not in sheet.prices]
    if missing:
        raise _missing_keys(sheet, missing)
    rows = [[getattr(sheet.prices[k], f) for f in PRICE_COLUMNS.values()] for k in keys]
    return np.array(rows, dtype=float).reshape(len(keys), len(PRICE_COLUMNS))


def _strings(codes: np.ndarray, uniques: Sequence[str]) -> pd.Series:
    """A string column from codes into ``uniques`` (no per-row Python objects)."""
    return pa.array(list(uniques), pa.string()).take(pa.array(codes)).to_pandas()


def _cost(df: pd.DataFrame) -> pd.Series:
    # Same order of operations as kit.usage.price, so a re-pricing under the recorded sheet is exact.
    return (
        df["input_uncached"] * df["price_input"]
        + df["cache_read"] * df["price_cache_read"]
        + df["cache_write"] * df["price_cache_write"]
        + df["output"] * df["price_output"]
    ) / 1_000_000


def _repriced(calls: pd.DataFrame, keys: pd.Series | None, prices: np.ndarray) -> pd.DataFrame:
    """``calls`` with ``price_key`` = ``keys`` (unless None), the price columns = ``prices`` (rows x 4)
    and ``cost_usd`` recomputed from them (the cost before kept in ``cost_usd_recorded``)."""
    out = calls.copy(deep=False)
    if keys is not None:
        out["price_key"] = keys.to_numpy()
    for j, col in enumerate(PRICE_COLUMNS):
        out[col] = prices[:, j]
    if "cost_usd_recorded" not in out:
        out["cost_usd_recorded"] = out["cost_usd"]
    out["cost_usd"] = _cost(out)
    return out


def reprice(
    calls: pd.DataFrame,
    price_sheet: PriceSheet | Mapping[str, Any] | str | Path,
    profile: Profile | Mapping[str, Any] | str | Path | None = None,
) -> pd.DataFrame:
    """``calls`` with ``cost_usd`` recomputed from the recorded tokens under another price sheet.

    The price key of a call is its tier's key in ``profile`` when given, else the recorded
    ``price_key``. The cost before re-pricing is kept in ``cost_usd_recorded``. Vectorised: one price
    lookup per distinct key (or tier), then column arithmetic.
    """
    sheet = _as_sheet(price_sheet)
    if calls.empty:
        return calls.assign(cost_usd_recorded=calls["cost_usd"]) if "cost_usd" in calls else calls.copy()
    if profile is None:
        codes, uniques = _codes(calls["price_key"])
        keys = None
    else:
        prof = _as_profile(profile)
        tier_codes, tiers = _codes(calls["tier"])
        unknown = sorted(set(tiers) - set(prof.tiers))
        if unknown:
            raise ConfigError(f"profile {prof.name!r} has no tier {', '.join(unknown)}")
        key_of = [prof.tiers[t].price_key for t in tiers]
        uniques = list(dict.fromkeys(key_of))
        codes = np.array([uniques.index(k) for k in key_of], dtype=np.int64)[tier_codes]
        keys = _strings(codes, uniques)
    return _repriced(calls, keys, _sheet_prices(sheet, uniques)[codes])


def _move(
    calls: pd.DataFrame,
    roles: Mapping[str, str],
    group: np.ndarray,
    setups: Sequence[tuple[Profile, PriceSheet]],
) -> pd.DataFrame:
    """Move the calls of ``roles`` to their new tier under the (profile, sheet) of their ``group``
    (one entry per moved call): new tier, that tier's model, price key and prices; tokens unchanged."""
    moved = calls["role"].isin(list(roles)).to_numpy()
    out = calls.copy(deep=False)
    if "cost_usd_recorded" not in out:
        out["cost_usd_recorded"] = out["cost_usd"]
    if not moved.any():
        return out
    role_codes, moved_roles = _codes(calls.loc[moved, "role"])
    new_tiers = [roles[r] for r in moved_roles]
    combos, inverse = np.unique(group * len(new_tiers) + role_codes, return_inverse=True)
    tiers, models, keys, prices = [], [], [], []
    for c in combos:  # one lookup per (setup, role) pair, not per call
        (prof, sheet), tier = setups[c // len(new_tiers)], new_tiers[c % len(new_tiers)]
        if tier not in prof.tiers:
            raise ConfigError(
                f"profile {prof.name!r} has no tier {tier!r}", "pick a tier the profile defines"
            )
        tiers.append(tier)
        models.append(prof.tiers[tier].model)
        keys.append(prof.tiers[tier].price_key)
        prices.append(_sheet_prices(sheet, [keys[-1]])[0])
    part = calls.loc[moved].copy(deep=False)
    part["tier"] = _strings(inverse, tiers).to_numpy()
    part["model"] = _strings(inverse, models).to_numpy()
    part = _repriced(part, _strings(inverse, keys), np.array(prices)[inverse])
    for col in part.columns:
        column = out[col].copy()
        column.loc[moved] = part[col].to_numpy()
        out[col] = column
    return out


def reassign(
    calls: pd.DataFrame,
    roles: Mapping[str, str],
    profile: Profile | Mapping[str, Any] | str | Path,
    price_sheet: PriceSheet | Mapping[str, Any] | str | Path,
) -> pd.DataFrame:
    """What if ``role`` had run on another tier: that role's calls get the new tier, its model and its
    price (tokens unchanged); every other call is left exactly as recorded."""
    _check_tiers(roles)
    setup = (_as_profile(profile), _as_sheet(price_sheet))
    n = int(calls["role"].isin(list(roles)).sum()) if not calls.empty else 0
    return _move(calls, roles, np.zeros(n, dtype=np.int64), [setup])


def _check_tiers(roles: Mapping[str, str]) -> None:
    bad = {r: t for r, t in roles.items() if t not in TIERS}
    if bad:
        raise ConfigError(f"unknown tier(s) {bad}", f"pick one of {', '.join(TIERS)}")


def cost_before_after(before: pd.DataFrame, after: pd.DataFrame, by: str = "tier") -> pd.DataFrame:
    """Cost and tokens per ``by`` group before and after a re-pricing or reassignment, with a total row."""

    def sums(df: pd.DataFrame) -> pd.DataFrame:
        if df.empty:
            return pd.DataFrame(columns=["cost", "tokens"], dtype=float)
        tokens = df[list(TOKENS)].sum(axis=1)
        return pd.DataFrame({"cost": df["cost_usd"], "tokens": tokens, by: df[by]}).groupby(by).sum()

    b, a = sums(before), sums(after)
    index = _order_tiers(b.index.union(a.index)) if by == "tier" else sorted(b.index.union(a.index))
    table = pd.DataFrame(
        {
            "cost_before": b["cost"].reindex(index, fill_value=0.0),
            "cost_after": a["cost"].reindex(index, fill_value=0.0),
            "tokens_before": b["tokens"].reindex(index, fill_value=0).astype("int64"),
            "tokens_after": a["tokens"].reindex(index, fill_value=0).astype("int64"),
        },
        index=pd.Index(index, name=by),
    )
    table.loc["total"] = table.sum()
    table["delta_usd"] = table["cost_after"] - table["cost_before"]
    return table


@dataclass
class WhatIf:
    """A what-if on recorded calls: the table of totals before/after and one line saying what was done."""

    note: str
    table: pd.DataFrame
    calls: pd.DataFrame


def whatif_price_sheet(records: Records, price_sheet: PriceSheet | str | Path | None = None) -> WhatIf:
    """Re-price every call under ``price_sheet``; ``None`` re-prices under each run's own recorded sheet
    (a check: the after column must equal the before column), from the price columns that load took
    from those sheets."""
    calls = records.calls
    if calls.empty:
        return WhatIf(
            f"no calls in {records.root}: nothing to re-price", cost_before_after(calls, calls), calls
        )
    if price_sheet is not None:
        after = reprice(calls, price_sheet)
        note = f"re-priced {len(calls)} calls under price sheet {_as_sheet(price_sheet).name!r}"
    else:
        prices = calls[list(PRICE_COLUMNS)].to_numpy(dtype=float)
        lacking = np.isnan(prices).any(axis=1)
        if lacking.any():
            sheet = _as_sheet(records.price_sheets[calls.loc[lacking, "run_key"].iloc[0]])
            raise _missing_keys(sheet, calls.loc[lacking, "price_key"].astype(str).unique().tolist())
        after = _repriced(calls, None, prices)
        note = "re-priced under each run's recorded price sheet (price_sheet=None): after must equal before"
    return WhatIf(note, cost_before_after(calls, after), after)


def whatif_reassign(records: Records, roles: Mapping[str, str]) -> WhatIf:
    """Move ``roles`` (role -> tier) to other tiers, each run under its own recorded profile and sheet."""
    calls = records.calls
    present = sorted(set(roles) & set(calls["role"])) if not calls.empty else []
    if not present:
        note = f"no calls by role(s) {', '.join(roles)} in {records.root}: nothing to reassign"
        return WhatIf(note, cost_before_after(calls, calls), calls)
    _check_tiers(roles)
    moved = calls["role"].isin(present)
    run_codes, run_keys = _codes(calls.loc[moved, "run_key"])
    spec_of, specs = _intern([records.profile_specs[k] for k in run_keys])
    sheet_of, sheets = _intern([records.price_sheets[k] for k in run_keys])
    pairs, setup_of_run = np.unique(spec_of.astype(np.int64) * len(sheets) + sheet_of, return_inverse=True)
    setups = [(_as_profile(specs[p // len(sheets)]), _as_sheet(sheets[p % len(sheets)])) for p in pairs]
    after = _move(calls, {r: roles[r] for r in present}, setup_of_run[run_codes], setups)
    note = (
        f"moved {int(moved.sum())} calls of {', '.join(f'{r} -> {roles[r]}' for r in present)} "
        f"(tokens unchanged, priced at the new tier's recorded price)"
    )
    return WhatIf(note, cost_before_after(calls, after), after)
