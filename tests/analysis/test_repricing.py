"""Re-pricing recorded calls under another price sheet, and moving a role to another tier."""

from __future__ import annotations

import pandas as pd
import pytest

from kit import analysis
from kit.errors import ConfigError
from tests.support.records import PRICE_SHEET, PROFILE_SPEC, write_experiment

SHEET_B = {
    "name": "sheet-b",
    "prices": {
        "fx-cheap": {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 2.5},
        "fx-medium": {"input": 4.0, "output": 20.0, "cache_read": 0.4, "cache_write": 5.0},
        "fx-strong": {"input": 10.0, "output": 40.0, "cache_read": 1.0, "cache_write": 12.5},
    },
}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return analysis.load(write_experiment(tmp_path_factory.mktemp("results")))


def _run(calls: pd.DataFrame, run_id: str) -> pd.DataFrame:
    return calls[calls["run_id"] == run_id].sort_values("seq")


def test_reprice_under_another_sheet_matches_hand_computation(records):
    after = analysis.reprice(records.calls, SHEET_B)
    vibe = _run(after, "micro-slugify__vibe__r0")
    # vibe r0, coder on medium, sheet B (4 / 20 / 0.4 / 5 per M: input / output / read / write):
    #   call 1: 1000*4 +    0*0.4 + 2000*5 + 100*20 = 4000 +   0 + 10000 + 2000 = 16000
    #   call 2:  200*4 + 2000*0.4 +  300*5 + 150*20 =  800 + 800 +  1500 + 3000 =  6100
    #   call 3:  100*4 + 2300*0.4 +    0*5 +  50*20 =  400 + 920 +     0 + 1000 =  2320
    assert list(vibe["cost_usd"]) == pytest.approx([16000 / 1e6, 6100 / 1e6, 2320 / 1e6])
    # the cost under the recorded sheet A is kept: 12000, 4575, 1740 (see test_analysis)
    assert list(vibe["cost_usd_recorded"]) == pytest.approx([12000 / 1e6, 4575 / 1e6, 1740 / 1e6])
    pdca = _run(after, "micro-slugify__pdca__r0")
    # orchestrator on strong: 500*10 + 1000*12.5 + 80*40 = 5000 + 12500 + 3200 = 20700
    # executor on cheap: 3000*2 + 400*8 = 9200; 1000*2 + 2500*0.5 + 500*2.5 + 300*8 = 6900
    # auditor on medium: 800*4 + 60*20 = 4400
    assert list(pdca["cost_usd"]) == pytest.approx([20700 / 1e6, 9200 / 1e6, 6900 / 1e6, 4400 / 1e6])
    assert (after[list(analysis.TOKENS)] == records.calls[list(analysis.TOKENS)]).all().all()


def test_reprice_under_the_recorded_sheet_reproduces_recorded_costs(records):
    after = analysis.reprice(records.calls, PRICE_SHEET)
    assert (after["cost_usd"] == records.calls["cost_usd"]).all()  # exact: same arithmetic as kit.usage
    check = analysis.whatif_price_sheet(records, None)
    assert (check.table["delta_usd"].abs() < 1e-12).all()


def test_reprice_through_a_profile_with_other_price_keys(records):
    sheet = {
        "name": "by-model",
        "prices": {"m-small": SHEET_B["prices"]["fx-cheap"], "m-big": SHEET_B["prices"]["fx-strong"]},
    }
    profile = {
        **PROFILE_SPEC,
        "tiers": {
            "cheap": {"model": "m-small"},
            "medium": {"model": "m-small"},
            "strong": {"model": "m-big"},
        },
    }
    after = analysis.reprice(records.calls, sheet, profile=profile)
    vibe = _run(after, "micro-slugify__vibe__r0")
    assert set(vibe["price_key"]) == {"m-small"}
    # call 1 at cheap-of-B prices: 1000*2 + 2000*2.5 + 100*8 = 2000 + 5000 + 800 = 7800
    assert vibe["cost_usd"].iloc[0] == pytest.approx(7800 / 1e6)


def test_reprice_with_a_missing_key_says_which(records):
    with pytest.raises(ConfigError, match="fx-strong"):
        analysis.reprice(
            records.calls,
            {"name": "x", "prices": {k: v for k, v in SHEET_B["prices"].items() if k != "fx-strong"}},
        )


def test_reassign_moves_exactly_that_roles_tokens(records):
    before = records.calls
    after = analysis.reassign(before, {"executor": "medium"}, PROFILE_SPEC, PRICE_SHEET)
    moved = before["role"] == "executor"
    assert moved.sum() == 4
    assert set(after.loc[moved, "tier"]) == {"medium"} and set(after.loc[moved, "model"]) == {
        "scripted/medium"
    }
    assert set(after.loc[moved, "price_key"]) == {"fx-medium"}
    # other roles: untouched, cost included, to the bit
    pd.testing.assert_frame_equal(after.loc[~moved, before.columns], before.loc[~moved])
    # tokens unchanged, row by row
    assert (after[list(analysis.TOKENS)] == before[list(analysis.TOKENS)]).all().all()
    # executor r0 at medium prices (3 / 15 / 0.3 / 3.75):
    #   3000*3 + 400*15 = 9000 + 6000 = 15000;  1000*3 + 2500*0.3 + 500*3.75 + 300*15 = 3000+750+1875+4500 = 10125
    r0 = after[(after["run_id"] == "micro-slugify__pdca__r0") & moved].sort_values("seq")
    assert list(r0["cost_usd"]) == pytest.approx([15000 / 1e6, 10125 / 1e6])

    totals = analysis.cost_before_after(before, after)
    assert totals.loc["total", "tokens_before"] == totals.loc["total", "tokens_after"]
    assert totals.loc["cheap", "tokens_after"] == 0  # the executor was the only cheap role
    assert totals.loc["strong", "delta_usd"] == 0.0
    expected_delta = after.loc[moved, "cost_usd"].sum() - before.loc[moved, "cost_usd"].sum()
    assert totals.loc["total", "delta_usd"] == pytest.approx(expected_delta)


def test_whatif_reassign_uses_each_runs_recorded_profile(records):
    w = analysis.whatif_reassign(records, {"executor": "medium"})
    direct = analysis.reassign(records.calls, {"executor": "medium"}, PROFILE_SPEC, PRICE_SHEET)
    assert w.calls["cost_usd"].sum() == pytest.approx(direct["cost_usd"].sum())
    assert "moved 4 calls of executor -> medium" in w.note
    assert "nothing to reassign" in analysis.whatif_reassign(records, {"scout": "strong"}).note


def test_reassign_to_an_unknown_tier_fails(records):
    with pytest.raises(ConfigError, match="unknown tier"):
        analysis.reassign(records.calls, {"executor": "huge"}, PROFILE_SPEC, PRICE_SHEET)
