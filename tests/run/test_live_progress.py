"""Live progress inside runs (issue 32, item 2): while a run goes, `kit run`'s bar and the lab show per
running run its calls, tokens, dollars, current role and phase, updated as calls finish; the dollars
include the runs kept from earlier invocations."""

from __future__ import annotations

import pytest

from kit.records.recorder import Progress, RunRecorder
from kit.records.schema import CallRecord
from kit.run.progress import ExperimentState
from kit.run.runner import run_experiment
from tests.support.helpers import experiment, rows, run_json, write_profile


def test_the_recorder_reports_each_call_and_phase(tmp_path):
    seen: list[Progress] = []
    rec = RunRecorder(tmp_path / "run", "micro-slugify__pdca__p__r1", on_progress=seen.append)
    rec.event("phase", "", "PLAN", "r0 n0")
    rec.call(
        CallRecord(
            run_id="x", role="scout", tier="cheap", model="m", input_uncached=100, output=20, cost_usd=0.01
        )
    )
    rec.call(
        CallRecord(
            run_id="x", role="analyst", tier="medium", model="m", cache_read=300, output=5, cost_usd=0.02
        )
    )
    rec.event("phase", "", "DO", "r0 n0")
    rec.event("tool", "executor", "run", "command='pytest'")  # not a progress step
    rec.close()
    assert [(p.calls, p.tokens, p.role, p.phase) for p in seen] == [
        (0, 0, "", "PLAN"),
        (1, 120, "scout", "PLAN"),
        (2, 425, "analyst", "PLAN"),
        (2, 425, "analyst", "DO"),
    ]
    assert abs(seen[-1].cost_usd - 0.03) < 1e-12

    def broken(_p):
        raise RuntimeError("display gone")

    rec = RunRecorder(tmp_path / "run2", "r2", on_progress=broken)
    rec.call(
        CallRecord(run_id="x", role="coder", tier="cheap", model="m")
    )  # a broken view never breaks the run
    rec.call(CallRecord(run_id="x", role="coder", tier="cheap", model="m"))
    rec.close()
    assert rec.calls == 2 and rec.on_progress is None


class Spy(ExperimentState):
    """The state as the thread executor updates it, with every update and bar text kept."""

    def __init__(self) -> None:
        super().__init__()
        self.updates: list[Progress] = []
        self.lines: list[str] = []

    def update(self, progress: Progress) -> None:
        super().update(progress)
        self.updates.append(progress)
        self.lines.append(self.line())


@pytest.mark.slow  # two scripted runs
def test_kit_run_shows_each_running_run_as_its_calls_finish_and_counts_kept_runs(tmp_path):
    profile = write_profile(tmp_path, "scripted/oracle", "native")
    exp = experiment("live", profile, ["micro-slugify"], ["vibe"], repeats=1)
    state = Spy()
    out = run_experiment(exp, results_dir=tmp_path / "results", progress=False, state=state)
    run_dir = out / "runs" / "micro-slugify__vibe__scripted-test__r1"
    calls = rows(run_dir, "calls.jsonl")
    assert len(calls) >= 2
    mine = [p for p in state.updates if p.run_id == run_dir.name]
    counts = [p.calls for p in mine if p.calls]  # an update per call, and as each call is sent and answered
    assert sorted(set(counts)) == list(range(1, len(calls) + 1)) and counts == sorted(counts)
    assert mine[-1].role == "coder" and mine[-1].phase == "code"
    assert abs(mine[-1].cost_usd - run_json(run_dir)["totals"]["cost_usd"]) < 1e-12
    during = state.lines[-1]  # the bar's text after the last call, before run.json was written
    assert f"vibe/micro-slugify r1: {len(calls)} calls" in during and "coder/code" in during
    assert during.startswith(f"${mine[-1].cost_usd:.4f}")  # dollars move before the run ends
    assert state.running() == [] and "last: vibe/micro-slugify r1 done" in state.line()

    first = run_json(run_dir)["totals"]["cost_usd"]
    again = Spy()  # resume with one more repeat: the kept run's dollars are in the bar from the start
    run_experiment(exp.model_copy(update={"repeats": 2}), results_dir=tmp_path / "results", progress=False,
                   state=again)  # fmt: skip
    assert abs(again.spent_before - first) < 1e-12
    assert again.lines[0].startswith(f"${first:.4f} (incl. ${first:.4f} kept)")
    total = first + run_json(out / "runs" / "micro-slugify__vibe__scripted-test__r2")["totals"]["cost_usd"]
    assert again.line().startswith(f"${total:.4f} (incl. ${first:.4f} kept)")


@pytest.mark.slow  # a scripted run and a 3 s wait
def test_a_runs_wall_time_leaves_out_its_wait_for_a_scoring_worker(tmp_path):
    """issue 32, item 5: each run carries its own duration -- not the time it queued behind other runs'
    scoring (the Inspect export showed durations spanning the experiment)."""
    import time

    from kit.config import load_profile
    from kit.run.plan import plan
    from kit.run.single import play_run, score_run

    profile_path = write_profile(tmp_path, "scripted/oracle", "native")
    exp = experiment("wait", profile_path, ["micro-slugify"], ["vibe"])
    profile, sheet = load_profile(profile_path)
    (spec,) = plan(exp)
    t0 = time.monotonic()
    played = play_run(spec, exp, profile, sheet, tmp_path / "results" / "wait")
    time.sleep(3.0)  # queued: every scoring worker is busy with other runs
    record = score_run(played)
    elapsed = time.monotonic() - t0
    assert record.outcome == "done" and record.wall_s <= elapsed - 2.9
    assert record.wall_s >= record.score.scoring_s


def test_the_bar_ticks_while_a_run_waits_on_the_model(tmp_path):
    """issue 41: under load a call took minutes and the bar looked hung (its clock moved only when a call
    ended). Now a call in flight shows "waiting on the model for N s", N from the call's start."""
    seen: list[Progress] = []
    rec = RunRecorder(tmp_path / "run", "micro-slugify__vibe__p__r1", on_progress=seen.append)
    token = rec.waiting("coder")
    state = ExperimentState()
    state.update(seen[-1])
    since = seen[-1].waiting_since
    assert since is not None and seen[-1].role == "coder"
    assert "vibe/micro-slugify r1: 0 calls 0 tok $0.0000 coder, waiting on the model for 7 s" in state.line(
        now=since + 7.4
    )
    assert "for 8 s" in state.line(now=since + 8.1)  # the text changes each second: the bar redraws
    rec.answered(token)
    state.update(seen[-1])
    assert seen[-1].waiting_since is None and "waiting" not in state.line(now=since + 9)
    rec.close()


@pytest.mark.slow  # a scripted run whose calls take 1.5 s each
def test_a_slow_call_is_shown_waiting_while_it_is_out(tmp_path, monkeypatch):
    import threading
    import time

    monkeypatch.setenv("ORCHBENCH_SCRIPTED_LATENCY_S", "1.5")
    profile = write_profile(tmp_path, "scripted/oracle", "native")
    state = ExperimentState()
    lines: list[str] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            lines.append(state.line())
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        run_experiment(experiment("slow", profile, ["micro-slugify"], ["vibe"], repeats=1),
                       results_dir=tmp_path / "results", progress=False, state=state)  # fmt: skip
    finally:
        stop.set()
        sampler.join()
    assert any("waiting on the model for 0 s" in line for line in lines)
    assert any("waiting on the model for 1 s" in line for line in lines)  # it ticked during one call
