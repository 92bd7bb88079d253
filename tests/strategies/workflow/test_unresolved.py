"""issue 21, item 1: a failed skeptic (no parsable judgement) is null, not a vote; a finding with no
valid judgement is unresolved, so its cycle is not clean (docs/strategies.md, ``## workflow``). And the
messages the workflow's agents get are prompt files a prompt lab can override."""

from __future__ import annotations

from kit.model import scripted
from kit.records.schema import read_jsonl
from kit.strategies import workflow
from tests.support.workflow import WorkflowPolicy, make_ctx


def failing_skeptics(policy: WorkflowPolicy, seats: set[int]):
    """The policy, except that the skeptics of these seats answer with no judgement at all."""

    def play(request: scripted.Request):
        first = str(request.messages[1]["content"])
        if request.context.get("role") == "refuter" and any(f"skeptic {s} of" in first for s in seats):
            return {"content": "I cannot tell."}
        return policy(request)

    return play


def test_findings_whose_skeptics_all_fail_are_unresolved_and_no_cycle_is_clean(tmp_path):
    """A model that never produces the judgement JSON must not converge "clean": before the fix every
    such finding counted as refuted, so two issue cycles in a row ended converged-clean."""
    policy = WorkflowPolicy(verdicts=["issues"])
    ctx = make_ctx(
        tmp_path, scripted.register(failing_skeptics(policy, {1, 2, 3})), options={"format_retries": 0}
    )
    ctx.options["max_cycles"] = 3
    result = workflow.run(ctx)
    c = result.counters
    assert (result.outcome, result.claimed_done, c["stop_reason"]) == ("capped", False, "cycle-cap")
    assert c["clean_streak_history"] == [0, 0, 0]
    assert (c["findings_raised"], c["unresolved_findings"], c["findings_refuted"], c["findings_kept"]) == (
        3,
        3,
        0,
        0,
    )
    assert c["refuter_failures"] == 9 and [r["unresolved"] for r in c["per_cycle"]] == [1, 1, 1]
    assert policy.counts["editor"] == 0  # nothing says an unresolved finding is real: nothing applied


def test_a_failed_skeptic_is_no_vote_so_the_valid_judgements_decide(tmp_path):
    """Seat 1 confirms, seats 2 and 3 fail: the one valid judgement is a strict majority, so the finding
    is kept and applied (before the fix the failed seats counted as "not real" and refuted it)."""
    policy = WorkflowPolicy(verdicts=["issues", "clean", "clean"], confirm=True)
    ctx = make_ctx(
        tmp_path, scripted.register(failing_skeptics(policy, {2, 3})), options={"format_retries": 0}
    )
    result = workflow.run(ctx)
    c = result.counters
    assert (c["findings_kept"], c["findings_refuted"], c["unresolved_findings"]) == (1, 0, 0)
    assert c["clean_streak_history"] == [0, 1, 1] and (result.outcome, c["stop_reason"]) == (
        "done",
        "converged-clean",
    )
    assert (
        result.stop_reason == "converged-clean" and (ctx.workspace.root / "edits" / "round-1.txt").is_file()
    )


def test_the_agents_messages_are_prompt_files_and_can_be_overridden(tmp_path):
    """The analyzer's, skeptic's and editor's messages come from kit/prompts/workflow/*_request.md, and
    an experiment's prompt_overrides ("workflow/<name>") replace them."""
    policy = WorkflowPolicy(verdicts=["issues", "clean", "clean"])
    ctx = make_ctx(tmp_path, scripted.register(policy))
    ctx.prompts.overrides.update(
        {
            "workflow/analyzer_request": "Review round $cycle, reviewer $seat of $analyzers.\nLAB-A $task",
            "workflow/refuter_request": "Review round $cycle, finding $finding, skeptic $seat of $refuters.\n"
            "LAB-R $finding_text",
            "workflow/editor_request": "LAB-E fix these:\n$findings",
        }
    )
    assert workflow.run(ctx).outcome == "done"
    first = {}
    for row in read_jsonl(ctx.recorder.run_dir / "transcript.jsonl"):
        if row["message"]["role"] == "user":
            first.setdefault(row["conversation"], row["message"]["content"])
    by_role = {
        role: [m for conv, m in first.items() if conv.startswith(role)]
        for role in ("analyzer", "refuter", "editor")
    }
    assert by_role["analyzer"] and all(
        "LAB-A" in m and "Implement the function `slugify" in m for m in by_role["analyzer"]
    )
    assert by_role["refuter"] and all("LAB-R [1] ./textkit.py" in m for m in by_role["refuter"])
    assert by_role["editor"] == [
        "LAB-E fix these:\n[1] ./textkit.py (major): Round 1 bug: slugify mishandles input\n"
        "    suggested fix: fix round 1"
    ]
