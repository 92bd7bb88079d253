"""The coding workflow (STRATEGIES.md §4) on the scripted model: when it stops, what it counts,
how it survives a failing analyzer and an interrupted run."""

from __future__ import annotations

import json

import pytest
from workflow_helpers import Interrupt, WorkflowPolicy, make_ctx, profile

from kit.config import Experiment, Limits
from kit.errors import CallCapReached
from kit.models import scripted
from kit.records import load_run, read_jsonl
from kit.runner import run_experiment
from kit.strategies import workflow
from kit.tasks import load_task
from kit.usage import ModelPrice


def run_workflow(tmp_path, policy, **options):
    ctx = make_ctx(tmp_path, scripted.register(policy), options=options, task=options.pop("task", None))
    return workflow.run(ctx), ctx


def test_clean_clean_converges_after_two_cycles(tmp_path):
    policy = WorkflowPolicy(verdicts=["clean", "clean"])
    result, ctx = run_workflow(tmp_path, policy)
    c = result.counters
    assert (result.outcome, result.claimed_done) == ("converged-clean", True)
    assert c["cycles"] == 2
    assert c["clean_streak_history"] == [1, 1]
    assert c["agent_calls"] == 1 + 3 + 3  # implementer + 3 analyzers per cycle; no refuter, no editor
    assert c["agent_calls"] != c["cycles"]
    assert policy.counts["refuter"] == 0 and policy.counts["editor"] == 0
    assert c["findings_raised"] == 0 and c["journal_hits"] == 0
    assert c["params"]["max_cycles"] == 16 and c["params"]["analyzers"] == 3
    phases = [e["name"] for e in read_jsonl(ctx.recorder.run_dir / "events.jsonl") if e["kind"] == "phase"]
    assert phases == ["implement", "analyze", "analyze"]
    assert "def slugify" in (ctx.workspace.root / "textkit.py").read_text()


def test_issues_reset_the_streak_and_convergence_comes_at_the_fourth_cycle(tmp_path):
    policy = WorkflowPolicy(verdicts=["clean", "issues", "clean", "clean"])
    result, ctx = run_workflow(tmp_path, policy)
    c = result.counters
    assert result.outcome == "converged-clean"
    assert c["cycles"] == 4
    assert c["clean_streak_history"] == [1, 0, 1, 1]
    # cycle 2: three analyzers raise the same finding (spelled differently) -> one finding after dedup
    assert (c["issues_reported"], c["findings_raised"], c["findings_confirmed"], c["findings_refuted"]) == (
        3,
        1,
        1,
        0,
    )
    assert c["agent_calls"] == 1 + 4 * 3 + 3 + 1  # implementer, analyzers, refuters (cycle 2), editor
    assert policy.rounds[("refuter", 2)] == 3 and policy.counts["editor"] == 2  # one editor: write, finish
    assert (ctx.workspace.root / "edits" / "round-2.txt").is_file()


def test_refuted_findings_do_not_count_and_the_pass_is_clean(tmp_path):
    policy = WorkflowPolicy(verdicts=["issues"], confirm=False)
    result, _ = run_workflow(tmp_path, policy)
    c = result.counters
    assert result.outcome == "converged-clean"
    assert c["clean_streak_history"] == [1, 1]
    assert (c["findings_raised"], c["findings_confirmed"], c["findings_refuted"]) == (2, 0, 2)
    assert policy.counts["editor"] == 0


def test_issues_every_time_is_capped_at_16(tmp_path):
    policy = WorkflowPolicy(verdicts=["issues"])
    result, _ = run_workflow(tmp_path, policy, analyzers=1)
    c = result.counters
    assert (result.outcome, result.claimed_done) == ("capped", False)
    assert c["cycles"] == 16 and c["clean_streak_history"] == [0] * 16
    assert c["agent_calls"] == 1 + 16 * 3  # analyzer + refuter + editor per cycle
    assert c["stop_reason"] == "cycle cap"
    assert c["applies"] == 16 and c["params"]["long_task"] is False


def test_a_long_task_is_capped_at_32(tmp_path):
    long_task = load_task("micro-slugify").model_copy(update={"long": True})
    policy = WorkflowPolicy(verdicts=["issues"])
    result, _ = run_workflow(tmp_path, policy, analyzers=1, task=long_task)
    c = result.counters
    assert result.outcome == "capped"
    assert c["cycles"] == 32 and len(c["clean_streak_history"]) == 32
    assert c["params"]["max_cycles"] == 32 and c["params"]["long_task"] is True


def test_the_cycle_cap_option_overrides_the_default(tmp_path):
    result, _ = run_workflow(tmp_path, WorkflowPolicy(verdicts=["issues"]), analyzers=1, max_cycles=3)
    assert (result.outcome, result.counters["cycles"]) == ("capped", 3)


@pytest.mark.parametrize("failure", ["garbage", "raise"])
def test_one_failing_analyzer_does_not_stop_the_others(tmp_path, failure):
    policy = WorkflowPolicy(verdicts=["clean", "issues", "clean", "clean"], failing={2: failure})
    result, _ = run_workflow(tmp_path, policy)
    c = result.counters
    assert result.outcome == "converged-clean"
    assert c["clean_streak_history"] == [1, 0, 1, 1]  # 2 of 3 reports are a majority
    assert c["analyzer_failures"] == 4 and c["failed_agent_calls"] == 4
    # the finding of cycle 2 still needs a majority of the 3 configured seats: all 3 refuters confirm
    assert c["findings_confirmed"] == 1
    if failure == "garbage":  # 3 format errors, then 2 retries in the same conversation
        assert policy.counts["analyzer"] == 4 * 2 + 4 * 3 * 3
    else:
        assert policy.counts["analyzer"] == 4 * 3


def test_most_analyzers_failing_is_not_a_clean_pass(tmp_path):
    policy = WorkflowPolicy(verdicts=["clean"], failing={1: "raise", 2: "raise"})
    result, _ = run_workflow(tmp_path, policy, max_cycles=3)
    c = result.counters
    assert result.outcome == "capped"
    assert c["clean_streak_history"] == [0, 0, 0] and c["inconclusive_cycles"] == 3


def test_text_action_mode_works_end_to_end(tmp_path):
    policy = WorkflowPolicy(verdicts=["issues", "clean", "clean"])
    ctx = make_ctx(tmp_path, scripted.register(policy), action_mode="text")
    result = workflow.run(ctx)
    assert result.outcome == "converged-clean"
    assert result.counters["clean_streak_history"] == [0, 1, 1]
    assert result.counters["failed_agent_calls"] == 0


def test_the_agent_call_cap_raises_a_clear_error(tmp_path):
    policy = WorkflowPolicy(verdicts=["issues"])
    with pytest.raises(CallCapReached) as info:
        run_workflow(tmp_path, policy, max_agent_calls=5)
    message = str(info.value)
    assert "cap of 5 agent calls" in message and "max_agent_calls" in message
    assert "refuter" in message  # call 6 would have been the second refuter
    assert policy.counts["refuter"] == 1


def test_the_output_token_budget_stops_cleanly(tmp_path):
    policy = WorkflowPolicy(verdicts=["issues"])
    result, ctx = run_workflow(tmp_path, policy, max_output_tokens=1)
    assert (result.outcome, result.claimed_done) == ("capped", False)
    assert result.counters["stop_reason"].startswith("budget")
    # the implementer's first reply spent the budget: its next step stops it, and the workflow with it
    assert result.counters["agent_calls"] == 1 and policy.counts.total() == 1
    assert "def slugify" in (ctx.workspace.root / "textkit.py").read_text()


# --------------------------------------------------------------------------- through the runner


def experiment(**options) -> Experiment:
    return Experiment(
        name="wf",
        tasks=["micro-slugify"],
        strategies=["workflow"],
        profile="wf-scripted",
        limits=Limits(max_steps=8),
        strategy_options={"workflow": options},
    )


@pytest.fixture
def scripted_profile(monkeypatch):
    """The runner loads profiles by name: serve an in-memory one."""
    from kit import runner
    from kit.config import PriceSheet

    def load(name):
        sheet = PriceSheet(
            name="wf", prices={"p": ModelPrice(input=1, output=2, cache_read=0.1, cache_write=1.25)}
        )
        return profile("scripted/wf-runner"), sheet

    monkeypatch.setattr(runner, "load_profile", load)


def test_interrupted_run_resumes_from_its_journal_without_model_calls(tmp_path, scripted_profile):
    first = WorkflowPolicy(verdicts=["issues", "clean", "clean"], interrupt_round=2)
    scripted.register(first, name="wf-runner")
    with pytest.raises(Interrupt):
        run_experiment(experiment(), results_dir=tmp_path, progress=False)
    run_dir = tmp_path / "wf" / "runs" / "micro-slugify__workflow__wf-scripted__r1"
    journal = tmp_path / "wf" / "journals" / "micro-slugify__workflow__wf-scripted__r1.jsonl"
    assert load_run(run_dir) is None  # a torn run
    entries = read_jsonl(journal)
    assert [e["role"] for e in entries].count("analyzer") == 3 and len(entries) == 1 + 3 + 3 + 1
    completed_first = {role: first.rounds[(role, 1)] for role in ("analyzer", "refuter")}
    assert completed_first == {"analyzer": 3, "refuter": 3}

    second = WorkflowPolicy(verdicts=["issues", "clean", "clean"])
    scripted.register(second, name="wf-runner")
    run_experiment(experiment(), results_dir=tmp_path, progress=False)
    record = load_run(run_dir)
    c = record.counters
    assert record.outcome == "converged-clean"
    assert c["journal_hits"] == 8
    assert c["agent_calls"] == 8 + 6 and c["model_agent_calls"] == 6
    # no model call for anything the first run completed
    assert (
        second.counts["implementer"] == 0 and second.counts["editor"] == 0 and second.counts["refuter"] == 0
    )
    assert second.rounds[("analyzer", 1)] == 0 and second.rounds[("analyzer", 2)] == 3
    assert record.calls == second.counts.total()  # run.json's model calls are this run's requests only
    assert c["clean_streak_history"] == [0, 1, 1]
    # the replayed write calls restored the clone: implementer's solution and editor's file are there
    patch = (run_dir / "diff.patch").read_text()
    assert "edits/round-1.txt" in patch and "def slugify" in patch
    assert record.score.requirements_failed == 0
    notes = [e for e in read_jsonl(run_dir / "events.jsonl") if e["name"] == "journal"]
    assert len(notes) == 8
    assert json.loads(json.dumps(c["params"]))["analyzers"] == 3
