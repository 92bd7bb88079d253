"""The Ray executor end to end on a local Ray instance with the scripted model: the same records as the
thread executor, resume after a killed driver, a failed task recorded as ``error``.

One module-scoped Ray instance (``ray.init(num_cpus=2)``): Ray starts slowly.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import ray
import yaml

from kit import analysis
from kit.config import load_profile
from kit.paths import REPO_ROOT
from kit.run.ray_executor import INCOMING, run_on_ray, run_remote
from kit.run.runner import plan, run_experiment
from tests.support.helpers import experiment, rows, run_json, write_profile

pytestmark = pytest.mark.slow  # the whole module: a Ray instance

VOLATILE = {
    "started_at",
    "latency_s",
    "at",
    "duration_s",
    "finished_at",
    "wall_s",
    "model_s",
    "tool_s",
    "scoring_s",
    "kit_commit",
    "id",
    "tool_call_id",
}  # fmt: skip (tool-call ids are random)
# The scripted model simulates a provider's prefix cache per conversation name within one process, so
# how a prompt splits into uncached / cache-read tokens (and so the cost) depends on which runs shared
# a process before: compared as the prompt's total instead.
SPLIT = ("input_uncached", "cache_read", "cache_write")


@pytest.fixture(scope="module")
def cluster():
    for attempt in (1, 2, 3):  # a heavily loaded machine can miss Ray's fixed 15 s wait for its node agent
        try:
            ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
            break
        except Exception:
            ray.shutdown()
            if attempt == 3:
                raise
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _stable(obj):
    if isinstance(obj, dict):
        out = {k: _stable(v) for k, v in obj.items() if k not in VOLATILE}
        if "input_uncached" in out:
            out["prompt"] = sum(out.pop(k) for k in SPLIT)
            out.pop("cost_usd", None)
            out.pop("raw_usage", None)
        return out
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    if isinstance(obj, str):  # pytest's own timing in tool output ("2 passed in 0.05s")
        return re.sub(r" in \d+(\.\d+)?s\b", " in Ns", obj)
    return obj


def test_ray_writes_the_same_records_as_the_thread_executor(cluster, tmp_path):
    profile = write_profile(tmp_path, "scripted/oracle", "native")
    exp = experiment("same", profile, ["micro-slugify"], ["vibe"], repeats=2, concurrency=2)
    a = run_experiment(exp, results_dir=tmp_path / "thread", progress=False)
    b = run_experiment(exp, results_dir=tmp_path / "ray", progress=False, executor="ray")
    names = sorted(d.name for d in (a / "runs").iterdir())
    assert names == sorted(d.name for d in (b / "runs").iterdir()) and len(names) == 2
    for name in names:
        ta, tb = run_json(a / "runs" / name), run_json(b / "runs" / name)
        assert tb["outcome"] == "done" and tb["score"]["requirements_failed"] == 0, tb["error"]
        assert _stable(ta) == _stable(tb)
        for log in ("calls.jsonl", "events.jsonl", "transcript.jsonl"):
            assert _stable(rows(a / "runs" / name, log)) == _stable(rows(b / "runs" / name, log)), log
        assert (a / "runs" / name / "diff.patch").read_text() == (
            b / "runs" / name / "diff.patch"
        ).read_text()
        assert (b / "runs" / name / "calls.parquet").exists()
        assert not (b / "runs" / name / "repo").exists()  # the clone stays on the worker
    assert not (b / INCOMING).exists()
    ra, rb = analysis.load(a), analysis.load(b)
    assert len(ra.calls) == len(rb.calls) > 0 and (rb.calls["cost_usd"] > 0).all()


def test_a_failed_task_is_a_run_with_outcome_error(cluster, tmp_path):
    path = write_profile(tmp_path, "scripted/oracle", "native")
    exp = experiment("fail", path, ["micro-slugify"], ["vibe"], repeats=3, concurrency=2)
    profile, sheet = load_profile(path)

    def flaky(task_blob, strategy, repeat, *rest):  # pickled by value: defined here, not importable
        if repeat == 1:
            os._exit(3)  # the worker process dies
        if repeat == 2:
            raise RuntimeError("no space left on the worker")
        return run_remote(task_blob, strategy, repeat, *rest)

    out = tmp_path / "results" / "fail"
    records = list(run_on_ray(plan(exp), exp, profile, sheet, out, "", remote_fn=flaky))
    assert sorted(r.outcome for r in records) == ["done", "error", "error"]
    died, raised, fine = (
        run_json(out / "runs" / f"micro-slugify__vibe__scripted-test__r{i}") for i in (1, 2, 3)
    )
    assert died["outcome"] == "error" and died["error"].startswith("ray task failed:")
    assert raised["outcome"] == "error" and "no space left on the worker" in raised["error"]
    assert fine["outcome"] == "done" and fine["score"]["requirements_failed"] == 0
    notes = rows(out / "runs" / "micro-slugify__vibe__scripted-test__r2", "events.jsonl")
    assert notes[0]["kind"] == "note" and "RuntimeError" in notes[0]["detail"]
    assert len(analysis.load(out).runs) == 3


def test_a_killed_driver_then_a_rerun_finishes_every_run_exactly_once(cluster, tmp_path):
    profile = write_profile(tmp_path, "scripted/oracle", "native")
    exp_path = tmp_path / "kill.yaml"
    exp = experiment("kill", profile, ["micro-slugify"], ["vibe"], repeats=3, concurrency=1)
    exp_path.write_text(yaml.safe_dump(exp.model_dump(mode="json")))
    env = {**os.environ, "ORCHBENCH_RESULTS_DIR": str(tmp_path / "results")}
    cmd = [sys.executable, "-m", "kit", "run", str(exp_path), "--quiet", "--no-report",
           "--executor", "ray", "--address", cluster]  # fmt: skip
    runs = tmp_path / "results" / "kill" / "runs"

    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(runs.glob("*/run.json")) and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished_before = {p.parent.name for p in runs.glob("*/run.json")}
    assert 1 <= len(finished_before) < 3
    assert all((runs / n / "run.json").exists() for n in os.listdir(runs))  # no torn folder in runs/
    mtimes = {name: (runs / name / "run.json").stat().st_mtime_ns for name in finished_before}

    subprocess.run(cmd, cwd=REPO_ROOT, env=env, check=True, timeout=300)

    dirs = sorted(runs.iterdir())
    assert [d.name for d in dirs] == [f"micro-slugify__vibe__scripted-test__r{i}" for i in range(1, 4)]
    for d in dirs:
        calls = rows(d, "calls.jsonl")
        assert [c["seq"] for c in calls] == list(range(1, len(calls) + 1))  # no duplicates, no gaps
        assert run_json(d)["calls"] == len(calls) == 3
        assert run_json(d)["score"]["requirements_failed"] == 0
    for name, mtime in mtimes.items():  # finished runs were skipped, not redone
        assert (runs / name / "run.json").stat().st_mtime_ns == mtime
    assert not (runs.parent / INCOMING).exists()


def test_ray_runs_report_their_progress_to_the_driver_as_they_go(cluster, tmp_path):
    """issue 32, item 2: the bar moves with Ray too -- each worker's run sends its calls, tokens,
    dollars, role and phase to the driver while it goes."""
    from kit.run.progress import ExperimentState

    profile = write_profile(tmp_path, "scripted/oracle", "native")
    exp = experiment("live", profile, ["micro-slugify"], ["vibe"], repeats=2, concurrency=2)
    seen, state = [], ExperimentState()
    original = state.update

    def spy(progress):
        original(progress)
        seen.append((progress, state.line()))

    state.update = spy
    out = run_experiment(exp, results_dir=tmp_path / "ray", progress=False, executor="ray", state=state)
    for run_dir in (out / "runs").iterdir():
        mine = [p for p, _ in seen if p.run_id == run_dir.name]
        calls = rows(run_dir, "calls.jsonl")
        counts = [p.calls for p in mine if p.calls]  # an update as each call is sent and as it is answered
        assert sorted(set(counts)) == list(range(1, len(calls) + 1)) and counts == sorted(counts), (
            run_dir.name
        )
        assert mine[-1].role == "coder" and mine[-1].phase == "code"
    assert any(" calls " in line and "coder/code" in line for _, line in seen)
