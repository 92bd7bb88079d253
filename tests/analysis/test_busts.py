"""Cache busts found and priced, on a scripted run with a planted context trimming and a 6-minute
pause; the cache-read share per role; warm and cold turns as the PDCA write-up defines them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
import yaml

from kit import analysis
from kit.analysis import busts as cache
from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.records.schema import EVENTS, read_jsonl
from kit.run.runner import run_experiment
from tests.support.helpers import experiment, scripted_profile

BIG = "python -c \"print('x' * 2000)\""  # an output the agent loop shortens once the prompt is too big
GAP_STEP = 6


class Clock:
    """The gateway's clock, jumped 6 minutes forward before one call."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> str:
        now = datetime.now(UTC) + self.offset
        return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def policy(clock: Clock):
    def reply(req):
        step = sum(m["role"] == "assistant" for m in req.messages)
        if step == GAP_STEP - 1:
            clock.offset += timedelta(minutes=6)  # the next call starts 6 minutes later
        usage = {"cached_tokens": 0} if step == GAP_STEP else None  # the entry expired meanwhile
        if step < 3:
            return {**render("native", "run", {"command": BIG}, "Print."), "usage": usage}
        if step < 9:
            return {**render("native", "read_file", {"path": "README.md"}, "Read."), "usage": usage}
        return render("native", FINISH, {"summary": "Done."}, "Done.")

    return reply


@pytest.fixture
def busted(tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr("kit.model.gateway.utc_now", clock)
    model = scripted.register(policy(clock), "busts")
    profile, sheet = scripted_profile(model)
    spec = profile.tiers["cheap"].model_copy(update={"context_window": 2000})  # ~5,600 characters
    profile = profile.model_copy(update={"tiers": dict.fromkeys(("cheap", "medium", "strong"), spec)})
    (tmp_path / "profiles").mkdir()
    (tmp_path / "prices").mkdir()
    (tmp_path / "prices" / "test.yaml").write_text(yaml.safe_dump(sheet.model_dump(mode="json")))
    path = tmp_path / "profiles" / "busts.yaml"
    path.write_text(yaml.safe_dump(profile.model_dump(mode="json", exclude_none=True)))
    out = run_experiment(
        experiment("busts", path, ["micro-slugify"], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    return analysis.load(out), out


def test_a_trimming_and_a_six_minute_gap_are_found_with_their_causes_and_costs(busted):
    records, out = busted
    (run_dir,) = (out / "runs").iterdir()
    trims = [e for e in read_jsonl(run_dir / EVENTS) if e["name"] == "context_trimmed"]
    assert trims and all(e["conversation"] == "coder" and e["kind"] == "note" for e in trims)
    found = cache.cache_busts(records)
    calls = records.calls.sort_values("seq").reset_index(drop=True)
    assert set(found["cause"].str.replace(r"gap of [\d.]+ min", "gap", regex=True)) == {
        "context trimmed",
        "gap > cache lifetime (5m)",
    }, found
    gap = found[found["cause"].str.startswith("gap of")]
    (seq,) = gap["seq"]
    assert seq == calls.loc[GAP_STEP, "seq"] and gap["cause"].iloc[0].startswith("gap of 6.")
    prev = calls.loc[GAP_STEP - 1]
    lost = int(prev["input_uncached"] + prev["cache_read"])  # the whole previous prompt was cached
    assert gap["lost_tokens"].iloc[0] == lost and gap["uncached"].iloc[0] == lost
    # the scripted profile's prices: input 1.0, cache read 0.1 per M -> 0.9 per M tokens lost
    assert gap["extra_usd"].iloc[0] == pytest.approx(lost * 0.9 / 1e6)
    trimmed = found[found["cause"] == "context trimmed"]
    assert len(trimmed) == len(trims)  # one bust per trimming, at the call that followed it
    assert (trimmed["extra_usd"] > 0).all()
    table = cache.bust_table(records, found)
    row = table.loc[("vibe", "coder", records.calls["tier"].iloc[0])]
    assert row["busts"] == len(found) and row["extra_usd"] == pytest.approx(found["extra_usd"].sum())
    assert "context trimmed" in row["causes"] and "gap > lifetime" in row["causes"]


def test_the_report_shows_the_busts_and_the_read_share_per_role(busted):
    from kit.analysis import report

    records, out = busted
    text = report.report_text(out)
    assert "Cache busts per strategy × role × tier" in text
    assert "context trimmed" in text and "gap > lifetime" in text
    share = cache.cache_read_share(records)
    assert share.loc[("vibe", "coder"), "kind"] == "main"
    assert 0 < share.loc[("vibe", "coder"), "read_share"] < 1
    assert "Cache-read share per role" in text


def _call(conv: str, seq: int, read: int, write: int, uncached: int, cost: float) -> dict:
    return {
        "run_key": "e/r", "conversation": conv, "role": conv, "tier": "strong", "seq": seq, "model": "m",
        "input_uncached": uncached, "cache_read": read, "cache_write": write, "output": 10,
        "cost_usd": cost, "price_input": 5.0, "price_output": 25.0, "price_cache_read": 0.5,
        "price_cache_write": 6.25, "price_cache_write_1h": 10.0, "cache_write_1h": 0,
    }  # fmt: skip


def test_warm_and_cold_turns_follow_the_writeups_definitions():
    """cold = wrote its prompt, read nothing; warm = a repeated turn whose whole prefix (the previous
    prompt) was read from the cache. A call that read part of its prefix and wrote the rest again is
    neither (today's definition counts it as warm)."""
    calls = pd.DataFrame(
        [
            _call("a", 1, 0, 4000, 10, 0.0300),  # cold: wrote 4,000, read nothing
            _call("a", 2, 4010, 200, 5, 0.0040),  # warm: read the whole previous prompt (4,010)
            _call("a", 3, 1000, 3400, 5, 0.0250),  # partial hit (a bust): neither warm nor cold
            _call("b", 4, 0, 5000, 10, 0.0400),  # cold
            _call("b", 5, 5010, 100, 5, 0.0030),  # warm
        ]
    )
    table = analysis.cache_economics(calls)
    assert table.loc["strong", "cold_turn_usd"] == pytest.approx(0.035)  # median of 0.030, 0.040
    assert table.loc["strong", "warm_turn_usd"] == pytest.approx(0.0035)  # median of 0.004, 0.003
    assert table.loc["strong", "cold_warm_ratio"] == pytest.approx(10.0)
    assert table.loc["strong", "warm_turns"] == 2 and table.loc["strong", "cold_turns"] == 2


def test_warm_and_cold_sit_beside_the_writeups_figures():
    from kit.analysis import reference

    ref = reference.load_reference("datasets/reference/pdca_writeup.yaml")
    calls = pd.DataFrame([_call("a", 1, 0, 4000, 10, 0.0300), _call("a", 2, 4010, 200, 5, 0.0040)])
    table = reference.warm_cold_vs_reference(ref, analysis.cache_economics(calls))
    assert list(table.index) == ["measured: strong", "write-up: strong"]
    assert table.loc["measured: strong", "cold_warm_ratio"] == pytest.approx(7.5)
    assert table.loc["write-up: strong", "cold_warm_ratio"] == pytest.approx(0.0794 / 0.0034)


def test_a_zero_hit_ratio_is_explained_in_words():
    """Haiku 4.5 never reached its 4,096-token minimum; Sonnet 4.5 wrote but nothing read it back."""
    from pathlib import Path

    def row(conv, seq, tier, model, uncached, write):
        return {
            **_call(conv, seq, 0, write, uncached, 0.01), "tier": tier, "model": model,
            "usage_estimated": False, "cache_lookback": None, "latency_s": 1.0, "t_s": float(seq),
            "strategy": "pdca",
        }  # fmt: skip

    haiku, sonnet = "anthropic/claude-haiku-4-5", "anthropic/claude-sonnet-4-5"
    calls = pd.DataFrame(
        [row("scout", 1, "cheap", haiku, 1800, 0), row("scout#2", 2, "cheap", haiku, 1830, 0),
         row("scout#3", 3, "cheap", haiku, 2900, 0), row("auditor", 4, "medium", sonnet, 10, 2000)]
    )  # fmt: skip
    records = analysis.Records(Path("r"), pd.DataFrame(), calls, pd.DataFrame())
    notes = cache.cache_notes(records)
    assert any(
        n.startswith("cheap (Haiku 4.5, 3 calls): 0 % read from the cache -- no Haiku 4.5 prompt reached "
                     "its 4,096-token minimum; median prompt 1,830 tokens (largest 2,900)")
        for n in notes
    ), notes  # fmt: skip
    assert any("medium (Sonnet 4.5" in n and "1 of 1 conversations had a single call" in n for n in notes)
    assert "cheap: no cold turn -- no call wrote its prompt to the cache while reading nothing" in "\n".join(
        notes
    )
