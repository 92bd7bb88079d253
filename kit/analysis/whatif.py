"""What-ifs over recorded calls, alone or chained: a role on another tier (``reassign``), a tier on
another model (``model``, priced from ``prices``), a role on another cache lifetime (``ttl``).

:func:`whatif` applies the ones given in that order -- roles move to their new tier first, then every
call on a swapped tier gets the new model (a role just moved there too), then the lifetimes change --
and re-simulates the cache of every call any of them changed, once, from the recorded breakpoints
(:mod:`kit.analysis.cachesim`). :func:`whatif_reassign`, :func:`whatif_model` and
:func:`whatif_cache_ttl` are the one-step cases.

A what-if whose cost equals the recorded one says why in ``WhatIf.why_unchanged`` (and its note):
nothing matched, the calls already ran that way, the new prices equal the old, the cache split was kept
as recorded (no breakpoint records: the scripted and embedded models place none) ...
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from kit.analysis.cachesim import SPLIT, models_for_tiers
from kit.analysis.load import Records
from kit.analysis.prices import PRICE_COLUMNS, category_codes, intern_dicts
from kit.analysis.repricing import (
    WhatIf,
    _as_profile,
    _as_sheet,
    _check_tiers,
    _move,
    _prices_of,
    _repriced,
    _resim_note,
    _resimulated,
    _whatif,
    cost_before_after,
)
from kit.caching_rules import TTL_SECONDS
from kit.config import PriceSheet
from kit.errors import ConfigError


def _reassign(
    records: Records, calls: pd.DataFrame, roles: Mapping[str, str]
) -> tuple[pd.DataFrame, np.ndarray, str]:
    """Step 1: ``roles`` (role -> tier) moved, each run under its own recorded profile and sheet."""
    _check_tiers(roles)
    present = sorted(set(roles) & set(calls["role"]))
    if not present:
        return (
            calls,
            np.zeros(len(calls), bool),
            f"no calls by role(s) {', '.join(roles)}: nothing to reassign",
        )
    moved = calls["role"].isin(present)
    run_codes, run_keys = category_codes(calls.loc[moved, "run_key"])
    spec_of, specs = intern_dicts([records.profile_specs[k] for k in run_keys])
    sheet_of, sheets = intern_dicts([records.price_sheets[k] for k in run_keys])
    pairs, setup_of_run = np.unique(spec_of.astype(np.int64) * len(sheets) + sheet_of, return_inverse=True)
    setups = [(_as_profile(specs[p // len(sheets)]), _as_sheet(sheets[p % len(sheets)])) for p in pairs]
    out = _move(calls, {r: roles[r] for r in present}, setup_of_run[run_codes], setups)
    text = f"moved {int(moved.sum())} calls of {', '.join(f'{r} -> {roles[r]}' for r in present)} (priced at the new tier's recorded price)"
    return out, moved.to_numpy(), text


def _model(
    records: Records, calls: pd.DataFrame, tiers: Mapping[str, str], prices: PriceSheet | str | Path | None
) -> tuple[pd.DataFrame, np.ndarray, str]:
    """Step 2: every call on a tier of ``tiers`` (tier -> model) gets that model and its price (the
    model string as price key, in ``prices`` or its run's recorded sheet)."""
    _check_tiers({t: t for t in tiers})
    changed = calls["tier"].isin(list(tiers)).to_numpy()
    moves = ", ".join(f"{t} -> {m}" for t, m in tiers.items())
    if not changed.any():
        return calls, changed, f"no calls on tier(s) {', '.join(tiers)}: nothing to move ({moves})"
    sheet = _as_sheet(prices) if prices is not None else None
    models = models_for_tiers(calls, tiers)
    keys = calls["price_key"].astype(str).where(~changed, models)
    table = calls[list(PRICE_COLUMNS)].to_numpy(dtype=float, copy=True)  # unmoved calls: as they are
    table[changed] = _prices_of(records, calls[changed], keys[changed], sheet)
    return _repriced(calls.assign(model=models.to_numpy()), keys, table), changed, moves


def _ttl(calls: pd.DataFrame, roles: Mapping[str, str]) -> tuple[pd.Series | None, np.ndarray, str]:
    """Step 3: the cache lifetime of ``roles`` (role -> 5m / 1h); the others keep theirs."""
    bad = {r: t for r, t in roles.items() if t not in TTL_SECONDS}
    if bad:
        raise ConfigError(f"unknown cache lifetime(s) {bad}", f"pick one of {', '.join(TTL_SECONDS)}")
    changed = calls["role"].isin(list(roles)).to_numpy()
    lifetimes = ", ".join(f"{r}: {t}" for r, t in roles.items())
    if not changed.any():
        return (
            None,
            changed,
            f"no calls by role(s) {', '.join(roles)}: nothing to change (cache lifetime {lifetimes})",
        )
    recorded = calls["cache_ttl"] if "cache_ttl" in calls else pd.Series(None, index=calls.index)
    return calls["role"].map(dict(roles)).where(changed, recorded), changed, f"cache lifetime {lifetimes}"


def whatif(
    records: Records,
    *,
    reassign: Mapping[str, str] | None = None,
    model: Mapping[str, str] | None = None,
    prices: PriceSheet | str | Path | None = None,
    ttl: Mapping[str, str] | None = None,
) -> WhatIf:
    """The what-ifs given, chained in the order reassign -> model -> ttl (see the module docstring):
    ``reassign`` role -> tier, ``model`` tier -> model (priced from ``prices``, else each run's recorded
    sheet), ``ttl`` role -> "5m" / "1h". The result's ``table`` is per tier (before by the tier a call
    ran on, after by its new one), :meth:`WhatIf.view` per strategy, role or tier; ``why_unchanged``
    says in words why the cost did not move, when it did not."""
    calls = records.calls
    if calls.empty:
        return WhatIf(f"no calls in {records.root}: nothing to change", cost_before_after(calls, calls), calls,
                      why_unchanged="there are no recorded calls")  # fmt: skip
    current = _repriced(calls, None, calls[list(PRICE_COLUMNS)].to_numpy(dtype=float))
    changed = np.zeros(len(calls), dtype=bool)
    steps, ttls = [], None
    if reassign:
        current, moved, text = _reassign(records, current, reassign)
        changed |= moved
        steps.append(text)
    if model:
        current, moved, text = _model(records, current, model, prices)
        changed |= moved
        steps.append(text)
    if ttl:
        ttls, moved, text = _ttl(current, ttl)
        changed |= moved
        steps.append(text)
    if not steps:
        raise ConfigError(
            "a what-if needs reassign=, model= or ttl=",
            "e.g. whatif(records, reassign={'executor': 'medium'})",
        )
    note = "; then ".join(steps)
    current = current.assign(tier_before=calls["tier"].to_numpy(), model_before=calls["model"].to_numpy())
    if not changed.any():
        unchanged = current.assign(cost_usd_as_recorded=current["cost_usd"])
        result = _whatif(note, calls, unchanged, 0)
        return dataclasses.replace(
            result,
            why_unchanged="no recorded call matched it",
            note=f"{note} -- no change in cost: no recorded call matched it",
        )
    after, n = _resimulated(current, changed, current["model"], ttls)
    note = f"{note}: {_resim_note(n, int(changed.sum()))}"
    why = why_unchanged(calls, after, changed, ttls)
    if why:
        note += f" -- no change in cost: {why}"
    return dataclasses.replace(_whatif(note, calls, after, n), why_unchanged=why)


def why_unchanged(
    before: pd.DataFrame, after: pd.DataFrame, changed: np.ndarray, ttls: pd.Series | None = None
) -> str:
    """'' when the what-if moved the cost; else why it did not, in words (``changed``: the calls it
    touched; ``ttls``: the cache lifetimes it gave, when it changed any)."""
    total = float(before["cost_usd"].sum())
    if abs(float(after["cost_usd"].sum()) - total) > 1e-9 * max(1.0, abs(total)):
        return ""
    if not changed.any():
        return "no recorded call matched it"
    b, a, n = before[changed], after[changed], int(changed.sum())

    def same(col: str) -> bool:
        return bool((a[col].astype(str).to_numpy() == b[col].astype(str).to_numpy()).all())

    cols = list(PRICE_COLUMNS)
    prices_same = np.allclose(a[cols].to_numpy(float), b[cols].to_numpy(float), equal_nan=True)
    reasons = []
    if not (same("tier") and same("model")):
        if prices_same:
            old = ", ".join(sorted(set(b["price_key"].astype(str))))
            new = ", ".join(sorted(set(a["price_key"].astype(str))))
            reasons.append(f"the new prices ({new}) equal the recorded ones ({old})")
    elif ttls is None:
        reasons.append(f"the {n} calls it touches already ran on that tier and model")
    if ttls is not None:
        recorded = b["cache_ttl"].fillna("5m") if "cache_ttl" in b else pd.Series("5m", index=b.index)
        if (ttls[changed].astype(str).to_numpy() == recorded.astype(str).to_numpy()).all():
            reasons.append("they already used that cache lifetime")
    if not np.nan_to_num(b[cols].to_numpy(float)).any():
        reasons.append(f"the {n} calls are priced at $0")
    if all((a[c].to_numpy() == b[c].to_numpy()).all() for c in SPLIT if c in a and c in b):
        resim = "cache_resimulated" in a and bool(a["cache_resimulated"].any())
        if not resim:
            reasons.append(
                "their cache split is kept as recorded: no breakpoint records to re-simulate it from "
                "(the scripted and embedded models place none)"
            )
        elif not (a["cache_write"].to_numpy() > 0).any() and not (a["cache_read"].to_numpy() > 0).any():
            reasons.append(
                "the re-simulated cache split equals the recorded one: none of them writes to or reads "
                "from the cache (no prompt reaches its model's minimum cacheable size)"
            )
        else:
            reasons.append("the re-simulated cache split equals the recorded one")
    return "; ".join(reasons) or "the changes cancel out"


def whatif_reassign(records: Records, roles: Mapping[str, str]) -> WhatIf:
    """Move ``roles`` (role -> tier) to other tiers, each run under its own recorded profile and sheet
    (:func:`whatif` with ``reassign`` only)."""
    return whatif(records, reassign=roles)


def whatif_model(
    records: Records, tiers: Mapping[str, str], price_sheet: PriceSheet | str | Path | None = None
) -> WhatIf:
    """What if a tier had run another model (``{"strong": "anthropic/claude-sonnet-4-5"}``): its calls
    get that model, its price (the model string as price key, in ``price_sheet`` or each run's recorded
    sheet; the other calls keep their recorded prices) and the cache split that model would have
    produced (re-simulated: its minimum cacheable size, the recorded breakpoints, timestamps and
    lifetimes). :func:`whatif` with ``model`` only."""
    return whatif(records, model=tiers, prices=price_sheet)


def whatif_cache_ttl(records: Records, roles: Mapping[str, str]) -> WhatIf:
    """What if ``roles`` (role -> ``"5m"`` or ``"1h"``) had used another cache lifetime: their cache is
    re-simulated (entries outlive longer pauses; 1-hour writes are priced at ``cache_write_1h``).
    :func:`whatif` with ``ttl`` only."""
    return whatif(records, ttl=roles)
