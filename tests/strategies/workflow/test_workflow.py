"""The coding workflow (docs/strategies.md, ``## workflow``) on the scripted model: when it stops, what it counts,
how it survives a failing analyzer and an interrupted run."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from kit.config import Experiment, Limits
from kit.errors import CallCapReached
from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.prompts import PromptBook
from kit.records.schema import load_run, read_jsonl
from kit.run.runner import run_experiment
from kit.strategies import workflow
from kit.strategies.workflow.runtime import ProviderFailure
from kit.tasks.task import load_task
from kit.tasks.workspace import diff
from kit.usage import ModelPrice
from tests.support.workflow import Interrupt, WorkflowPolicy, _mode, make_ctx, profile


def run_workflow(tmp_path, policy, **options):
    ctx = make_ctx(tmp_path, scripted.register(policy), options=options, task=options.pop("task", None))
    return workflow.run(ctx), ctx


def test_clean_clean_converges_after_two_cycles(tmp_path):
    policy = WorkflowPolicy(verdicts=["clean", "clean"])
    result, ctx = run_workflow(tmp_path, policy)
    c = result.counters
    assert (result.outcome, result.claimed_done) == ("done", True)
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
    assert result.outcome == "done"
    assert c["cycles"] == 4
    assert c["clean_streak_history"] == [1, 0, 1, 1]
    # cycle 2: three analyzers raise the same finding (spelled differently) -> one finding after dedup
    assert (c["issues_reported"], c["findings_raised"], c["findings_kept"], c["findings_refuted"]) == (
        3,
        1,
        1,
        0,
    )
    assert c["agent_calls"] == 1 + 4 * 3 + 3 + 1  # implementer, analyzers, 3 skeptics (cycle 2), editor
    assert policy.rounds[("refuter", 2)] == 3 and policy.counts["editor"] == 2  # one editor: write, finish
    assert (ctx.workspace.root / "edits" / "round-2.txt").is_file()


def test_refuted_findings_do_not_count_and_the_pass_is_clean(tmp_path):
    policy = WorkflowPolicy(verdicts=["issues"], confirm=False)
    result, _ = run_workflow(tmp_path, policy)
    c = result.counters
    assert result.outcome == "done"
    assert c["clean_streak_history"] == [1, 1]
    assert (c["findings_raised"], c["findings_kept"], c["findings_refuted"]) == (2, 0, 2)
    assert policy.counts["editor"] == 0


def test_issues_every_time_is_capped_at_16(tmp_path):
    policy = WorkflowPolicy(verdicts=["issues"])
    result, _ = run_workflow(tmp_path, policy, analyzers=1)
    c = result.counters
    assert (result.outcome, result.claimed_done) == ("capped", False)
    assert c["cycles"] == 16 and c["clean_streak_history"] == [0] * 16
    assert c["agent_calls"] == 1 + 16 * (1 + 3 + 1)  # analyzer + 3 skeptics + editor per cycle
    assert c["stop_reason"] == "cycle-cap"
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


def test_one_failing_analyzer_does_not_stop_the_others(tmp_path):
    policy = WorkflowPolicy(verdicts=["clean", "issues", "clean", "clean"], failing={2: "garbage"})
    result, _ = run_workflow(tmp_path, policy)
    c = result.counters
    assert result.outcome == "done"
    assert c["clean_streak_history"] == [1, 0, 1, 1]  # 2 of 3 reports are a majority
    assert c["analyzer_failures"] == 4 and c["failed_agent_calls"] == 4
    assert c["findings_kept"] == 1 and c["provider_failures"] == 0
    # 3 format errors, then 2 retries of 3 steps in the same conversation, for the failing seat
    assert policy.counts["analyzer"] == 4 * 2 + 4 * 3 * 3


def test_a_provider_failure_stops_the_workflow_with_its_counters(tmp_path):
    policy = WorkflowPolicy(verdicts=["clean", "issues", "clean", "clean"], failing={2: "raise"})
    ctx = make_ctx(tmp_path, scripted.register(policy))
    with pytest.raises(ProviderFailure) as info:
        workflow.run(ctx)
    message = str(info.value)
    assert "failed for provider reasons" in message and "analyzer 2 is down" in message
    assert "--retry-errors" in message
    assert not hasattr(info.value, "counters")  # the counters so far are on the context, not the error
    counters = ctx.counters
    assert counters["provider_failures"] == 1 and counters["stop_reason"] == "provider-failure"
    assert counters["cycles"] == 1 and counters["agent_calls"] == 4
    assert policy.counts["analyzer"] == 3  # the siblings finished; nothing ran after them


def test_most_analyzers_failing_is_not_a_clean_pass(tmp_path):
    policy = WorkflowPolicy(verdicts=["clean"], failing={1: "garbage", 2: "garbage"})
    result, _ = run_workflow(tmp_path, policy, max_cycles=3, format_retries=0)
    c = result.counters
    assert result.outcome == "capped"
    assert c["clean_streak_history"] == [0, 0, 0] and c["inconclusive_cycles"] == 3


# --------------------------------------------------------------------------- retries, failures, caps


def test_the_verdict_follows_the_issue_list():
    issue = {"problem": "wrong"}
    assert workflow.Analysis(issues=[]).verdict == "clean"
    assert workflow.Analysis(issues=[issue]).verdict == "issues"
    assert workflow.Analysis(verdict="issues", issues=[issue]).verdict == "issues"
    for verdict, issues in (("issues", []), ("clean", [issue])):
        with pytest.raises(ValidationError, match="contradicts the issue list"):
            workflow.Analysis(verdict=verdict, issues=issues)
    for no_report in ({}, {"summary": "Done."}, {"verdict": "clean"}):  # "done" is not a clean report
        with pytest.raises(ValidationError, match="issues"):
            workflow.Analysis.model_validate(no_report)


def test_an_issues_verdict_with_no_issues_is_rejected_and_asked_again(tmp_path):
    """Seat 1 answers {verdict: issues, issues: []} first: a format error, not a clean pass; told so,
    it answers properly in the same conversation."""
    policy = WorkflowPolicy(verdicts=["clean", "clean"], failing={1: "contradict"})
    result, ctx = run_workflow(tmp_path, policy)
    c = result.counters
    assert result.outcome == "done" and c["clean_streak_history"] == [1, 1]
    assert c["analyzer_failures"] == 0 and c["findings_raised"] == 0
    assert policy.counts["analyzer"] == 2 * 3 + 2  # one extra step per cycle for seat 1
    errors = [e for e in read_jsonl(ctx.recorder.run_dir / "events.jsonl") if e["kind"] == "format_error"]
    assert len(errors) == 2 and all("contradicts the issue list" in e["detail"] for e in errors)


def test_an_analyzer_that_keeps_contradicting_itself_never_makes_a_clean_pass(tmp_path):
    def stubborn(request):
        return render(_mode(request), FINISH, {"verdict": "issues", "issues": []}, "Reviewed.")

    policy = WorkflowPolicy(verdicts=["clean"])
    fallback = policy.__call__

    def play(request):
        return stubborn(request) if request.context.get("role") == "analyzer" else fallback(request)

    result, _ = run_workflow(tmp_path, play, max_cycles=2, format_retries=0)
    c = result.counters
    assert result.outcome == "capped" and c["clean_streak_history"] == [0, 0]
    assert c["analyzer_failures"] == 6 and c["inconclusive_cycles"] == 2


def test_each_finding_goes_to_three_skeptics_and_is_kept_on_a_strict_majority(tmp_path):
    policy = WorkflowPolicy(
        verdicts=["issues", "clean", "clean"],
        issues=2,
        votes={1: [True, True, False], 2: [True, False, False]},
    )
    result, ctx = run_workflow(tmp_path, policy)
    c = result.counters
    assert result.outcome == "done" and c["clean_streak_history"] == [0, 1, 1]
    assert (c["findings_raised"], c["findings_refuted"], c["findings_kept"]) == (2, 1, 1)
    assert c["skeptic_calls"] == 6 and policy.rounds[("refuter", 1)] == 6
    assert c["agent_calls"] == 1 + 3 * 3 + 6 + 1
    transcript = read_jsonl(ctx.recorder.run_dir / "transcript.jsonl")
    skeptic_convs = {t["conversation"] for t in transcript if t["role"] == "refuter"}
    assert len(skeptic_convs) == 6  # six independent conversations, one finding each
    for conv in skeptic_convs:
        first = next(t for t in transcript if t["conversation"] == conv and t["message"]["role"] == "user")
        assert first["message"]["content"].count("slugify mishandles input") == 1
    editor = next(
        t["message"]["content"]
        for t in transcript
        if t["role"] == "editor" and t["message"]["role"] == "user"
    )
    assert "Round 1 bug:" in editor and "Round 1 bug 2:" not in editor  # only the kept finding


def test_one_failed_skeptic_is_no_vote_and_a_tie_of_the_others_is_no_majority(tmp_path):
    votes = {1: [True, True, False]}
    policy = WorkflowPolicy(verdicts=["issues", "clean", "clean"], votes=votes)
    fallback = policy.__call__

    def play(request):
        if request.context.get("role") == "refuter" and "skeptic 2 of 3" in str(
            request.messages[1]["content"]
        ):
            return {"content": "no idea"}
        return fallback(request)

    result, _ = run_workflow(tmp_path, play, format_retries=0)
    c = result.counters
    # seat 1 yes, seat 2 failed (null, no vote), seat 3 no: 1 of 2 valid judgements is no majority
    assert (c["findings_kept"], c["findings_refuted"], c["refuter_failures"]) == (0, 1, 1)


def test_a_shell_write_by_an_analyzer_does_not_reach_the_scored_diff(tmp_path):
    """An analyzer (read + exec, no write) runs a command that writes into the clone: it writes a
    throwaway layer, discarded when the command ends, and the final diff holds the implementer's
    change only."""
    policy = WorkflowPolicy(verdicts=["clean", "clean"])
    fallback = policy.__call__

    def play(request):
        if (
            request.context.get("role") == "analyzer"
            and sum(m.get("role") == "assistant" for m in request.messages) == 0
        ):
            command = "echo pwned > analyzer_was_here.txt; echo '# pwned' >> textkit.py"
            return render(_mode(request), "run", {"command": command}, "Look around.")
        return fallback(request)

    result, ctx = run_workflow(tmp_path, play)
    assert result.outcome == "done"
    final = diff(ctx.workspace)
    assert "def slugify" in final  # the implementer's write is there
    assert "analyzer_was_here" not in final and "pwned" not in final
    assert not (ctx.workspace.root / "analyzer_was_here.txt").exists()


def test_a_changed_prompt_reruns_from_that_agent_on(tmp_path):
    """Second run on the same journal with the editor's prompt edited: the implementer, the first
    cycle's analyzers and skeptics replay; the editor and everything after it run again."""
    journal = tmp_path / "journals"
    first = WorkflowPolicy(verdicts=["issues", "clean", "clean"])
    ctx = make_ctx(tmp_path, scripted.register(first, name="wf-edit"), journal_dir=journal, name="first")
    assert workflow.run(ctx).outcome == "done"
    assert first.counts["editor"] == 2

    second = WorkflowPolicy(verdicts=["issues", "clean", "clean"])
    ctx2 = make_ctx(tmp_path, scripted.register(second, name="wf-edit"), journal_dir=journal, name="second")
    ctx2.prompts = PromptBook("workflow", {"workflow/editor": "You fix confirmed problems. (edited)"})
    result = workflow.run(ctx2)
    c = result.counters
    assert result.outcome == "done"
    assert (second.counts["implementer"], second.rounds[("analyzer", 1)], second.rounds[("refuter", 1)]) == (
        0,
        0,
        0,
    )
    assert second.counts["editor"] == 2  # the edited agent ran again ...
    assert second.rounds[("analyzer", 2)] == 3 and second.rounds[("analyzer", 3)] == 3  # ... and all after it
    assert c["journal_hits"] == 1 + 3 + 3 and c["model_agent_calls"] == 1 + 3 + 3

    # a third run with nothing changed replays all of it
    third = WorkflowPolicy(verdicts=["issues", "clean", "clean"])
    ctx3 = make_ctx(tmp_path, scripted.register(third, name="wf-edit"), journal_dir=journal, name="third")
    ctx3.prompts = ctx2.prompts
    assert workflow.run(ctx3).counters["journal_hits"] == c["agent_calls"]
    assert third.counts.total() == 0


def test_text_action_mode_works_end_to_end(tmp_path):
    policy = WorkflowPolicy(verdicts=["issues", "clean", "clean"])
    ctx = make_ctx(tmp_path, scripted.register(policy), action_mode="text")
    result = workflow.run(ctx)
    assert result.outcome == "done"
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
    # the workflow's own output budget is a cap of its own, not the shared run budget
    assert (result.outcome, result.claimed_done) == ("capped", False)
    assert result.counters["stop_reason"].startswith("output-budget (workflow output-token budget")
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
    from kit.config import PriceSheet
    from kit.run import runner

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
    assert record.outcome == "done"
    assert c["journal_hits"] == 8
    assert c["agent_calls"] == 8 + 6 and c["model_agent_calls"] == 6
    # no model call for anything the first run completed
    assert (
        second.counts["implementer"] == 0 and second.counts["editor"] == 0 and second.counts["refuter"] == 0
    )
    assert second.rounds[("analyzer", 1)] == 0 and second.rounds[("analyzer", 2)] == 3
    # the replayed agents' call records are in calls.jsonl, marked, and in the totals: the money was spent
    calls = read_jsonl(run_dir / "calls.jsonl")
    replayed = [r for r in calls if r["replayed"]]
    journaled = [call for e in entries for call in e["calls"]]
    assert len(replayed) == len(journaled) == c["replayed_model_calls"] == 1 + 1 + 3 + 3 + 2
    assert sum(r["output"] for r in replayed) == sum(call["output"] for call in journaled) > 0
    assert len(calls) - len(replayed) == second.counts.total()
    assert record.calls == len(calls) and record.totals.output == sum(r["output"] for r in calls)
    assert record.totals.cost_usd == pytest.approx(sum(r["cost_usd"] for r in calls))
    assert all(r["run_id"] == record.run_id for r in replayed)
    assert c["clean_streak_history"] == [0, 1, 1]
    # the replayed write calls restored the clone: implementer's solution and editor's file are there
    patch = (run_dir / "diff.patch").read_text()
    assert "edits/round-1.txt" in patch and "def slugify" in patch
    assert record.score.requirements_failed == 0
    notes = [e for e in read_jsonl(run_dir / "events.jsonl") if e["name"] == "journal"]
    assert len(notes) == 8
    assert json.loads(json.dumps(c["params"]))["analyzers"] == 3


def test_a_provider_failure_ends_the_run_as_error_and_retry_errors_resumes_it(tmp_path, scripted_profile):
    broken = WorkflowPolicy(verdicts=["issues", "clean", "clean"], failing={2: "raise"})
    scripted.register(broken, name="wf-runner")
    run_experiment(experiment(), results_dir=tmp_path, progress=False)
    run_dir = tmp_path / "wf" / "runs" / "micro-slugify__workflow__wf-scripted__r1"
    record = load_run(run_dir)
    assert record.outcome == "error" and "provider reasons" in record.error  # not "capped"
    assert record.counters["provider_failures"] == 1 and record.counters["cycles"] == 1

    healthy = WorkflowPolicy(verdicts=["issues", "clean", "clean"])
    scripted.register(healthy, name="wf-runner")
    run_experiment(experiment(), results_dir=tmp_path, progress=False, retry_errors=True)
    record = load_run(run_dir)
    assert record.outcome == "done"
    # the implementer and the two analyzers that answered are replayed, only the failed seat is asked
    assert healthy.counts["implementer"] == 0 and healthy.rounds[("analyzer", 1)] == 1
    assert record.counters["journal_hits"] == 3


def test_the_run_budget_stops_the_workflow_at_exactly_its_model_calls(tmp_path):
    """Parallel analyzers and skeptics never overshoot the call budget; the outcome is budget, not capped."""
    policy = WorkflowPolicy(verdicts=["issues"])
    ctx = make_ctx(tmp_path, scripted.register(policy), options={"max_cycles": 16})
    ctx.budget.max_model_calls = 9
    result = workflow.run(ctx)
    assert (result.outcome, result.claimed_done) == ("budget", False)
    assert "9 model calls" in result.counters["stop_reason"]
    assert ctx.recorder.calls == policy.counts.total() == 9


def test_the_runner_records_the_counters_of_a_workflow_that_raised(tmp_path, scripted_profile):
    scripted.register(WorkflowPolicy(verdicts=["issues", "issues", "issues"]), name="wf-runner")
    run_experiment(experiment(max_agent_calls=5), results_dir=tmp_path, progress=False)
    record = load_run(tmp_path / "wf" / "runs" / "micro-slugify__workflow__wf-scripted__r1")
    assert record.outcome == "error" and "cap of 5 agent calls" in record.error
    assert record.counters["stop_reason"] == "call-cap" and record.counters["agent_calls"] == 5
    assert record.stop_reason == "call-cap"  # run.json's own field, beside the outcome
    assert "permission_denials" in record.counters
