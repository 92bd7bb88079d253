"""kit.analysis on a synthetic experiment (tests/support/records.py): numbers checked against hand sums."""

from __future__ import annotations

import math

import pytest

from kit import analysis
from kit.analysis import report
from kit.errors import KitError
from tests.support.records import write_experiment


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def records(exp):
    return analysis.load(exp)


def test_load_reads_complete_runs_and_lists_incomplete_ones(records, exp):
    assert sorted(records.runs["run_id"]) == [
        "micro-slugify__pdca__r0",
        "micro-slugify__pdca__r1",
        "micro-slugify__vibe__r0",
        "micro-slugify__vibe__r1",
    ]
    assert records.incomplete == [exp / "runs" / "micro-slugify__vibe__r9"]
    assert len(records.calls) == 2 * 3 + 2 * 4  # vibe: 3 calls per run, pdca: 4
    assert "micro-slugify__vibe__r9" not in set(records.calls["run_id"])
    assert records.calls["output"].max() < 10**6  # the incomplete run's call is not counted


def test_runs_are_flattened(records):
    row = records.runs.set_index("run_id").loc["micro-slugify__vibe__r0"]
    assert (row["defects_critical"], row["defects_major"], row["defects_minor"], row["defects_total"]) == (
        1,
        0,
        2,
        3,
    )
    assert row["counter_cycles"] == 1
    assert row["counter_history"] == "[1, 2]"  # non-scalar counters become JSON text
    assert row["input_uncached"] == 1000 + 200 + 100
    assert row["cost_usd"] == pytest.approx(0.018315)
    assert bool(row["illustrative_prices"]) and row["price_sheet"] == "fixture-prices"


def test_calls_carry_price_key_prices_and_offsets(records):
    c = records.calls.set_index(["run_id", "seq"]).loc[("micro-slugify__pdca__r0", 2)]
    assert (c["role"], c["tier"], c["price_key"]) == ("executor", "cheap", "fx-cheap")
    assert (c["price_input"], c["price_output"], c["price_cache_read"], c["price_cache_write"]) == (
        1.0,
        2.0,
        0.1,
        1.25,
    )
    assert c["t_s"] == 10.0  # second call, 5 s apart, from run.json started_at


def test_strategy_table_matches_hand_sums(records):
    t = analysis.strategy_table(records)
    vibe, pdca = t.loc["vibe"], t.loc["pdca"]
    assert vibe["runs"] == 2 and pdca["runs"] == 2
    # vibe defects per run: (1,0,2) and (0,1,1) -> totals 3 and 2
    assert vibe["critical"] == 0.5 and vibe["major"] == 0.5 and vibe["minor"] == 1.5 and vibe["total"] == 2.5
    # t(0.975, df=1) = 12.7062; s([3, 2]) = 0.7071; half-width = 12.7062 * 0.7071 / sqrt(2) = 6.353
    assert vibe["total_ci95"] == pytest.approx(6.353, abs=1e-3)
    assert pdca["total"] == 0.5 and pdca["critical_ci95"] == 0.0
    assert vibe["claimed_done_but_failed"] == 2 and pdca["claimed_done_but_failed"] == 1
    assert vibe["tests_added"] == 1.0 and pdca["tests_added"] == 4.0  # (0+2)/2 and (3+5)/2
    assert vibe["wall_s"] == 70.0 and vibe["wall_s_ci95"] == pytest.approx(
        12.7062047 * 14.1421356 / 2**0.5, rel=1e-6
    )
    assert vibe["calls"] == 3 and pdca["calls"] == 4
    # comparable scores: 6 requirements, 2 of each severity; solved = no critical/major failure
    assert list(t.columns[:6]) == [
        "runs",
        "scored",
        "solved_rate",
        "solved_rate_ci95",
        "failed_share",
        "failed_share_ci95",
    ]
    assert pdca["solved_rate"] == 1.0 and pdca["failed_share"] == pytest.approx(1 / 12)
    assert vibe["failed_share_minor"] == pytest.approx(3 / 4) and vibe["failed_share_critical"] == 0.25
    assert vibe["solved_rate"] == 0.0 and vibe["failed_share"] == pytest.approx((3 / 6 + 2 / 6) / 2)
    runs = records.runs.set_index(["strategy", "repeat"])
    assert (
        runs.loc[("vibe", 0), "failed_share_minor"] == 1.0
        and runs.loc[("vibe", 0), "failed_share_major"] == 0
    )
    # vibe uncached per run: 1000+200+100 = 1300 and 1300+3*100 = 1600
    assert vibe["input_uncached"] == 1450 and vibe["cache_read"] == 4300 and vibe["cache_write"] == 2300
    assert vibe["output"] == 300
    # vibe r0 at medium prices (3 / 15 / 0.3 / 3.75 per M):
    #   1000*3 + 2000*3.75 + 100*15 = 12000;  200*3 + 2000*0.3 + 300*3.75 + 150*15 = 4575;
    #   100*3 + 2300*0.3 + 50*15 = 1740  -> 18315 / 1e6;  r1 adds 300 uncached * 3 = 900
    assert vibe["cost_usd"] == pytest.approx((0.018315 + 0.019215) / 2)


def test_strategy_table_interval_is_nan_with_one_run(tmp_path):
    t = analysis.strategy_table(analysis.load(write_experiment(tmp_path, repeats=1)))
    assert (t["runs"] == 1).all()
    assert t[["critical_ci95", "total_ci95", "wall_s_ci95", "cost_usd_ci95"]].isna().all().all()


def test_role_tier_table_matches_hand_sums(records):
    t = analysis.role_tier_table(records)
    ex = t.loc[("pdca", "executor", "cheap")]
    assert ex["runs"] == 2 and ex["calls"] == 4 and ex["failed"] == 0
    assert ex["input_uncached"] == (3000 + 1000) + (3100 + 1100)
    assert (ex["cache_read"], ex["cache_write"], ex["output"]) == (5000, 1000, 1400)
    # r0: 3000*1 + 400*2 = 3800 and 1000*1 + 2500*0.1 + 500*1.25 + 300*2 = 2475; r1 adds 200*1
    assert ex["cost_usd"] == pytest.approx((3800 + 2475) * 2 / 1e6 + 200 / 1e6)
    pdca_cost = records.runs.loc[records.runs["strategy"] == "pdca", "cost_usd"].sum()
    assert ex["cost_share"] == pytest.approx(ex["cost_usd"] / pdca_cost)
    assert t.xs("pdca", level="strategy")["cost_share"].sum() == pytest.approx(1.0)
    assert t.loc[("vibe", "coder", "medium")]["cost_share"] == 1.0
    assert t["calls"].sum() == len(records.calls)


def test_cache_economics_per_tier(records):
    t = analysis.cache_economics(records)
    assert list(t.index) == ["cheap", "medium", "strong"]
    med = t.loc["medium"]  # vibe coder (2 runs x 3 calls) + pdca auditor (2 runs x 1 call)
    assert med["calls"] == 8
    assert med["cost_cache_write"] == pytest.approx(2 * 2300 * 3.75 / 1e6)
    assert med["cost_cache_read"] == pytest.approx(2 * 4300 * 0.3 / 1e6)
    assert med["hit_ratio"] == pytest.approx(8600 / (4600 + 8600 + 4600))
    buckets = med[["cost_uncached", "cost_cache_read", "cost_cache_write", "cost_output"]].sum()
    assert buckets == pytest.approx(med["cost_usd"])
    # warm: calls with cache reads: 4575, 1740 (r0) and 4875, 2040 (r1) -> median (2040 + 4575) / 2
    assert med["warm_turn_usd"] == pytest.approx(3307.5 / 1e6)
    # (each read all the previous call left cached: read + write before = 2000, then 2300)
    # cold: calls that wrote and read nothing: 12000, 12300 (coder); the auditor wrote nothing
    assert med["cold_turn_usd"] == pytest.approx(12150 / 1e6)
    assert med["cold_warm_ratio"] == pytest.approx(12150 / 3307.5)
    assert math.isnan(t.loc["strong", "warm_turn_usd"])  # the orchestrator never read the cache


def test_tier_cost_shares(records):
    shares = analysis.tier_cost_shares(records, strategy="pdca")
    assert shares.sum() == pytest.approx(1.0)
    assert analysis.tier_cost_shares(records, strategy="harness").empty
    assert analysis.runs_note(records, "harness").startswith("no harness runs")


def test_report_text_has_both_tables_and_caveats(exp):
    text = report.report_text(exp)
    assert "Per strategy" in text and "Per role × tier" in text
    assert "2.50 ± 6.35" in text  # vibe defects
    header = text.splitlines()[
        text.splitlines().index(next(ln for ln in text.splitlines() if "solved" in ln and "scored" in ln))
    ]
    assert header.index("solved") < header.index("failed share") < header.index("defects")
    assert "42% ± 106%" in text  # vibe failed share: (3/6 + 2/6) / 2, t-interval over the 2 repeats
    assert "illustrative prices" in text
    assert report.SCRIPTED_LABEL in text
    assert report.EMBEDDED_LABEL not in text
    assert "1 incomplete run(s) ignored" in text


def test_embedded_label(records):
    local = analysis.Records(
        records.root, records.runs.assign(profile="local"), records.calls, records.events
    )
    assert report.EMBEDDED_LABEL in report.labels(local)


def test_results_root_and_missing_folders(exp, tmp_path):
    assert len(analysis.load(exp.parent).runs) == 4  # a results root holding the experiment
    with pytest.raises(KitError, match="no results folder"):
        analysis.load(tmp_path / "nope")
    empty = analysis.load(tmp_path / "nope", missing_ok=True)
    assert empty.runs.empty and empty.calls.empty
    assert analysis.strategy_table(empty).empty and analysis.role_tier_table(empty).empty
    assert analysis.cache_economics(empty).empty
    assert "no complete runs" in report.report_text(tmp_path)


def test_t_critical_values():
    # scipy's Student t quantiles (printed tables round them to 3 decimals)
    assert analysis.t_critical_95(1) == pytest.approx(12.7062047, abs=1e-6)
    assert analysis.t_critical_95(35) == pytest.approx(2.0301079, abs=1e-6)
    assert analysis.t_critical_95(500) == pytest.approx(1.9647198, abs=1e-6)
    assert math.isnan(analysis.t_critical_95(0))
    assert math.isnan(analysis.ci95_halfwidth([1.0]))


def test_a_results_root_with_repeated_run_ids_keeps_runs_apart(tmp_path):
    write_experiment(tmp_path, name="one")
    write_experiment(tmp_path, name="two")  # same run ids, another experiment folder
    both = analysis.load(tmp_path)
    assert len(both.runs) == 8 and both.runs["run_key"].is_unique
    assert analysis.role_tier_table(both).loc[("vibe", "coder", "medium"), "runs"] == 4
    cold = analysis.cache_economics(both).loc["medium", "cold_turn_usd"]
    assert cold == pytest.approx(12150 / 1e6)  # each run's cold first call is still its own
    check = analysis.whatif_price_sheet(both, None)
    assert (check.table["delta_usd"].abs() < 1e-12).all()
