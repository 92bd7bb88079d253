"""Parquet copies of the logs agree with the JSONL they come from; re-pricing is vectorised and equals a
per-row computation done here independently."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from kit import analysis
from kit.analysis import cache
from kit.records import parquet
from kit.records.schema import CALLS, EVENTS, CallRecord
from kit.usage import ModelPrice, Usage, price
from tests.support.records import PRICE_SHEET, write_experiment


def _strip_parquet(exp: Path) -> None:
    for p in [*exp.glob("runs/*/*.parquet"), *exp.glob(f"{cache.CACHE_DIR}/*")]:
        p.unlink()


def _same(a: analysis.Records, b: analysis.Records) -> None:
    for name in ("runs", "calls", "events"):
        left, right = getattr(a, name), getattr(b, name)
        right = right.assign(run_dir=left["run_dir"]) if name == "runs" else right  # other folders
        pd.testing.assert_frame_equal(left, right)
    assert a.price_sheets == b.price_sheets and a.profile_specs == b.profile_specs


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("columnar")
    write_experiment(root / "a", name="fx")
    return root


def test_finished_runs_have_parquet_copies_equal_to_their_jsonl(results):
    run = results / "a" / "fx" / "runs" / "micro-slugify__pdca__r0"
    for log, (copy, model) in parquet.COPIES.items():
        assert parquet.is_fresh(run, log)
        from_parquet = pq.read_table(run / copy)
        assert from_parquet.schema == parquet.arrow_schema(model)
        assert from_parquet.equals(parquet.jsonl_table(run / log, model))
    assert pq.read_table(run / parquet.CALLS_PARQUET).num_rows == 4
    assert not (results / "a" / "fx" / "runs" / "micro-slugify__vibe__r9" / parquet.CALLS_PARQUET).exists()


def test_the_same_tables_from_parquet_and_from_jsonl(results, tmp_path):
    exp = results / "a" / "fx"
    from_parquet = analysis.load(exp)
    assert (exp / cache.CACHE_DIR / cache.MANIFEST).exists()
    cached = analysis.load(exp)  # the experiment cache is current now
    jsonl_only = tmp_path / "fx"
    shutil.copytree(exp, jsonl_only)
    _strip_parquet(jsonl_only)
    from_jsonl = analysis.load(jsonl_only)  # every copy rebuilt from the JSONL
    _same(from_parquet, cached)
    _same(from_parquet, from_jsonl)
    assert len(from_jsonl.calls) == 14 and len(from_jsonl.events) == 14
    assert all(parquet.is_fresh(d, CALLS) for d in jsonl_only.glob("runs/*__r[01]"))
    pd.testing.assert_frame_equal(
        analysis.role_tier_table(from_parquet), analysis.role_tier_table(from_jsonl)
    )


def test_a_stale_or_missing_copy_is_rebuilt_from_the_jsonl(results, tmp_path):
    exp = tmp_path / "fx"
    shutil.copytree(results / "a" / "fx", exp)
    before = analysis.load(exp)  # writes the experiment cache
    stale, missing = exp / "runs" / "micro-slugify__vibe__r0", exp / "runs" / "micro-slugify__pdca__r1"
    extra = CallRecord(run_id="micro-slugify__vibe__r0", seq=4, role="coder", tier="medium",
                       model="scripted/medium", output=7, cost_usd=7 * 15 / 1e6)  # fmt: skip
    with open(stale / CALLS, "a", encoding="utf-8") as fh:
        fh.write(extra.model_dump_json() + "\n")
    os.utime(stale / CALLS, ns=(os.stat(stale / CALLS).st_mtime_ns + 10**9,) * 2)  # surely newer
    (missing / parquet.EVENTS_PARQUET).unlink()
    assert not parquet.is_fresh(stale, CALLS) and not parquet.is_fresh(missing, EVENTS)

    after = analysis.load(exp)
    assert len(after.calls) == len(before.calls) + 1
    row = after.calls[(after.calls["run_id"] == "micro-slugify__vibe__r0") & (after.calls["seq"] == 4)]
    assert row["output"].tolist() == [7] and row["price_key"].tolist() == ["fx-medium"]
    assert parquet.is_fresh(stale, CALLS) and parquet.is_fresh(missing, EVENTS)  # rewritten
    reference = tmp_path / "ref" / "fx"
    shutil.copytree(exp, reference)
    _strip_parquet(reference)
    _same(after, analysis.load(reference))


def test_an_older_file_without_newer_columns_reads_as_the_defaults(results, tmp_path):
    exp = tmp_path / "fx"
    shutil.copytree(results / "a" / "fx", exp)
    run = exp / "runs" / "micro-slugify__vibe__r1"
    old = pq.read_table(run / parquet.CALLS_PARQUET).drop_columns(["cost_mismatch", "action_mode", "attempt"])
    pq.write_table(old, run / parquet.CALLS_PARQUET)  # newer than the JSONL: used as is
    calls = analysis.load(exp).calls
    mine = calls[calls["run_id"] == "micro-slugify__vibe__r1"]
    assert len(mine) == 3
    assert mine["cost_mismatch"].tolist() == [False] * 3 and mine["attempt"].tolist() == [1] * 3
    assert mine["action_mode"].isna().all()


def test_the_schema_follows_the_models():
    class Later(BaseModel):
        name: str
        n: int = 0
        ok: bool = True
        note: str | None = None
        kind: str = "x"
        extra: dict[str, int] = {}
        usage: Usage | None = None

    schema = parquet.arrow_schema(Later)
    assert schema.names == list(Later.model_fields)
    assert [str(t) for t in schema.types] == [
        "string",
        "int64",
        "bool",
        "string",
        "string",
        "string",
        "string",
    ]
    assert set(parquet.arrow_schema(CallRecord).names) == set(CallRecord.model_fields)


# --------------------------------------------------------------------------- re-pricing, row by row

OTHER = {
    "name": "other",
    "prices": {
        "fx-cheap": {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 2.5},
        "fx-medium": {"input": 4.0, "output": 20.0, "cache_read": 0.4, "cache_write": 5.0},
        "fx-strong": {"input": 10.0, "output": 40.0, "cache_read": 1.0, "cache_write": 12.5},
    },
}


def _row_cost(row: pd.Series, prices: dict) -> float:
    usage = Usage(input_uncached=int(row["input_uncached"]), cache_read=int(row["cache_read"]),
                  cache_write=int(row["cache_write"]), output=int(row["output"]))  # fmt: skip
    return price(usage, ModelPrice(**prices))


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """Two experiments; the second's runs are re-labelled with another recorded sheet and profile."""
    root = tmp_path_factory.mktemp("two")
    write_experiment(root, name="one")
    write_experiment(root, name="two")
    records = analysis.load(root)
    for key in records.price_sheets:
        if key.startswith("two/"):
            records.price_sheets[key] = OTHER
            spec = json.loads(json.dumps(records.profile_specs[key]))
            spec["tiers"]["strong"]["model"] = "other/strong"
            records.profile_specs[key] = spec
    return records


def test_vectorised_reprice_equals_row_by_row(two):
    after = analysis.reprice(two.calls, OTHER)
    expected = [_row_cost(r, OTHER["prices"][r["price_key"]]) for _, r in two.calls.iterrows()]
    assert after["cost_usd"].tolist() == expected  # exact, float for float
    assert after["cost_usd_recorded"].tolist() == two.calls["cost_usd"].tolist()
    assert after["price_output"].tolist() == [OTHER["prices"][k]["output"] for k in two.calls["price_key"]]


def test_vectorised_reassign_equals_row_by_row_under_each_runs_own_setup(two):
    roles = {"executor": "strong", "coder": "cheap"}
    after = analysis.whatif_reassign(two, roles).calls
    assert len(after) == len(two.calls)
    for (_, before), (_, row) in zip(two.calls.iterrows(), after.iterrows(), strict=True):
        sheet, spec = two.price_sheets[before["run_key"]], two.profile_specs[before["run_key"]]
        if before["role"] in roles:
            tier = roles[before["role"]]
            key = spec["tiers"][tier]["price"]
            assert (row["tier"], row["model"], row["price_key"]) == (tier, spec["tiers"][tier]["model"], key)
            assert row["cost_usd"] == _row_cost(before, sheet["prices"][key])
        else:
            assert (row["tier"], row["price_key"], row["cost_usd"]) == (
                before["tier"], before["price_key"], before["cost_usd"])  # fmt: skip
        assert row["cost_usd_recorded"] == before["cost_usd"]
    moved = after[after["role"] == "executor"]
    assert set(moved["model"]) == {"scripted/strong", "other/strong"}  # each run's own profile
    assert np.isclose(moved["cost_usd"].sum(), sum(
        _row_cost(r, (OTHER if r["run_key"].startswith("two/") else PRICE_SHEET)["prices"]["fx-strong"])
        for _, r in two.calls[two.calls["role"] == "executor"].iterrows()))  # fmt: skip


def test_reprice_under_recorded_sheets_is_exact_and_a_missing_price_is_named(two):
    check = analysis.whatif_price_sheet(two, None)
    assert check.calls["cost_usd"].tolist() == two.calls["cost_usd"].tolist()
    broken = analysis.Records(two.root, two.runs, two.calls.assign(price_input=np.nan), two.events,
                              price_sheets=two.price_sheets, profile_specs=two.profile_specs)  # fmt: skip
    with pytest.raises(analysis.ConfigError, match="has no price for"):
        analysis.whatif_price_sheet(broken, None)
