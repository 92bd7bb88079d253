"""The cache simulator of the what-ifs, validated against the fake Anthropic server: an experiment run
with the strong tier on Opus 4.5, re-simulated on Sonnet 4.5, is compared with the same experiment
really rerun on Sonnet 4.5 (the fake caches like Anthropic: per-model minimums, 20-block lookback)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kit import analysis
from kit.config import load_price_sheet
from kit.model.actions import FINISH, render
from kit.run.runner import run_experiment
from tests.support.fake_providers import PolicyResponder
from tests.support.helpers import experiment

OPUS, SONNET, HAIKU = (f"anthropic/claude-{m}" for m in ("opus-4-5", "sonnet-4-5", "haiku-4-5"))
FILES = ["textkit.py", "README.md", "tests/test_textkit.py"]


BIG = "python -c \"print('lorem ipsum dolor ' * 300)\""  # ~1,400 tokens of output


def reader(turns: int):
    """A coder that reads the task's files (every third turn a long command output) for ``turns - 1``
    turns, then says it is done: its prompt crosses Opus's 4,096-token minimum half-way."""

    def policy(req):
        step = sum(m["role"] == "assistant" for m in req.messages)
        if step < turns - 1:
            if step % 3 == 1:
                return render("native", "run", {"command": BIG}, "Print a long text.")
            path = FILES[step % len(FILES)]
            return render("native", "read_file", {"path": path}, f"Read {path}.")
        return render("native", FINISH, {"summary": "Read everything."}, "Done.")

    return policy


def tiered_profile(folder: Path, server, strong: str) -> Path:
    (folder / "profiles").mkdir(parents=True, exist_ok=True)
    (folder / "prices").mkdir(parents=True, exist_ok=True)
    sheet = load_price_sheet("anthropic").model_dump(mode="json")
    (folder / "prices" / "anthropic.yaml").write_text(yaml.safe_dump(sheet))
    tier = {"api_base": server.url, "api_key_env": "FAKE_ANTHROPIC_KEY"}
    name = f"fake-{strong.rsplit('-', 2)[0].rsplit('-', 1)[-1]}"
    profile = {
        "name": name,
        "price_sheet": "anthropic",
        "tiers": {
            "cheap": {"model": HAIKU, **tier},
            "medium": {"model": SONNET, **tier},
            "strong": {"model": strong, **tier},
        },
        "retry": {"max_retries": 1, "backoff_s": 0.01, "max_backoff_s": 0.05},
    }
    path = folder / "profiles" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def run(tmp_path: Path, server, strong: str, name: str) -> analysis.Records:
    """vibe with its coder on the strong tier, twice (the second repeat may read the first's cache)."""
    profile = tiered_profile(tmp_path / name, server, strong)
    exp = experiment(name, profile, ["micro-slugify"], ["vibe"], repeats=2, tiers={"vibe": "strong"})
    out = run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    return analysis.load(out)


@pytest.fixture(scope="module")
def opus_and_sonnet(tmp_path_factory):
    import os

    from tests.support.fake_providers import FakeAnthropic

    os.environ["FAKE_ANTHROPIC_KEY"] = "test-key"
    tmp = tmp_path_factory.mktemp("cachesim")
    with FakeAnthropic(PolicyResponder(reader(10))) as server:
        opus = run(tmp, server, OPUS, "on-opus")
        sonnet = run(tmp, server, SONNET, "on-sonnet")
    os.environ.pop("FAKE_ANTHROPIC_KEY", None)
    return opus, sonnet


def test_resimulating_opus_runs_on_sonnet_matches_a_real_sonnet_rerun(opus_and_sonnet):
    opus, sonnet = opus_and_sonnet
    assert set(opus.runs["outcome"]) == {"done"} and set(sonnet.runs["outcome"]) == {"done"}
    assert set(opus.calls["model"]) == {OPUS} and set(sonnet.calls["model"]) == {SONNET}
    whatif = analysis.whatif_model(opus, {"strong": SONNET})
    assert whatif.cache_resimulated
    moved = whatif.calls[whatif.calls["tier"] == "strong"]
    assert moved["cache_resimulated"].all() and set(moved["model"]) == {SONNET}
    real = sonnet.calls["cost_usd"].sum()
    resimulated, as_recorded = moved["cost_usd"].sum(), moved["cost_usd_as_recorded"].sum()
    assert resimulated == pytest.approx(real, rel=0.10), (resimulated, as_recorded, real)
    # the effect the simulator exists for: Opus (4,096-token minimum) left early prompts uncached that
    # Sonnet (1,024) caches, so the tokens-as-recorded figure is far off
    assert abs(as_recorded - real) / real > 0.10, (resimulated, as_recorded, real)
    table = whatif.table
    assert {"cost_before", "cost_after", "cost_after_as_recorded"} <= set(table.columns)
    assert table.loc["total", "cost_after"] == pytest.approx(resimulated)
    view = whatif.view("strategy")
    assert view.loc["vibe", "cost_after"] == pytest.approx(resimulated)
    assert view.loc["vibe", "cost_after_as_recorded"] == pytest.approx(as_recorded)


def test_resimulating_on_the_recorded_model_reproduces_the_recorded_split_exactly(opus_and_sonnet):
    for records in opus_and_sonnet:
        model = records.calls["model"].iloc[0]
        whatif = analysis.whatif_model(records, {"strong": model})
        calls = whatif.calls
        assert calls["cache_resimulated"].all()
        for col in ("input_uncached", "cache_read", "cache_write"):
            assert (calls[col] == records.calls[col]).all(), (model, col)
        assert calls["cost_usd"].to_numpy() == pytest.approx(records.calls["cost_usd"].to_numpy())
        assert records.calls["cache_read"].sum() > 0  # there was caching to reproduce


def test_the_one_hour_whatif_prices_the_experts_writes_at_the_1h_price(opus_and_sonnet):
    _, sonnet = opus_and_sonnet
    whatif = analysis.whatif_cache_ttl(sonnet, {"coder": "1h"})
    calls = whatif.calls
    assert calls["cache_resimulated"].all()
    assert (calls["cache_write_1h"] == calls["cache_write"]).all() and calls["cache_write"].sum() > 0
    # same split (no pause was longer than 5 minutes), writes at 6.0 instead of 3.75 per M
    assert (calls["cache_write"] == sonnet.calls["cache_write"]).all()
    extra = (calls["cache_write"] * (6.0 - 3.75)).sum() / 1e6
    assert whatif.table.loc["total", "delta_usd"] == pytest.approx(extra)


def test_moving_a_role_to_another_tier_resimulates_its_cache(opus_and_sonnet):
    opus, sonnet = opus_and_sonnet
    moved = analysis.whatif_reassign(opus, {"coder": "medium"})  # medium is Sonnet 4.5
    assert moved.cache_resimulated and "cache re-simulated for 20 of 20 calls" in moved.note
    calls = moved.calls
    assert set(calls["model"]) == {SONNET} and set(calls["tier"]) == {"medium"}
    assert calls["cost_usd"].sum() == pytest.approx(sonnet.calls["cost_usd"].sum(), rel=0.10)
    assert (calls["cache_read"] == sonnet.calls["cache_read"]).mean() > 0.9


def test_a_pause_longer_than_five_minutes_busts_the_5m_cache_but_not_the_1h_one():
    import pandas as pd

    from kit.analysis.cachesim import resimulate

    def call(seq, at, total, read, write, lookback, points, hashes):
        return {
            "run_key": "e/r", "experiment": "e", "seq": seq, "model": SONNET, "started_at": at,
            "input_uncached": total - read - write, "cache_read": read, "cache_write": write,
            "cache_write_1h": 0, "cache_ttl": "5m", "cache_lookback": lookback,
            "cache_breakpoints": points, "cache_prefix_hashes": hashes,
        }  # fmt: skip

    calls = pd.DataFrame(
        [
            call(1, "2026-01-01T00:00:00.000Z", 2000, 0, 2000, [[1500, "s"], [2000, "a"]], [1500, 2000], ["s", "a"]),
            call(2, "2026-01-01T00:06:00.000Z", 2300, 0, 2300, [[1500, "s"], [2000, "a"], [2300, "b"]], [1500, 2300], ["s", "b"]),
        ]
    )  # fmt: skip
    five = resimulate(calls)  # the recorded lifetime: the entry died after 5 minutes, as recorded
    assert list(five["cache_read"]) == [0, 0] and list(five["cache_write"]) == [2000, 2300]
    hour = resimulate(calls, ttls=pd.Series(["1h", "1h"]))
    assert list(hour["cache_read"]) == [0, 2000] and list(hour["cache_write"]) == [2000, 300]
    assert list(hour["cache_write_1h"]) == [2000, 300]
