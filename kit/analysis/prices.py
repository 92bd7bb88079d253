"""The price columns of the calls table: which price each call was billed at, looked up in its run's
own price sheet (the copy in run.json) by the tier's price key in its run's profile -- vectorised over
the rows, one lookup table per distinct profile and sheet. Re-pricing (:mod:`kit.analysis.repricing`)
uses the same columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

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
    "price_cache_write_1h": "cache_write_1h",  # 1-hour writes; 2x input when the sheet predates it
}


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
                row = dict(price)
                if row.get("cache_write_1h") is None and row.get("input") is not None:
                    row["cache_write_1h"] = 2 * float(row["input"])  # as kit.usage.ModelPrice derives it
                out[s, vocab[key]] = [row.get(f, np.nan) for f in PRICE_COLUMNS.values()]
    return out


def category_codes(values: pd.Series) -> tuple[np.ndarray, list[str]]:
    codes, uniques = pd.factorize(values)
    return codes, [str(u) for u in uniques]


def with_prices(
    calls: pd.DataFrame,
    runs: pd.DataFrame,
    sheets: Mapping[str, Mapping[str, Any]],
    specs: Mapping[str, Mapping[str, Any]],
) -> pd.DataFrame:
    """Add ``price_key`` (the tier's key in the run's profile, else the model) and the four prices of
    that key in the run's price sheet -- vectorised over the rows, one lookup table per distinct profile
    and sheet."""
    keys = runs["run_key"].tolist() if not runs.empty else []
    spec_ids, spec_list = intern_dicts([specs[k] for k in keys])
    sheet_ids, sheet_list = intern_dicts([sheets[k] for k in keys])
    run = calls["_run"].to_numpy()
    tier_codes, tiers = category_codes(calls["tier"])
    model_codes, models = category_codes(calls["model"])
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


def intern_dicts(dicts: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, list[Mapping[str, Any]]]:
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
