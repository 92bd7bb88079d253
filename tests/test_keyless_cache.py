"""Cache writes on a keyless path (issue 41, item 5; README, Job 2): experiments/keyless-cache.yaml
against the fake server -- the tiered profile's Claude models, Anthropic's caching simulated with each
model's minimum -- gives cache writes and reads on every tier, so notebook 02's read-versus-write
picture shows without a key; and every run ends solved (the oracle plays the reference solution)."""

from __future__ import annotations

import pytest

from kit import analysis
from kit.app.cli import main
from kit.records.schema import load_run
from tests.support.fake_providers import FakeAnthropic
from tests.support.fake_server import Responder


@pytest.mark.slow
def test_the_keyless_cache_experiment_writes_and_reads_the_cache_on_every_tier(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "any")
    with FakeAnthropic(Responder()) as server:
        argv = ["run", "keyless-cache", "--api-base", server.url, "--results", str(tmp_path), "--quiet",
                "--no-report"]  # fmt: skip
        assert main(argv) == 0
    out = tmp_path / "keyless-cache"
    for run_dir in sorted((out / "runs").iterdir()):
        run = load_run(run_dir)
        assert run.outcome == "done" and run.score.requirements_failed == 0, (run.strategy, run.error)
    economics = analysis.cache_economics(analysis.load(out))
    assert sorted(economics.index) == ["cheap", "medium", "strong"]
    for tier, row in economics.iterrows():
        assert row["cache_write"] > 0 and row["cache_read"] > 0 and row["cold_turns"] > 0, tier
