"""The cache simulator of the what-ifs: from each run's recorded calls, the uncached / cache-read /
cache-write split another model (or another cache lifetime) would have produced.

What it reads (``calls.jsonl``, written by the gateway, see ``docs/records.md``): per call its order and
start (``seq``, ``t_s``), its prompt size (uncached + read + write, the provider's count), and where the
gateway's breakpoints sat -- ``cache_breakpoints`` (token positions), ``cache_prefix_hashes`` and
``cache_lookback`` (every message boundary within 20 blocks before a breakpoint, ``[tokens, hash]``)
-- and ``cache_ttl``. A call without them (no breakpoints placed: OpenAI-style automatic caching, the
scripted or embedded model, records older than these fields) is kept as recorded and counted in
``cache_resimulated == False``.

The rules, as Anthropic documents them and ``tests/support/fake_providers.py`` simulates them
(:mod:`kit.caching_rules`):

* a lookup at the start of a call hits the longest cached prefix among the lookback boundaries (an
  entry is the target model's own: models do not share a cache) that is still alive, and refreshes it;
  an entry keeps the size its first writer measured (an early call, where an estimated boundary is
  the largest share of the prompt, estimates it best);
* the call then writes the prefix up to its last breakpoint, beyond what it read, if that prefix
  reaches the target model's minimum cacheable size; every breakpoint at or above the minimum becomes
  an entry that lives ``ttl`` (5 min or 1 h) from its last use;
* the rest of the prompt is uncached. A 1-hour write is a ``cache_write_1h`` token.

Sizes: a breakpoint on the newest message is the provider's exact count; an earlier boundary is the
gateway's token_counter estimate scaled to it. Where the records pin a prefix's exact size -- a newest
message's breakpoint, or a recorded cache read (the size of the prefix the provider found) -- that size
is used. The cache is shared by the runs of one experiment, in the order of their calls' start times
(a provider's cache is shared by every request of an account: a repeat of a task reads what the
previous one wrote while it lives).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from kit.caching_rules import DEFAULT_TTL, TTL_SECONDS, min_cacheable_tokens

#: Tokens a read may fall short of what the previous call left cached and still be a full hit
#: (automatic caches round to 128-token steps).
TOLERANCE = 128
SPLIT = ("input_uncached", "cache_read", "cache_write", "cache_write_1h")
CACHE_FIELDS = ("cache_breakpoints", "cache_prefix_hashes", "cache_lookback")


def as_list(value: Any) -> list[Any] | None:
    """A list column's value (JSON text in the Parquet copies, a list when rebuilt), or None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        return json.loads(value) if value else None
    return list(value)


def has_breakpoints(calls: pd.DataFrame) -> pd.Series:
    """Rows the simulator can re-derive: the gateway recorded where their breakpoints sat."""
    if calls.empty or "cache_lookback" not in calls:
        return pd.Series(False, index=calls.index)
    return calls["cache_lookback"].map(lambda v: bool(as_list(v))).astype(bool)


def _exact_sizes(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Prefix hash -> its exact size, where the records pin it: the newest message's breakpoint (the
    provider's prompt count) and the prefix a recorded cache read found (the boundary nearest it)."""
    exact: dict[str, int] = {}
    for r in rows:
        exact[r["hashes"][-1]] = r["points"][-1]
    for r in rows:
        read = r["read"]
        if read <= 0 or not r["lookback"]:
            continue
        tokens, h = min(r["lookback"], key=lambda e: abs(e[0] - read))
        if h not in exact and abs(tokens - read) <= 0.1 * read:
            exact[h] = read
    return exact


def _run_rows(calls: pd.DataFrame, index: np.ndarray) -> list[dict[str, Any]]:
    part = calls.loc[index]
    order = np.lexsort((part["seq"].to_numpy(), part["_t"].to_numpy()))
    part = part.iloc[order]
    rows = []
    for i, row in zip(part.index, part.to_dict("records"), strict=True):
        rows.append(
            {
                "index": i,
                "points": [int(x) for x in as_list(row["cache_breakpoints"]) or []],
                "hashes": list(as_list(row["cache_prefix_hashes"]) or []),
                "lookback": [(int(t), str(h)) for t, h in as_list(row["cache_lookback"]) or []],
                "total": int(row["input_uncached"] + row["cache_read"] + row["cache_write"]),
                "read": int(row["cache_read"]),
                "t": float(row["_t"]),
                "model": str(row["_model"]),
                "ttl": str(row["_ttl"]),
            }
        )
    return rows


def _simulate_run(rows: list[dict[str, Any]]) -> dict[Any, tuple[int, int, int, int]]:
    """index -> (uncached, read, write, write_1h) for the calls of one run, in order."""
    exact = _exact_sizes(rows)
    cache: dict[tuple[str, str], list[float]] = {}  # (model, hash) -> [tokens, expires at]
    out = {}
    for r in rows:
        model, t, life = r["model"], r["t"], TTL_SECONDS.get(r["ttl"], TTL_SECONDS[DEFAULT_TTL])
        read, hit = 0, None
        for _tokens, h in r["lookback"]:  # oldest first: the last hit is the longest cached prefix
            entry = cache.get((model, h))
            if entry is not None and entry[1] >= t:
                read, hit = int(entry[0]), entry
        if hit is not None:
            hit[1] = max(hit[1], t + life)  # a hit refreshes the entry
        minimum = min_cacheable_tokens(model)
        last = exact.get(r["hashes"][-1], r["points"][-1]) if r["points"] else 0
        write = 0
        if last >= minimum and last > read:
            write = last - read
            for tokens, h in zip(r["points"], r["hashes"], strict=True):
                size, entry = exact.get(h, tokens), cache.get((model, h))
                if entry is not None and entry[1] >= t:  # already cached: refreshed, its size kept
                    entry[1] = max(entry[1], t + life)
                elif size >= minimum:
                    cache[(model, h)] = [size, t + life]
        read = min(read, r["total"])
        write = min(write, r["total"] - read)
        out[r["index"]] = (r["total"] - read - write, read, write, write if r["ttl"] == "1h" else 0)
    return out


def resimulate(
    calls: pd.DataFrame, models: pd.Series | None = None, ttls: pd.Series | None = None
) -> pd.DataFrame:
    """``calls`` with the token split re-derived under ``models`` / ``ttls`` (per row; default: as
    recorded). The recorded split is kept in ``<column>_recorded``; ``cache_resimulated`` says which
    rows were re-derived (the others, without breakpoint records, keep their recorded split)."""
    out = calls.copy(deep=False)
    for col in SPLIT:
        out[f"{col}_recorded"] = calls.get(col, 0)
        out[col] = out[f"{col}_recorded"].astype("int64")
    can = has_breakpoints(calls).to_numpy()
    out["cache_resimulated"] = can
    if not can.any():
        return out
    work = calls.loc[
        can, ["run_key", "seq", "input_uncached", "cache_read", "cache_write", *CACHE_FIELDS]
    ].copy()
    work["_t"] = _seconds(calls.loc[can, "started_at"])
    work["_model"] = (models if models is not None else calls["model"])[can]
    recorded_ttl = calls["cache_ttl"] if "cache_ttl" in calls else pd.Series(DEFAULT_TTL, index=calls.index)
    work["_ttl"] = (ttls if ttls is not None else recorded_ttl)[can].fillna(DEFAULT_TTL)
    split: dict[Any, tuple[int, int, int, int]] = {}
    scope = calls.loc[can, "experiment"] if "experiment" in calls else work["run_key"]
    for _, index in work.groupby(scope, sort=False).groups.items():
        split.update(_simulate_run(_run_rows(work, np.asarray(index))))
    values = np.array([split[i] for i in work.index], dtype=np.int64).reshape(-1, len(SPLIT))
    for j, col in enumerate(SPLIT):
        column = out[col].to_numpy(copy=True)
        column[can] = values[:, j]
        out[col] = column
    return out


def _seconds(stamps: pd.Series) -> pd.Series:
    """ISO start stamps as seconds since the epoch (0 where unreadable)."""
    at = pd.to_datetime(stamps, utc=True, errors="coerce", format="ISO8601")
    return ((at - pd.Timestamp(0, tz="UTC")).dt.total_seconds()).fillna(0.0)


def left_cached(calls: pd.DataFrame) -> pd.Series:
    """Per call, the prompt tokens it left in the cache (explicit caching: what it read
    plus what it wrote; automatic caching, no breakpoints and no writes: its whole prompt once it reached
    the model's minimum or was itself read from the cache)."""
    if calls.empty:  # (maps over an empty frame keep the input's dtype: nothing to compare)
        return pd.Series(0, index=calls.index, dtype="int64")
    prompt = calls["input_uncached"] + calls["cache_read"] + calls["cache_write"]
    lookback = calls["cache_lookback"] if "cache_lookback" in calls else pd.Series(None, index=calls.index)
    explicit = lookback.map(lambda v: bool(as_list(v))).astype(bool) | (calls["cache_write"] > 0)
    minimum = calls["model"].astype(str).map(min_cacheable_tokens)
    automatic = prompt.where((calls["cache_read"] > 0) | (prompt >= minimum), 0)
    return (calls["cache_read"] + calls["cache_write"]).where(explicit, automatic)


def models_for_tiers(calls: pd.DataFrame, tiers: Mapping[str, str]) -> pd.Series:
    """The model of each call once the tiers in ``tiers`` (tier -> model) run another model."""
    return calls["tier"].map(dict(tiers)).fillna(calls["model"]).astype(str)
