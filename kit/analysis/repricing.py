"""Re-pricing recorded calls: under another price sheet (:func:`reprice`), with roles moved to other
tiers (:func:`reassign`), the before/after table (:func:`cost_before_after`), the price-sheet what-if
over :class:`~kit.analysis.Records` (:func:`whatif_price_sheet`) and the helpers the other what-ifs
(:mod:`kit.analysis.whatif`: reassign, model, cache lifetime, chained) are built from. Re-pricing never changes tokens: only the price columns and ``cost_usd`` (the
recorded cost kept in ``cost_usd_recorded``). A what-if that changes a call's model or cache lifetime
also re-simulates its cache (:mod:`kit.analysis.cachesim`): the split the other model would have had,
with the tokens-as-recorded cost kept beside it (``cost_usd_as_recorded``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pydantic import ValidationError

from kit.analysis.cachesim import SPLIT, resimulate
from kit.analysis.load import Records, repo_path
from kit.analysis.prices import PRICE_COLUMNS, TOKENS, category_codes
from kit.analysis.tables import order_tiers
from kit.config import TIERS, PriceSheet, Profile, load_price_sheet, load_profile
from kit.errors import ConfigError


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
    write_1h = df.get("cache_write_1h", 0)
    return (
        df["input_uncached"] * df["price_input"]
        + df["cache_read"] * df["price_cache_read"]
        + (df["cache_write"] - write_1h) * df["price_cache_write"]
        + write_1h * df["price_cache_write_1h"]
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
        codes, uniques = category_codes(calls["price_key"])
        keys = None
    else:
        prof = _as_profile(profile)
        tier_codes, tiers = category_codes(calls["tier"])
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
    role_codes, moved_roles = category_codes(calls.loc[moved, "role"])
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
    index = order_tiers(b.index.union(a.index)) if by == "tier" else sorted(b.index.union(a.index))
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
    """A what-if on recorded calls: the table of totals before/after and one line saying what was done.

    When the cache was re-simulated (``cache_resimulated``), ``table`` has ``cost_after`` (re-simulated
    split) and ``cost_after_as_recorded`` (the recorded tokens at the new prices) side by side, and
    ``calls`` has both costs per call (``cost_usd``, ``cost_usd_as_recorded``)."""

    note: str
    table: pd.DataFrame
    calls: pd.DataFrame
    cache_resimulated: bool = False
    why_unchanged: str = ""  # '' when the cost moved; else why it did not (kit.analysis.whatif)

    def view(self, by: str | Sequence[str] = "strategy") -> pd.DataFrame:
        """Cost before, after as recorded and after re-simulated, per ``by`` (e.g. per strategy, or
        ``["strategy", "tier"]``): the cost before is grouped by what a call was (its recorded tier,
        ``tier_before``), the costs after by what it became."""
        keys = [by] if isinstance(by, str) else list(by)
        c = self.calls
        cols = ["cost_before", "cost_after_as_recorded", "cost_after", "delta_usd"]
        if c.empty:
            return pd.DataFrame(columns=cols)
        before = c["cost_usd_recorded"] if "cost_usd_recorded" in c else c["cost_usd"]
        as_recorded = c["cost_usd_as_recorded"] if "cost_usd_as_recorded" in c else c["cost_usd"]
        then = [c[f"{k}_before"].rename(k) if f"{k}_before" in c else c[k] for k in keys]
        now = [c[k] for k in keys]
        table = pd.concat(
            {
                "cost_before": before.groupby(then).sum(),
                "cost_after_as_recorded": as_recorded.groupby(now).sum(),
                "cost_after": c["cost_usd"].groupby(now).sum(),
            },
            axis=1,
        ).fillna(0.0)
        table["delta_usd"] = table["cost_after"] - table["cost_before"]
        return table[cols]


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


def _resimulated(
    calls: pd.DataFrame, changed: np.ndarray, models: pd.Series, ttls: pd.Series | None = None
) -> tuple[pd.DataFrame, int]:
    """``calls`` (already at their new prices) with the cache of the ``changed`` rows re-simulated under
    ``models`` / ``ttls``; every other row keeps its recorded split (it fed the simulated cache, as it
    fed the real one). Returns the frame and how many changed rows could be re-simulated."""
    sim = resimulate(calls, models, ttls)
    keep = ~changed
    for col in SPLIT:
        sim.loc[keep, col] = sim.loc[keep, f"{col}_recorded"]
    sim["cache_resimulated"] = sim["cache_resimulated"].to_numpy() & changed
    sim["cost_usd_as_recorded"] = calls["cost_usd"].to_numpy()
    sim["cost_usd"] = _cost(sim)
    return sim, int(sim["cache_resimulated"].sum())


def _resim_note(n: int, changed: int) -> str:
    text = f"cache re-simulated for {n} of {changed} calls"
    if n < changed:
        text += f"; {changed - n} had no breakpoint records (kept as recorded)"
    return text


def _whatif(note: str, before: pd.DataFrame, after: pd.DataFrame, resimulated: int) -> WhatIf:
    table = cost_before_after(before, after)
    as_recorded = after.assign(cost_usd=after["cost_usd_as_recorded"])
    table.insert(2, "cost_after_as_recorded", cost_before_after(before, as_recorded)["cost_after"])
    return WhatIf(note, table, after, cache_resimulated=resimulated > 0)


def _prices_of(
    records: Records, calls: pd.DataFrame, keys: pd.Series, sheet: PriceSheet | None
) -> np.ndarray:
    """prices[row, column] of each row's ``keys`` entry in ``sheet`` (else its run's recorded sheet)."""
    out = np.zeros((len(calls), len(PRICE_COLUMNS)))
    groups = calls.groupby([calls["run_key"], keys], sort=False).indices
    cache: dict[tuple[str, str], np.ndarray] = {}
    for (run_key, key), rows in groups.items():
        run_sheet = sheet if sheet is not None else _as_sheet(records.price_sheets[run_key])
        if (run_sheet.name, key) not in cache:
            cache[(run_sheet.name, key)] = _sheet_prices(run_sheet, [key])[0]
        out[rows] = cache[(run_sheet.name, key)]
    return out
