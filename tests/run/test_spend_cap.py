"""An experiment-wide spending cap (issue 32, item 7): `limits.max_total_usd` / `--max-total-usd` starts
no run once the experiment's spend plus the most the runs in flight and the new one can spend would
pass it; the dry run shows it; the runs not started stay to do; the cap is not a run's setting."""

from __future__ import annotations

import pytest
import yaml

from kit.app.cli import main
from kit.config import load_experiment, load_profile
from kit.errors import ConfigError
from kit.run.spend import SpendCap, spend_bound
from tests.support.helpers import run_json


def test_the_cap_reserves_what_runs_in_flight_may_spend():
    cap = SpendCap(1.0, 0.3, spent=0.2)
    assert cap.start("a") and cap.start("b")  # 0.2 + 0.3 + 0.3 <= 1
    assert not cap.start("c")  # 0.2 + 0.6 + 0.3 > 1: two in flight may still spend their bound
    cap.ended("a", 0.05)  # a spent 5 cents: its reservation goes, its cost stays
    assert cap.spent == pytest.approx(0.25) and cap.start("d")
    assert cap.refused == ["c"] and "1 run(s) not started" in cap.message()
    assert SpendCap(None, None, 5.0).start("x")  # no cap: every run starts
    with pytest.raises(ConfigError, match="set limits.max_usd"):
        SpendCap(1.0, None, 0.0)  # nothing bounds what a run spends: the cap cannot be kept


@pytest.mark.slow  # three scripted runs
def test_kit_run_stops_starting_runs_at_the_cap_and_the_dry_run_says_so(tmp_path, capsys):
    exp = tmp_path / "capped.yaml"
    spec = {"name": "capped", "tasks": ["micro-slugify"], "strategies": ["vibe"], "profile": "scripted",
            "repeats": 2, "limits": {"max_steps": 20, "max_usd": 0.05}}  # fmt: skip
    exp.write_text(yaml.safe_dump(spec))
    profile, sheet = load_profile("scripted")
    per_run = spend_bound(load_experiment(exp), profile, sheet)[0]
    cap = per_run + 1e-4  # room for one run, not for a second once the first has spent anything
    results = tmp_path / "results"
    base = ["run", str(exp), "--results", str(results), "--quiet", "--no-report"]
    assert main([*base, "--max-total-usd", str(cap), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert f"experiment-wide cap: ${cap:g} (limits.max_total_usd); spent so far $0.0000" in dry
    assert "at most 1 of the 2 run(s) to do will start" in dry
    assert main([*base, "--max-total-usd", str(cap)]) == 3
    out, err = capsys.readouterr()
    assert "1 run(s) not started: the experiment's spend cap" in err and "stopped:" in out
    runs = sorted(p.name for p in (results / "capped" / "runs").iterdir())
    assert len(runs) == 1 and run_json(results / "capped" / "runs" / runs[0])["outcome"] == "done"
    spent = run_json(results / "capped" / "runs" / runs[0])["totals"]["cost_usd"]
    assert main([*base, "--max-total-usd", str(cap), "--dry-run"]) == 0
    assert f"spent so far ${spent:.4f}" in capsys.readouterr().out
    assert main([*base, "--max-total-usd", str(10 * per_run)]) == 0  # a higher cap: the rest runs, the
    assert len(list((results / "capped" / "runs").iterdir())) == 2  # kept run is not redone (not a setting)
