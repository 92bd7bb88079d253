"""vibe + runner end to end with the scripted model, in every action mode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from kit.config import Limits
from kit.errors import ConfigError
from kit.paths import REPO_ROOT
from kit.run.runner import run_experiment
from tests.support.helpers import experiment, rows, run_json, write_profile

MODES = ["native", "json", "text"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_oracle_applies_the_reference_solution_and_scores_zero_defects(tmp_path, mode):
    profile = write_profile(tmp_path, "scripted/oracle", mode)
    out = run_experiment(
        experiment("oracle", profile, ["micro-slugify", "bugfix-date-range"], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    for run_dir in sorted((out / "runs").iterdir()):
        run = run_json(run_dir)
        assert run["outcome"] == "done" and run["claimed_done"] is True, run["error"]
        score = run["score"]
        assert score["requirements_total"] > 0
        assert score["requirements_failed"] == 0
        assert score["defects"] == {"critical": 0, "major": 0, "minor": 0}
        assert score["claimed_done_but_failed"] is False
        assert score["regressions"] == 0
        assert score["files_touched"] >= 1
        calls = rows(run_dir, "calls.jsonl")
        assert all(c["action_mode"] == mode for c in calls)
        assert run["calls"] == len(calls) and run["totals"]["output"] == sum(c["output"] for c in calls)
        tools = [e for e in rows(run_dir, "events.jsonl") if e["kind"] == "tool"]
        assert [e["name"] for e in tools][-1] == "run"  # it ran the tests before saying done
        assert (run_dir / "diff.patch").read_text().startswith("diff --git")
        assert run["format_version"] == 1 and run["price_sheet"]["name"] == "test"


@pytest.mark.parametrize("mode", MODES)
def test_saying_done_scores_every_requirement_as_a_defect(tmp_path, mode):
    profile = write_profile(tmp_path, "scripted/done", mode)
    out = run_experiment(
        experiment("done", profile, ["micro-slugify"], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    (run_dir,) = (out / "runs").iterdir()
    run = run_json(run_dir)
    score = run["score"]
    assert run["claimed_done"] is True
    assert score["requirements_failed"] == score["requirements_total"] == 7
    assert score["defects"] == {"critical": 1, "major": 3, "minor": 3}
    assert score["claimed_done_but_failed"] is True
    assert score["files_touched"] == 0
    assert run["project"] == ""  # a hand-made task: a cluster of its own (kit/importers/size.py measures it)
    assert run["task_size"] == {
        "code_lines": 4,
        "files": 1,
        "hidden_tests": 7,
        "base_code_lines": 10,
        "prompt_tokens": 174,
        "long": False,
    }


def test_step_cap_gives_outcome_capped(tmp_path):
    from kit.model import scripted

    model = scripted.register(
        lambda req: {"tool_calls": [{"name": "list_files", "arguments": {}}]}, name="looper"
    )
    profile = write_profile(tmp_path, model, "native")
    out = run_experiment(
        experiment("cap", profile, ["micro-slugify"], ["vibe"], limits=Limits(max_steps=5)),
        results_dir=tmp_path / "results",
        progress=False,
    )
    (run_dir,) = (out / "runs").iterdir()
    run = run_json(run_dir)
    assert run["outcome"] == "capped" and run["claimed_done"] is False
    assert run["counters"]["steps"] == 5 and run["calls"] == 5


@pytest.mark.slow
def test_an_exception_inside_a_run_is_recorded_and_the_experiment_goes_on(tmp_path):
    from kit.model import scripted

    def broken(req):
        raise RuntimeError("policy exploded")

    model = scripted.register(broken, name="broken")
    profile = write_profile(tmp_path, model, "native")
    out = run_experiment(
        experiment("err", profile, ["micro-slugify", "bugfix-date-range"], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    runs = [run_json(d) for d in (out / "runs").iterdir()]
    assert len(runs) == 2
    assert all(r["outcome"] == "error" and "policy exploded" in r["error"] for r in runs), [
        (r["outcome"], r.get("error")) for r in runs
    ]
    micro = next(r for r in runs if r["task"] == "micro-slugify")
    assert micro["score"]["requirements_failed"] == micro["score"]["requirements_total"] == 7


def test_unknown_names_fail_up_front_with_the_valid_ones(tmp_path):
    profile = write_profile(tmp_path, "scripted/oracle")
    with pytest.raises(ConfigError) as info:
        run_experiment(
            experiment("x", profile, ["micro-slugify"], ["vibes"]), results_dir=tmp_path, progress=False
        )
    assert "vibe" in str(info.value)
    with pytest.raises(ConfigError) as info:
        run_experiment(experiment("x", profile, ["nope"], ["vibe"]), results_dir=tmp_path, progress=False)
    assert "micro-slugify" in str(info.value)


@pytest.mark.slow
def test_a_finished_run_is_skipped_on_rerun(tmp_path):
    profile = write_profile(tmp_path, "scripted/oracle")
    exp = experiment("again", profile, ["micro-slugify"], ["vibe"])
    out = run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    (run_dir,) = (out / "runs").iterdir()
    before = (run_dir / "run.json").read_text()
    run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    assert (run_dir / "run.json").read_text() == before


@pytest.mark.slow
def test_sigkill_in_the_middle_then_rerun_finishes_every_run_exactly_once(tmp_path):
    profile = write_profile(tmp_path, "scripted/oracle", "native")
    exp_path = tmp_path / "kill.yaml"
    exp = experiment("kill", profile, ["micro-slugify"], ["vibe"], repeats=4)
    exp_path.write_text(yaml.safe_dump(exp.model_dump(mode="json")))
    env = {
        **os.environ,
        "ORCHBENCH_SCRIPTED_LATENCY_S": "0.4",
        "ORCHBENCH_RESULTS_DIR": str(tmp_path / "results"),
    }
    cmd = [sys.executable, "-m", "kit", "run", str(exp_path), "--quiet", "--no-report"]
    runs = tmp_path / "results" / "kill" / "runs"

    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill it once one run is finished and the next has started
        done = list(runs.glob("*/run.json")) if runs.exists() else []
        started = [d for d in runs.iterdir() if (d / "calls.jsonl").exists()] if runs.exists() else []
        if done and len(started) > len(done):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished_before = {p.parent.name for p in runs.glob("*/run.json")}
    assert 1 <= len(finished_before) < 4
    torn = [d for d in runs.iterdir() if not (d / "run.json").exists()]
    assert torn, "the kill should have left a torn run behind"
    mtimes = {name: (runs / name / "run.json").stat().st_mtime_ns for name in finished_before}

    subprocess.run(
        cmd, cwd=REPO_ROOT, env={**env, "ORCHBENCH_SCRIPTED_LATENCY_S": "0"}, check=True, timeout=300
    )

    dirs = sorted(runs.iterdir())
    assert [d.name for d in dirs] == [f"micro-slugify__vibe__scripted-test__r{i}" for i in range(1, 5)]
    for d in dirs:
        run = run_json(d)
        calls = rows(d, "calls.jsonl")
        assert [c["seq"] for c in calls] == list(range(1, len(calls) + 1))  # no duplicates, no gaps
        assert run["calls"] == len(calls) == 3  # write, run tests, done
        assert run["score"]["requirements_failed"] == 0
    for name, mtime in mtimes.items():  # finished runs were skipped, not redone
        assert (runs / name / "run.json").stat().st_mtime_ns == mtime


def test_secrets_in_a_profile_never_reach_run_json():
    from kit.config import ModelSpec, Profile
    from kit.run.runner import redacted

    spec = ModelSpec(model="openai/x", extra={"api_key": "sk-live-123", "frequency_penalty": 0.8})
    data = redacted(
        Profile(name="p", price_sheet="s", tiers={t: spec for t in ("cheap", "medium", "strong")})
    )
    assert "sk-live-123" not in str(data)
    assert data["tiers"]["cheap"]["extra"] == {"api_key": "***", "frequency_penalty": 0.8}


def test_a_missing_key_fails_once_before_any_run(tmp_path, monkeypatch):
    from kit.errors import MissingKeyError

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    exp = experiment("nokey", "tiered", ["micro-slugify"], ["vibe"])
    with pytest.raises(MissingKeyError) as info:
        run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    assert "ANTHROPIC_API_KEY" in str(info.value) and "--profile local" in str(info.value)
    assert not list((tmp_path / "results" / "nokey" / "runs").iterdir())  # nothing half-written


def test_retry_errors_reruns_only_the_runs_that_failed(tmp_path):
    from kit.model import scripted

    state = {"broken": True}

    def flaky(req):
        if state["broken"]:
            raise RuntimeError("policy exploded")
        return render_done(req)

    def render_done(req):
        from kit.model.actions import render

        return render(req.context.get("action_mode") or "native", "finish", {"summary": "ok"})

    profile = write_profile(tmp_path, scripted.register(flaky, name="flaky"), "native")
    exp = experiment("flaky", profile, ["micro-slugify"], ["vibe"])
    out = run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    (run_dir,) = (out / "runs").iterdir()
    assert run_json(run_dir)["outcome"] == "error"
    state["broken"] = False
    run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    assert run_json(run_dir)["outcome"] == "error"  # a plain rerun skips finished runs
    run_experiment(exp, results_dir=tmp_path / "results", progress=False, retry_errors=True)
    assert run_json(run_dir)["outcome"] == "done"
