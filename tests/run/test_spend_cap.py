"""An experiment-wide spending cap (issue 32, item 7): `limits.max_total_usd` / `--max-total-usd` starts
no run once the experiment's spend plus the most the runs in flight and the new one can spend would
pass it; the dry run shows it; the runs not started stay to do; the cap is not a run's setting."""

from __future__ import annotations

import threading
import time

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
    assert cap.try_start("c") is None  # 0.2 + 0.6 + 0.3 > 1: two in flight may still spend their bound
    cap.ended("a", 0.05)  # a spent 5 cents: its reservation goes, its cost stays
    cap.ended("a", 0.05)  # told again when recorded: counted once
    assert cap.spent == pytest.approx(0.25) and cap.start("c")
    assert cap.try_start("d") is None and not cap.refused  # waits: b and c are in flight
    cap.ended("b", 0.3)
    cap.ended("c", 0.3)  # 0.85 spent, nothing in flight: a run's 0.3 can never fit
    assert cap.start("d") is False and cap.refused == ["d"] and "1 run(s) not started" in cap.message()
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
    assert "every one of the 2 run(s) to do starts unless the runs spend more than $0.0001" in dry
    assert "typical run: none yet" in dry
    assert main([*base, "--max-total-usd", str(cap)]) == 3
    out, err = capsys.readouterr()
    assert "1 run(s) not started: the experiment's spend cap" in err and "stopped:" in out
    runs = sorted(p.name for p in (results / "capped" / "runs").iterdir())
    assert len(runs) == 1 and run_json(results / "capped" / "runs" / runs[0])["outcome"] == "done"
    spent = run_json(results / "capped" / "runs" / runs[0])["totals"]["cost_usd"]
    assert main([*base, "--max-total-usd", str(cap), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert f"spent so far ${spent:.4f}" in dry and "no run will start" in dry
    assert f"vibe ${spent:.4f}" in dry and "(1 run(s))" in dry  # the typical run, beside the worst case
    assert main([*base, "--max-total-usd", str(10 * per_run)]) == 0  # a higher cap: the rest runs, the
    assert len(list((results / "capped" / "runs").iterdir())) == 2  # kept run is not redone (not a setting)


def test_a_run_that_does_not_fit_yet_waits_for_one_in_flight_to_end():
    """The cap's rule read as documented: six runs that each spend little all start under a cap that
    holds one run's worst case at a time (the reservation comes back when a run ends)."""
    cap, started = SpendCap(10.0, 5.9, spent=0.0), []

    def run(i: int) -> None:
        if cap.start(f"r{i}"):
            started.append(i)
            time.sleep(0.05)
            cap.ended(f"r{i}", 0.06)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(started) == list(range(6)) and not cap.refused and cap.spent == pytest.approx(0.36)
    stop = threading.Event()
    stop.set()
    assert cap.start("held") and cap.start("late", stop) is False and not cap.refused  # Ctrl-C: not refused


@pytest.mark.slow  # six scripted runs
def test_many_cheap_runs_under_a_cap_all_run(tmp_path, capsys):
    exp = tmp_path / "cheap.yaml"
    spec = {"name": "cheap", "tasks": ["micro-slugify"], "strategies": ["vibe"], "profile": "scripted",
            "repeats": 6, "concurrency": 2, "limits": {"max_steps": 20, "max_usd": 0.05}}  # fmt: skip
    exp.write_text(yaml.safe_dump(spec))
    profile, sheet = load_profile("scripted")
    per_run = spend_bound(load_experiment(exp), profile, sheet)[0]
    cap = 1.7 * per_run  # one run's worst case at a time, not two
    results = tmp_path / "results"
    base = ["run", str(exp), "--results", str(results), "--quiet", "--no-report", "--max-total-usd", str(cap)]
    assert main([*base, "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert "every one of the 6 run(s) to do starts unless the runs spend" in dry, dry
    assert main(base) == 0, capsys.readouterr().err
    runs = list((results / "cheap" / "runs").iterdir())
    assert len(runs) == 6 and all(run_json(r)["outcome"] == "done" for r in runs)
    assert sum(run_json(r)["totals"]["cost_usd"] for r in runs) <= cap
