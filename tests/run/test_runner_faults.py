"""The runner under faults and mistakes: Ctrl-C, a second runner, relative paths, corrupt records,
errors made visible, and scoring on its own pool (``kit.run.control``, ``kit.run.threads``)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from kit.app.cli import main
from kit.errors import ResultsError
from kit.paths import REPO_ROOT
from kit.run.control import ResultsLock
from kit.run.progress import ExperimentState
from kit.run.runner import run_experiment
from kit.sandbox.quota import kept_clone
from tests.support.helpers import experiment, rows, run_json, write_profile

RUN_IDS = [f"micro-slugify__vibe__scripted-test__r{i}" for i in range(1, 4)]


def write_experiment(tmp_path: Path, policy: str, name: str, **kw) -> Path:
    profile = write_profile(tmp_path, f"scripted/{policy}", "native")
    path = tmp_path / f"{name}.yaml"
    exp = experiment(name, profile, ["micro-slugify"], ["vibe"], **kw)
    path.write_text(yaml.safe_dump(exp.model_dump(mode="json")))
    return path


def kit_run(exp_path: Path, results: Path, latency: float, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "ORCHBENCH_SCRIPTED_LATENCY_S": str(latency), "ORCHBENCH_RESULTS_DIR": str(results)}
    cmd = [sys.executable, "-m", "kit", "run", str(exp_path), "--quiet", "--no-report", *extra]
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stderr=subprocess.PIPE, text=True)


def wait_for_runs_in_flight(runs: Path, n: int, proc: subprocess.Popen, timeout: float = 90) -> None:
    """Until ``n`` runs have sent their first model call (the agent's first user turn is recorded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        asking = [t for t in runs.glob("*/transcript.jsonl") if '"role":"user"' in t.read_text()]
        if len(asking) >= n:
            return
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"{n} runs never started")


# --------------------------------------------------------------------------- Ctrl-C


@pytest.mark.slow
def test_ctrl_c_starts_no_new_run_stops_runs_in_flight_as_interrupted_and_a_rerun_redoes_them(tmp_path):
    exp = write_experiment(tmp_path, "oracle", "sigint", repeats=3, concurrency=2)
    runs = tmp_path / "results" / "sigint" / "runs"
    proc = kit_run(exp, tmp_path / "results", 1.0, "--grace", "0.2")
    try:
        wait_for_runs_in_flight(runs, 2, proc)  # r1 and r2 are waiting on their first model call
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "no new runs start" in err and "Traceback" not in err
    assert sorted(d.name for d in runs.iterdir()) == RUN_IDS[:2]  # r3 never started
    for d in runs.iterdir():
        run = run_json(d)
        assert run["outcome"] == "interrupted" and run["score"] is None
        assert run["calls"] == 1  # the call in flight finished; the next step did not start

    rerun = kit_run(exp, tmp_path / "results", 0.0)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert sorted(d.name for d in runs.iterdir()) == RUN_IDS
    for d in runs.iterdir():
        run = run_json(d)
        assert run["outcome"] == "done" and run["score"]["requirements_failed"] == 0
        assert [c["seq"] for c in rows(d, "calls.jsonl")] == [1, 2, 3]  # redone from scratch


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once(tmp_path):
    exp = write_experiment(tmp_path, "oracle", "twice", repeats=3, concurrency=2)
    runs = tmp_path / "results" / "twice" / "runs"
    proc = kit_run(exp, tmp_path / "results", 5.0, "--grace", "60")
    try:
        wait_for_runs_in_flight(runs, 2, proc)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        stopped_in = time.monotonic() - t0
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert stopped_in < 3.0  # did not wait for the 5 s model calls in flight, nor the 60 s grace
    assert sorted(d.name for d in runs.iterdir()) == RUN_IDS[:2]
    assert not list(runs.glob("*/run.json"))  # left torn: the next run redoes them
    assert not [d for d in runs.iterdir() if os.path.ismount(d / "repo")]  # no quota mount left behind


# --------------------------------------------------------------------------- one writer per folder


def test_a_second_runner_on_the_same_results_folder_fails_at_once_naming_the_holder(tmp_path, capsys):
    exp = write_experiment(tmp_path, "done", "locked")
    folder = tmp_path / "results" / "locked"
    folder.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from kit.run.control import ResultsLock\n"
            f"with ResultsLock({str(folder)!r}):\n    print('held', flush=True); time.sleep(60)",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        code = main(["run", str(exp), "--results", str(tmp_path / "results"), "--quiet"])
        assert time.monotonic() - t0 < 5
        err = capsys.readouterr().err
        assert code == 2 and f"PID {holder.pid}" in err and "Traceback" not in err
        assert not list((folder / "runs").iterdir())  # it ran nothing
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone (killed): the kernel dropped its lock, no stale lock is left behind
    assert main(["run", str(exp), "--results", str(tmp_path / "results"), "--quiet", "--no-report"]) == 0


def test_the_lock_is_exclusive_within_one_process_too(tmp_path):
    with ResultsLock(tmp_path), pytest.raises(ResultsError, match=f"PID {os.getpid()}"):
        ResultsLock(tmp_path).__enter__()
    with ResultsLock(tmp_path):  # released on exit
        pass


# --------------------------------------------------------------------------- paths and records


def test_a_relative_results_path_puts_the_clone_in_the_right_place(tmp_path, monkeypatch):
    exp = write_experiment(tmp_path, "oracle", "rel")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORCHBENCH_RESULTS_DIR", "cache-rel")  # relative too (the base cache)
    assert main(["run", str(exp), "--results", "out/rel-results", "--quiet", "--no-report"]) == 0
    (run_dir,) = (tmp_path / "out" / "rel-results" / "rel" / "runs").iterdir()
    run = run_json(run_dir)
    assert run["outcome"] == "done" and run["score"]["requirements_failed"] == 0
    with kept_clone(run_dir / "repo") as clone:
        assert (clone / ".git").is_dir()
    assert not list(tmp_path.rglob("out/rel-results/rel/runs/*/repo/out"))  # no nested clone


@pytest.mark.slow
def test_a_corrupt_run_json_is_a_torn_run_redone_and_does_not_break_the_report(tmp_path, capsys):
    exp = write_experiment(tmp_path, "done", "corrupt", repeats=2)
    args = ["run", str(exp), "--results", str(tmp_path / "r"), "--quiet", "--no-report"]
    assert main(args) == 0
    runs = tmp_path / "r" / "corrupt" / "runs"
    first, second = sorted(runs.iterdir())
    text = (first / "run.json").read_text()
    (first / "run.json").write_text(text[: len(text) // 2])  # truncated
    (second / "run.json").write_bytes(b"\xff\xfe not json")  # not even UTF-8
    capsys.readouterr()

    assert main(["report", str(tmp_path / "r" / "corrupt")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # (wrapped where the temp path is long: a test worker's)
    assert "no complete runs" in out and "2 incomplete run(s) ignored" in out

    assert main(args) == 0
    assert [run_json(d)["outcome"] for d in sorted(runs.iterdir())] == ["done", "done"]


def test_kit_run_exits_non_zero_when_a_run_ended_in_error_and_points_at_retry_errors(tmp_path, capsys):
    from kit.model import scripted

    def broken(req):
        raise RuntimeError("provider exploded")

    profile = write_profile(tmp_path, scripted.register(broken, name="broken12"), "native")
    exp = tmp_path / "err.yaml"
    spec = experiment("err", profile, ["micro-slugify"], ["vibe", "linear"])
    exp.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    argv = ["run", str(exp), "--strategies", "vibe,linear", "--results", str(tmp_path / "r"), "--quiet"]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 1
    assert "2 run(s) ended in outcome `error`" in captured.err and "--retry-errors" in captured.err
    # the rerun hint is the command given, --strategies and --results kept: the experiment alone would
    # rerun the file's tasks into the default results folder, not the runs that errored
    rerun = shlex.join(["python", "-m", "kit", *argv, "--retry-errors"])
    assert f"rerun just those: {rerun}\n" in captured.err, captured.err
    report = captured.out
    assert "Runs by outcome" in report and "Errors (2 run(s)" in report
    assert "provider exploded" in report


# --------------------------------------------------------------------------- the scoring pool


@pytest.mark.slow
def test_scoring_runs_on_its_own_pool_sized_to_the_cores(tmp_path, monkeypatch):
    """Six runs at concurrency 2 with a 1-core scoring pool: two strategies at a time, never two
    scorings at once, and later runs' strategies start while earlier runs wait to be scored or are being
    scored (with scoring in the agent threads, a third run would start only once a scoring had ended)."""
    from datetime import datetime

    import kit.run.single as single
    import kit.run.threads as threads
    from kit.records.schema import Score

    lock = threading.Lock()
    active, peak, spans = [0], [0], []

    def slow_score(task, ws, claimed_done, **kw):
        t = time.time()
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.4)
        with lock:
            active[0] -= 1
            spans.append((t, time.time()))
        return Score(requirements_total=1, requirements_failed=1)

    monkeypatch.setattr(threads, "_cores", lambda: 1)
    monkeypatch.setattr(single.scoring, "score", slow_score)
    monkeypatch.setenv("ORCHBENCH_SCRIPTED_LATENCY_S", "0.2")
    profile = write_profile(tmp_path, "scripted/done", "native")
    out = run_experiment(
        experiment("pool", profile, ["micro-slugify"], ["vibe"], repeats=6, concurrency=2),
        results_dir=tmp_path,
        progress=False,
        state=(state := ExperimentState()),
    )
    runs = [run_json(d) for d in (out / "runs").iterdir()]
    assert (state.todo, state.done, state.in_flight) == (6, 6, 0)
    assert len(runs) == 6 and all(r["score"]["requirements_failed"] == 1 for r in runs)
    assert peak[0] == 1  # bounded by the scoring pool, not by the two agent threads
    starts = [datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")).timestamp() for r in runs]
    # the third run starts before the first scoring has ended: with scoring in the agent threads, both
    # threads would be busy scoring the first two runs (a start waits for the end of a scoring)
    third, first_scored = sorted(starts)[2], min(b for _, b in spans)
    assert third < first_scored, ("scoring held an agent thread", sorted(starts), sorted(spans))


def test_a_run_that_finishes_within_the_grace_period_is_kept(tmp_path):
    """Ctrl-C (a SIGINT to this process) arrives during r1's only model call: r1 finishes within the
    grace period and is kept as done and scored; r2 and r3 never start; KeyboardInterrupt follows."""
    from kit.model import scripted
    from kit.model.actions import render

    def interrupt_then_finish(req):
        if req.index == 0:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)  # the main thread handles it while this call is in flight
        return render("native", "finish", {"summary": "done"})

    profile = write_profile(tmp_path, scripted.register(interrupt_then_finish, name="sigint12"), "native")
    exp = experiment("grace", profile, ["micro-slugify"], ["vibe"], repeats=3)
    state = ExperimentState()
    before = signal.getsignal(signal.SIGINT)  # (an earlier test in this process may have set it)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, results_dir=tmp_path, progress=False, grace_s=30, state=state)
    assert (state.todo, state.done, state.in_flight) == (3, 1, 0)  # nothing left for the CLI to abandon
    runs = tmp_path / "grace" / "runs"
    assert [d.name for d in runs.iterdir()] == ["micro-slugify__vibe__scripted-test__r1"]
    run = run_json(runs / "micro-slugify__vibe__scripted-test__r1")
    assert run["outcome"] == "done" and run["score"]["requirements_total"] == 7
    assert signal.getsignal(signal.SIGINT) is before  # handler restored


def test_ctrl_c_ends_a_workflow_run_as_interrupted_without_counting_a_failed_agent(tmp_path):
    """grace 0: the stop is set at once; the workflow's first agent stops at its next step, and the
    Interrupted it raises ends the whole workflow (it is one of the workflow's STOPS)."""
    from kit.model import scripted
    from kit.records.schema import read_jsonl

    def interrupt_then_look_around(req):
        if req.index == 0:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)
        return {"tool_calls": [{"name": "list_files", "arguments": {}}]}

    profile = write_profile(
        tmp_path, scripted.register(interrupt_then_look_around, name="wfstop12"), "native"
    )
    exp = experiment("wfstop", profile, ["micro-slugify"], ["workflow"])
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, results_dir=tmp_path, progress=False, grace_s=0)
    (run_dir,) = (tmp_path / "wfstop" / "runs").iterdir()
    run = run_json(run_dir)
    assert run["outcome"] == "interrupted" and run["score"] is None and run["calls"] == 1
    notes = [e["detail"] for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == "note"]
    assert not any("failed" in n and "Interrupted" in n for n in notes), notes


# --------------------------------------------------------------------------- one run's bad record


def _two_runs(tmp_path: Path, name: str) -> dict[str, dict]:
    profile = write_profile(tmp_path, "scripted/done", "native")
    exp = experiment(name, profile, ["micro-slugify"], ["vibe"], repeats=2, concurrency=1)
    out = run_experiment(exp, results_dir=tmp_path, progress=False)
    return {d.name: run_json(d) for d in (out / "runs").iterdir()}


def test_a_lone_surrogate_in_a_score_still_gives_run_json(tmp_path, monkeypatch):
    """A test's failure message and a dropped file name carrying lone surrogates (as the agent's code
    and file names can) reach the record: run.json is written with them replaced."""
    import kit.run.single as single
    from kit.records.schema import FailedRequirement, Score

    def score(task, ws, claimed_done, **kw):
        failed = [FailedRequirement(test="t::x", severity="major", message="bad \udcff surrogate")]
        return Score(
            requirements_total=1, requirements_failed=1, failed=failed, dropped_files=["\ud800: FIFO"]
        )

    monkeypatch.setattr(single.scoring, "score", score)
    runs = _two_runs(tmp_path, "surrogate")
    assert len(runs) == 2
    for run in runs.values():
        assert run["outcome"] == "done" and run["score"]["failed"][0]["message"] == "bad ? surrogate"
        assert run["score"]["dropped_files"] == ["?: FIFO"]


def test_a_run_json_that_cannot_be_written_is_an_error_run(tmp_path, monkeypatch):
    """run.json failing to serialise (a kit bug, not the disk) records the run as ``error`` with the
    reason, its records kept; the experiment goes on."""
    from kit.records.recorder import RunRecorder

    finalize, seen = RunRecorder.finalize, []

    def flaky(self, record):
        if record.repeat == 1 and not seen:
            seen.append(record.run_id)
            raise ValueError("cannot serialise this record")
        return finalize(self, record)

    monkeypatch.setattr(RunRecorder, "finalize", flaky)
    runs = _two_runs(tmp_path, "unserialisable")
    first, second = runs[RUN_IDS[0]], runs[RUN_IDS[1]]
    assert first["outcome"] == "error" and first["score"] is None
    assert "run.json could not be written (ValueError: cannot serialise this record)" in first["error"]
    assert rows(tmp_path / "unserialisable" / "runs" / RUN_IDS[0], "calls.jsonl")  # kept
    assert second["outcome"] == "done" and second["score"] is not None


def test_a_kit_bug_in_one_run_does_not_stop_the_others(tmp_path, monkeypatch):
    """Anything but an OSError escaping a run (a kit bug in scoring or finishing) is recorded as that
    run's ``error``, with what it had recorded kept; the other runs are played and scored."""
    import kit.run.threads as threads

    score_run = threads.score_run

    def broken(played):
        if played.record.repeat == 1:
            raise RuntimeError("kit bug while finishing")
        return score_run(played)

    monkeypatch.setattr(threads, "score_run", broken)
    runs = _two_runs(tmp_path, "kitbug")
    first, second = runs[RUN_IDS[0]], runs[RUN_IDS[1]]
    assert first["outcome"] == "error"
    assert first["error"] == "the run failed in the kit: RuntimeError: kit bug while finishing"
    run_dir = tmp_path / "kitbug" / "runs" / RUN_IDS[0]
    assert rows(run_dir, "calls.jsonl")  # what the run recorded is kept
    assert any("kit bug while finishing" in e["detail"] for e in rows(run_dir, "events.jsonl"))
    assert second["outcome"] == "done"
    assert not os.path.ismount(run_dir / "repo")  # its clone released (a loop mount stayed until exit)
