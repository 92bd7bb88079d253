"""Parquet copies of a run's ``calls.jsonl`` and ``events.jsonl``, for fast analysis.

The JSONL files stay the append-only, crash-safe log and the source of truth. When a run finishes,
:func:`write_parquet` writes ``calls.parquet`` and ``events.parquet`` beside them; a copy that is
missing or older than its JSONL is rebuilt from the JSONL (:func:`ensure_parquet`, called by
``kit.analysis.load``).

The Arrow schema is derived from the pydantic record models in one place (:func:`arrow_schema`), so a
field added to :class:`~kit.records.schema.CallRecord` or :class:`~kit.records.schema.EventRecord` flows into the
Parquet files; reading (:func:`scan`) tolerates older files that lack the newer columns (they read as
the field's default).
"""

from __future__ import annotations

import json
import os
import threading
import types
import typing
import warnings
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pydantic import BaseModel

from kit.records.schema import CALLS, EVENTS, CallRecord, EventRecord, read_jsonl

CALLS_PARQUET = "calls.parquet"
EVENTS_PARQUET = "events.parquet"
# JSONL log -> (its Parquet copy, the record model of its rows)
COPIES: dict[str, tuple[str, type[BaseModel]]] = {
    CALLS: (CALLS_PARQUET, CallRecord),
    EVENTS: (EVENTS_PARQUET, EventRecord),
}
FILENAME = "__filename"  # pyarrow's special column: the file a scanned row came from

_SCALARS: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
}


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """(Arrow type, is JSON text) of a pydantic field annotation; containers and models become JSON text."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _arrow_type(args[0])
        return pa.string(), True
    if origin is Literal:
        kinds = {type(v) for v in typing.get_args(annotation)}
        if len(kinds) == 1 and (kind := kinds.pop()) in _SCALARS:
            return _SCALARS[kind], False
        return pa.string(), True
    if annotation in _SCALARS:
        return _SCALARS[annotation], False
    return pa.string(), True


def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """The Arrow schema of ``model``'s fields, in field order. Every column is nullable (an older file
    read under a newer schema has nulls where it lacks a column); dicts, lists and nested models are
    stored as JSON text."""
    return pa.schema([pa.field(name, _arrow_type(f.annotation)[0]) for name, f in model.model_fields.items()])


def _json_fields(model: type[BaseModel]) -> list[str]:
    return [name for name, f in model.model_fields.items() if _arrow_type(f.annotation)[1]]


def jsonl_table(path: Path, model: type[BaseModel]) -> pa.Table:
    """The rows of a JSONL record file as an Arrow table under ``arrow_schema(model)``.

    Each row goes through the model, so rows written before a field existed get its default.
    """
    json_fields = _json_fields(model)
    rows = []
    for raw in read_jsonl(path):
        row = model.model_validate(raw).model_dump(mode="json")
        for name in json_fields:
            if row[name] is not None and not isinstance(row[name], str):
                row[name] = json.dumps(row[name], default=str)
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=arrow_schema(model))


def write_atomic(table: pa.Table, path: Path, mtime_ns: int | None = None, compression: str = "zstd") -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    pq.write_table(table, tmp, compression=compression)
    if mtime_ns is not None:
        os.utime(tmp, ns=(mtime_ns, mtime_ns))
    os.replace(tmp, path)


def _mtime_ns(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def _copy(run_dir: Path, log: str) -> pa.Table:
    """Rewrite ``log``'s Parquet copy from the JSONL. The copy gets the JSONL's mtime as it was before
    reading: a line appended meanwhile makes the JSONL newer, so the copy is stale, never wrong."""
    copy, model = COPIES[log]
    mtime = _mtime_ns(run_dir / log)
    table = jsonl_table(run_dir / log, model)
    write_atomic(table, run_dir / copy, mtime)
    return table


def write_parquet(run_dir: Path) -> dict[str, pa.Table]:
    """(Re)write every Parquet copy of ``run_dir`` from its JSONL; returns the tables by JSONL name."""
    return {log: _copy(Path(run_dir), log) for log in COPIES}


def is_fresh(run_dir: Path, log: str) -> bool:
    """True when ``log``'s Parquet copy exists and is not older than the JSONL (a missing JSONL counts
    as empty: any copy is fresh)."""
    try:
        copy = (Path(run_dir) / COPIES[log][0]).stat().st_mtime_ns
    except FileNotFoundError:
        return False
    try:
        return copy >= (Path(run_dir) / log).stat().st_mtime_ns
    except FileNotFoundError:
        return True


def ensure_parquet(run_dir: Path, log: str) -> pa.Table | None:
    """Rebuild ``log``'s Parquet copy from the JSONL when it is missing or stale.

    Returns ``None`` when the copy on disk is fresh (scan it), else the rebuilt table (also written to
    disk when the folder is writable; a read-only results folder still gets analysed, from memory).
    """
    if is_fresh(run_dir, log):
        return None
    try:
        return _copy(Path(run_dir), log)
    except OSError as e:
        copy, model = COPIES[log]
        warnings.warn(f"could not write {Path(run_dir) / copy} ({e}); analysing from memory", stacklevel=2)
        return jsonl_table(Path(run_dir) / log, model)


def _defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Scalar defaults of the non-nullable fields (what an older file's missing column reads as)."""
    out = {}
    for name, f in model.model_fields.items():
        nullable = type(None) in typing.get_args(f.annotation)
        if not nullable and f.default is not None and isinstance(f.default, str | int | float | bool):
            out[name] = f.default
    return out


def scan(files: list[Path], model: type[BaseModel], columns: list[str]) -> pa.Table:
    """One dataset scan of the Parquet ``files`` under the model's current schema, keeping ``columns``
    plus ``__filename``. Columns an older file lacks read as the field's default (or null)."""
    schema = arrow_schema(model)
    if not files:
        return schema.empty_table().select(columns).append_column(FILENAME, pa.array([], pa.string()))
    dataset = ds.dataset([str(f) for f in files], format="parquet", schema=schema)
    table = dataset.to_table(columns=[*columns, FILENAME])
    return fill_defaults(table, model)


def fill_defaults(table: pa.Table, model: type[BaseModel]) -> pa.Table:
    """Nulls in non-nullable fields (columns an older file lacked) become the field's default."""
    for name, default in _defaults(model).items():
        if name in table.column_names and table.column(name).null_count:
            i = table.column_names.index(name)
            col = table.column(name)
            table = table.set_column(i, name, pc.fill_null(col, pa.scalar(default, col.type)))
    return table
