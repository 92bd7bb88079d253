"""The analysis cache: an experiment's finished tables kept in ``<experiment>/.analysis/``.

Reading one small Parquet file costs ~1 ms however few rows it has, so 10k runs cannot be scanned in
under 2 s. :mod:`kit.analysis.load` therefore keeps, per experiment folder, the finished tables with a
manifest of what they were built from (every run folder's run.json / calls.jsonl / events.jsonl size
and mtime, the incomplete folders, the record schemas). Any difference -> the tables are rebuilt from
the run folders; the cache never outlives its sources.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kit.records.parquet import write_atomic
from kit.records.schema import CALLS, EVENTS, CallRecord, EventRecord, RunRecord, Score

CACHE_DIR = ".analysis"
CACHE_VERSION = (
    3  # 2: the runs table has api_bases (a row built from run.json gains a column: bump); 3: calls too
)
MANIFEST = "manifest.json"
_SIGNED = ("run.json", CALLS, EVENTS)


def signature(run_dir: str) -> list[int] | None:
    """Size and mtime of a run folder's run.json and logs; ``None`` when it has no run.json."""
    out: list[int] = []
    for name in _SIGNED:
        try:
            st = os.stat(os.path.join(run_dir, name))
        except FileNotFoundError:
            if name == _SIGNED[0]:
                return None
            out += [-1, -1]
            continue
        out += [st.st_size, st.st_mtime_ns]
    return out


def schema_version() -> list[Any]:
    """What a cached table depends on besides the records: the cache format and the models' fields."""
    return [CACHE_VERSION, *(list(m.model_fields) for m in (CallRecord, EventRecord, RunRecord, Score))]


def frame_table(df: Any, token: str) -> pa.Table:
    """A pandas frame as an Arrow table; a column Arrow cannot type (mixed values) is stored as JSON text."""
    arrays, json_columns = {}, []
    for name in df.columns:
        try:
            arrays[name] = pa.array(df[name], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            arrays[name] = pa.array([json.dumps(v, default=str) for v in df[name]], pa.string())
            json_columns.append(name)
    meta = {"json_columns": json.dumps(json_columns), "token": token}
    return pa.table(arrays).replace_schema_metadata(meta)


def table_frame(table: pa.Table) -> Any:
    meta = table.schema.metadata or {}
    df = table.to_pandas()
    for name in json.loads(meta.get(b"json_columns", b"[]")):
        df[name] = [json.loads(v) for v in df[name]]
    return df


def write_cache(exp: Path, manifest: dict[str, Any], frames: dict[str, Any]) -> bool:
    """Write ``frames`` (name -> pandas frame) and the manifest (last) under ``exp/.analysis``."""
    folder = Path(exp) / CACHE_DIR
    token = os.urandom(8).hex()
    try:
        folder.mkdir(exist_ok=True)
        for name, df in frames.items():
            # snappy: the cache is read on every load and decodes ~2x faster than zstd
            write_atomic(frame_table(df, token), folder / f"{name}.parquet", compression="snappy")
        tmp = folder / f".{MANIFEST}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps({**manifest, "token": token}), encoding="utf-8")
        os.replace(tmp, folder / MANIFEST)
    except (OSError, pa.ArrowException) as e:
        warnings.warn(f"analysis cache not written under {folder} ({e})", stacklevel=2)
        return False
    return True


def read_cache(
    exp: Path, expect: dict[str, Any], names: list[str]
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(manifest, name -> frame) when ``exp/.analysis`` was built from exactly ``expect``, else None."""
    folder = Path(exp) / CACHE_DIR
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if any(manifest.get(k) != v for k, v in expect.items()):
        return None
    frames = {}
    try:
        for name in names:
            table = pq.read_table(folder / f"{name}.parquet")
            if (table.schema.metadata or {}).get(b"token", b"").decode() != manifest.get("token"):
                return None  # a writer replaced the tables after this manifest: rebuild
            frames[name] = table_frame(table)
    except (OSError, pa.ArrowException, ValueError):
        return None
    return manifest, frames
