"""Loading: the run folders of an experiment (or a results root) -> :class:`Records` (runs, calls, events).

The row building and the Parquet / cache loading (:mod:`kit.records.parquet`, :mod:`kit.analysis.cache`);
the price columns of the calls come from :mod:`kit.analysis.prices`. The columns are documented in
:mod:`kit.analysis`, which re-exports every public name here.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kit.analysis import cache
from kit.analysis.prices import TOKENS, intern_dicts, with_prices
from kit.errors import KitError
from kit.paths import REPO_ROOT
from kit.records import parquet
from kit.records.schema import (
    CALLS,
    EVENTS,
    OUTCOMES,
    SEVERITIES,
    CallRecord,
    EventRecord,
    RunRecord,
    load_run,
    normalise_outcome,
)

RUN_IDENTITY = ("run_key", "run_id", "experiment", "task", "strategy", "profile", "repeat")


def repo_path(path: str | Path) -> Path:
    """``path`` as is when absolute, else relative to the repository root (notebooks run elsewhere)."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path


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
    # the one outcome vocabulary; older records: stop reason from the counters, old success words -> done
    outcome, stop_reason = normalise_outcome(
        run.strategy, run.outcome, run.stop_reason or str(run.counters.get("stop_reason") or "")
    )
    row.update(
        outcome=outcome,
        stop_reason=stop_reason,
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
        api_bases=",".join(
            sorted({t.get("api_base") or "" for t in (run.profile_spec.get("tiers") or {}).values()} - {""})
        ),
        scored=is_scored(run),
        sandbox=run.sandbox or "none",  # runs recorded before the field existed had no sandbox
        project=run.project or "",  # '' = the task is its own cluster
    )
    row.update(size_columns(run))
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
        "requirements_gamed",
        "requirements_unguarded",
        "requirements_sealed",
    ):
        row[name] = score.get(name, math.nan)
    row["claimed_done_but_failed"] = bool(score.get("claimed_done_but_failed", False))
    row["tampered"] = bool(score.get("tampered", False))  # scored as every requirement failed
    row["unscored"] = bool(score.get("unscored_reason"))  # scoring failed: every requirement failed
    row["suspicious"] = bool(score.get("suspicious", False))  # introspection seen; not re-scored
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


#: The task size measures a record carries (kit.records.schema.TaskSize), as ``size_<name>`` columns.
SIZE_MEASURES = ("code_lines", "files", "hidden_tests", "base_code_lines", "prompt_tokens")


def size_columns(run: RunRecord) -> dict[str, Any]:
    """``size_<measure>`` for each :data:`SIZE_MEASURES` (NaN where not measured, or the record predates
    sizes) and ``size_long`` (None when unknown)."""
    size = run.task_size
    out: dict[str, Any] = {f"size_{m}": math.nan for m in SIZE_MEASURES}
    out["size_long"] = None
    if size is not None:
        for m in SIZE_MEASURES:
            value = getattr(size, m)
            out[f"size_{m}"] = float(value) if value is not None else math.nan
        out["size_long"] = bool(size.long)
    return out


#: Outcomes whose score (if any) is not a measurement of the strategy: the run failed or was cut short.
UNSCORED_OUTCOMES = ("error", "interrupted")
#: The order outcomes are shown in (the one vocabulary, kit.records.schema.OUTCOMES); others follow
#: alphabetically.
OUTCOME_ORDER = tuple(OUTCOMES)


def is_scored(run: RunRecord) -> bool:
    """Does this run count in the score and defect means? A tampered run does (its score fails every
    requirement), and so does a run the scorer could not score (``unscored``: a
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
    :mod:`kit.records.parquet`, :mod:`kit.analysis.cache`) when that was built from exactly the run folders there now; otherwise calls
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
        sig = cache.signature(d)
        if sig is None:
            incomplete.append(Path(d))
        else:
            signatures[os.path.basename(d)] = sig
    expect = {
        "schema": cache.schema_version(),
        "experiment": str(exp.resolve()),  # run_key and run_dir depend on it
        "runs": signatures,
        "incomplete": [d.name for d in incomplete],
    }
    if signatures:
        cached = cache.read_cache(exp, expect, _TABLES)
        if cached is not None:
            manifest, frames = cached
            return Records(exp, **frames, incomplete=incomplete, **_dicts(manifest, frames["runs"]))
    built = _build(exp, [exp / "runs" / name for name in signatures], incomplete)
    if not signatures or len(built.runs) != len(signatures):  # none, or an unreadable run.json: no cache
        return built
    keys = built.runs["run_key"].tolist()
    sheet_of, sheets = intern_dicts([built.price_sheets[k] for k in keys])
    spec_of, specs = intern_dicts([built.profile_specs[k] for k in keys])
    manifest = {
        **expect,
        "sheets": list(sheets),
        "specs": list(specs),
        "sheet_of": sheet_of.tolist(),
        "spec_of": spec_of.tolist(),
    }
    frames = {name: getattr(built, name) for name in _TABLES}
    if cache.write_cache(exp, manifest, frames):
        cached = cache.read_cache(exp, expect, _TABLES)  # the same frames either way, to the dtype
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
    calls = with_prices(calls, runs_df, sheets, specs)
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
    model = parquet.COPIES[log][1]
    files, file_runs, rebuilt = [], {}, []
    for i, run_dir in enumerate(done):
        table = parquet.ensure_parquet(run_dir, log)
        if table is None:
            path = run_dir / parquet.COPIES[log][0]
            files.append(path)
            file_runs[str(path)] = i
        else:
            table = parquet.fill_defaults(table.select(fields), model)
            rebuilt.append(table.append_column("_run", pa.array(np.full(table.num_rows, i, np.int32))))
    scanned = parquet.scan(files, model, fields)
    names = scanned.column(parquet.FILENAME).combine_chunks().dictionary_encode()
    index = np.array([file_runs[f] for f in names.dictionary.to_pylist()], dtype=np.int32)
    run_of_row = index[names.indices.to_numpy(zero_copy_only=False)] if len(index) else np.zeros(0, np.int32)
    scanned = scanned.drop_columns([parquet.FILENAME]).append_column("_run", pa.array(run_of_row))
    table = pa.concat_tables([scanned, *rebuilt]) if rebuilt else scanned
    order = table.column("_run").to_numpy()
    if len(order) > 1 and (np.diff(order) < 0).any():
        table = table.take(np.argsort(order, kind="stable"))
        order = table.column("_run").to_numpy()
    df = table.drop_columns(["_run"]).to_pandas()
    for name in (*RUN_IDENTITY, "api_bases"):  # api_bases: a figure of calls says a local server answered
        values = pa.array(runs[name].tolist()) if not runs.empty else pa.array([], pa.string())
        df[name] = values.take(pa.array(order)).to_pandas() if len(df) else pd.Series([], dtype=object)
    df["_run"] = order
    return df


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
