"""The published reference figures: shares and ratios are computed from the raw numbers in the file."""

from __future__ import annotations

import pytest

from kit.analysis import reference
from kit.errors import ConfigError


@pytest.fixture(scope="module")
def ref():
    return reference.load_reference()


def test_source_is_named(ref):
    assert "PDCA write-up that motivated orchbench" in ref.source and "issue #7" in ref.source


def test_raw_numbers_are_stored(ref):
    assert (ref.tiers["cheap"].messages, ref.tiers["cheap"].cost_usd) == (3485, 4.44)
    assert ref.tiers["medium"].input_tokens == 3_360_000 and ref.tiers["strong"].output_tokens == 11_500
    assert (ref.totals.hours, ref.totals.sessions, ref.totals.messages) == (12, 159, 3829)
    assert sum(t.cost_usd for t in ref.tiers.values()) == pytest.approx(ref.totals.cost_usd)


def test_tier_shares_round_to_the_published_percentages(ref):
    shares = reference.tier_shares(ref)
    assert {tier: round(100 * s) for tier, s in shares.items()} == {"cheap": 60, "medium": 37, "strong": 3}
    assert shares.sum() == pytest.approx(1.0)


def test_cache_and_turn_ratios(ref):
    assert round(reference.cache_write_read_ratio(ref)) == 25  # 5 / 0.2
    assert reference.cold_warm_ratio(ref) == pytest.approx(23.35, abs=0.01)  # 0.0794 / 0.0034
    assert round(reference.cold_warm_ratio(ref)) == 23


def test_headline_prints_the_computed_figures(ref):
    text = reference.headline(ref)
    assert "cheap 60%, medium 37%, strong 3%" in text
    assert "= 25x" in text and "= 23.35x" in text


def test_comparison_runs(ref):
    table = reference.comparison_table(ref)
    pdca = table[(table["strategy"] == "pdca") & (table["series"] == "original")].iloc[0]
    assert (pdca["minutes"], pdca["cost_usd"], pdca["own_tests"]) == (78.0, 1.1882, 19)
    assert len(table) == 7


def test_shares_vs_measured_without_measurements(ref):
    import pandas as pd

    table = reference.shares_vs_measured(ref, pd.Series(dtype=float))
    assert list(table.index) == ["cheap", "medium", "strong"] and table["measured"].isna().all()


def test_a_broken_file_names_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsource: y\ntiers: {}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="totals"):
        reference.load_reference(bad)
