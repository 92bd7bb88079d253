"""pdca as its source describes it: no false pass, counters as the skill counts them,
the expert's three decisions, fresh evidence in CHECK, and the status file written by the model."""

from __future__ import annotations

import copy
import json

import pytest

from kit.agent.loop import ToolUse
from kit.strategies.pdca.plan import PlanDraft, check_plan, structure_key
from kit.strategies.pdca.reports import Evidence, ExecutorReport, check_evidence
from tests.support.pdca import CRITERIA, PASS, TEST_CMD, Cast, plan, run_cast, verdict

BROKEN = ("write_file", {"path": "textkit.py", "content": "def slugify(:\n"})
# both quote kinds and a backslash: the old repr()-based matching refused this honest command
QUOTED = """python -c "import sys; print('it\\'s', 'tab\\tdone')" && echo \\"ok\\" """.strip()


def logged(out, event):
    return [row for row in out.log if row[5] == event]


def accepted(data, previous=None):
    return check_plan(PlanDraft.model_validate(data), previous)


def test_criteria_are_append_only_through_units_blocked_and_superseded():
    base, _ = accepted(plan())
    no_c2 = plan(
        acceptance_criteria=CRITERIA[:1], units=[{"id": "U1", "expected_result": "x", "criteria": ["C1"]}]
    )
    assert accepted(no_c2)[1] == []  # fine as a first plan
    assert accepted(no_c2, base)[1][0].startswith("criterion C2 of the previous revision is gone")
    blocked = [
        {"id": "U0", "expected_result": "helper", "criteria": ["C2"]},
        {
            "id": "U1",
            "expected_result": "slugify",
            "criteria": ["C1"],
            "state": "blocked",
            "blocked_by": "U0",
        },
    ]  # a blocked unit may not shed C2, even though another unit covers it
    assert accepted(plan(blocked), base)[1] == [
        "unit U1 dropped criteria C2; a unit keeps its criteria (supersede it with a replacement that inherits them to move them)"
    ]
    superseded = [
        {"id": "U1", "expected_result": "slugify", "criteria": ["C1", "C2"], "superseded_by": "U3"},
        {"id": "U3", "expected_result": "slugify again", "criteria": ["C1"]},
        {"id": "U4", "expected_result": "word_count", "criteria": ["C2"]},
    ]
    assert accepted(plan(superseded), base)[1] == ["unit U3 replaces U1 but does not inherit criteria C2"]
    # superseding a criterion explicitly: kept in the list, its replacement inherits it
    c3 = {**CRITERIA[1], "id": "C3", "text": "word_count unchanged on unicode"}
    replaced = plan(
        acceptance_criteria=[CRITERIA[0], {**CRITERIA[1], "superseded_by": "C3"}, c3],
        units=[{"id": "U1", "expected_result": "x", "criteria": ["C1", "C2"]}],
    )
    new, problems = accepted(replaced, base)
    assert problems == [] and [c.id for c in new.active_criteria()] == ["C1", "C3"]
    assert [c.id for c in new.inherited("C3")] == ["C2"]
    dangling = plan(acceptance_criteria=[CRITERIA[0], {**CRITERIA[1], "superseded_by": "C9"}])
    assert (
        "criterion C2 is superseded but superseded_by names no active criterion"
        in accepted(dangling, base)[1]
    )
    no_negative = plan()
    del no_negative["acceptance_criteria"][1]["negative_case"]
    assert accepted(no_negative)[1] == ["missing or empty: acceptance_criteria[1].negative_case"]


def test_structure_key_ignores_wording_but_not_structure():
    base, _ = accepted(plan())
    reworded = plan(expected_result="slugify done", constraints=["keep word_count"], risks=["unicode"])
    reworded["acceptance_criteria"][0]["text"] = "slugify behaves as specified"
    reworded["acceptance_criteria"][0]["how_verified"] = f"  {TEST_CMD.upper()}. "
    assert structure_key(accepted(reworded)[0]) == structure_key(base)
    other = copy.deepcopy(reworded)
    other["acceptance_criteria"][0]["how_verified"] = "python -m pytest -q tests/test_textkit.py"
    assert structure_key(accepted(other)[0]) != structure_key(base)
    other["acceptance_criteria"][0]["how_verified"] = TEST_CMD.replace("World", "Earth")
    dependency = plan(
        units=[{"id": "U1", "expected_result": "x", "criteria": ["C1", "C2"], "depends_on": ["U1"]}]
    )
    assert structure_key(accepted(other)[0]) != structure_key(base)
    assert structure_key(accepted(dependency)[0]) != structure_key(base)


def test_replan_dropping_the_failing_criterion_is_rejected_at_the_plan_gate(tmp_path):
    failing_c2 = verdict(met=("C1",), defects=("c2-untestable",), route="PLAN")
    drops_c2 = plan(
        acceptance_criteria=CRITERIA[:1], units=[{"id": "U1", "expected_result": "x", "criteria": ["C1"]}]
    )
    out = run_cast(
        tmp_path, Cast(plans=[plan(), drops_c2, plan()], verdicts=[failing_c2, PASS]), status_writer="kit"
    )
    c = out.result.counters
    assert out.result.outcome == "done" and c["gate_rejections_by_gate"] == {"CHECK->ACT": 1, "PLAN->DO": 1}
    assert "criterion C2 of the previous revision is gone" in logged(out, "gate PLAN->DO rejected")[0][6]
    assert out.sessions("auditor") == 2  # C2 was judged again, not dropped


def test_report_with_blockers_is_never_done(tmp_path):
    says_done = {"done": True, "blockers": ["needs a helper first"]}
    out = run_cast(tmp_path, Cast(reports=[says_done]), status_writer="kit", max_do_rejections=1)
    c = out.result.counters
    assert out.result.outcome == "incomplete" and out.sessions("auditor") == 0
    assert c["gate_rejections_by_gate"] == {"DO->CHECK": 1}
    assert logged(out, "unit U1 blocked")[0][6] == "needs a helper first"


def test_reworded_plan_is_not_a_revision_and_the_expert_decides_the_stop(tmp_path):
    plan_defects = [verdict(met=("C1",), defects=(f"vague-{i}",), route="PLAN") for i in range(3)]
    rewordings = [plan(expected_result=f"slugify, take {i}", risks=[f"risk {i}"]) for i in range(4)]
    out = run_cast(tmp_path, Cast(plans=rewordings, verdicts=plan_defects), status_writer="kit")
    c = out.result.counters
    assert (c["plan_revisions"], c["attempts_per_revision"], c["escalations"]) == (1, {"r1": 3}, 1)
    assert c["stop_reason"] == "expert:stop (auditor rejected 3 times on revision 1)"
    assert [r[3] for r in out.log if r[5] == "enter" and r[1] == "DO"] == ["1", "2", "3"]
    assert out.status_text.split("## State @")[-1].count("plan kept (no structural change)") == 2
    assert out.sessions("expert") == 1 and "slugify, take 2" in out.status_text  # the new wording kept
    assert "max_revisions" not in c["params"]


def test_removed_revision_cap_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="max_revisions was removed: the source has no revision cap"):
        run_cast(tmp_path, Cast(), max_revisions=2)


def test_malformed_or_incomplete_auditor_report_is_asked_again(tmp_path):
    only_c1 = {"criteria": [PASS["criteria"][0]], "defects": []}
    cast = Cast(verdicts=["I think it is fine.", only_c1, PASS], empty_scout_reports=1)
    out = run_cast(tmp_path, cast, status_writer="kit", answer_steps=1)
    c = out.result.counters
    assert out.result.outcome == "done" and c["gate_rejections"] == 0 and c["attempts"] == 1
    assert c["format_retries"] == {"scout": 1, "auditor": 2} and out.sessions("auditor") == 3
    assert logged(out, "scout report unusable")[0][6] == "no facts" and out.sessions("scout") == 3
    assert [r[6] for r in logged(out, "auditor report unusable")] == [
        "no readable AuditVerdict (capped)",
        "no verdict for criteria C2",
    ]
    assert "could not be used: no verdict for criteria C2" in out.cast.briefs["auditor"][2]


def test_auditor_silent_after_the_re_asks_goes_to_the_expert_not_a_failed_check(tmp_path):
    out = run_cast(
        tmp_path, Cast(verdicts=["nothing"]), status_writer="kit", answer_steps=1, report_retries=1
    )
    c = out.result.counters
    assert c["stop_reason"] == "expert:stop (the auditor gave no usable report)"
    assert c.get("gate_rejections_by_gate", {}).get("CHECK->ACT") is None and c["defect_history"] == []


def test_quoted_and_backslashed_commands_count_as_evidence(tmp_path):
    reading = copy.deepcopy(CRITERIA)
    reading[0]["how_verified"] = "read: textkit.py"  # no command of its own: the executor's proof is re-run
    cast = Cast(
        plans=[plan(acceptance_criteria=reading)],
        after_test={0: [("run", {"command": QUOTED})]},
        reports=[{"evidence": [{"command": QUOTED, "exit_code": 0, "numbers": "it's"}]}],
    )
    out = run_cast(tmp_path, cast, status_writer="kit")
    assert out.result.outcome == "done" and not logged(out, "unit U1 evidence refused")
    assert "exit 0" in logged(out, "unit U1 done")[0][6]
    reruns = [r[6] for r in logged(out, "CHECK re-run")]
    assert reruns == [f"`{QUOTED}` -> exit 0", f"`{TEST_CMD}` -> exit 0"]
    log = [ToolUse("run", {"command": QUOTED + "\n"}, True, False, "ok\nexit code: 0", exit_code=0)]
    claims = ExecutorReport(
        evidence=[Evidence(command="  " + QUOTED), Evidence(command=QUOTED.replace("\\t", "\t"))]
    )
    lines, refused, verified = check_evidence(claims, log)
    assert (len(lines), refused, verified) == (1, [QUOTED.replace("\\t", "\t")], [QUOTED + "\n"])


def test_check_reruns_the_proving_command_and_catches_a_change_since_do(tmp_path):
    cast = Cast(after_test={0: [BROKEN]}, verdicts=[PASS])  # the auditor would pass anything
    out = run_cast(tmp_path, cast, status_writer="kit")
    c = out.result.counters
    assert out.result.outcome == "done" and c["attempts_per_revision"] == {"r1": 2}
    assert c["gate_rejections_by_gate"] == {"CHECK->ACT": 1} and c["check_reruns"] == 2
    notes = [r[6] for r in logged(out, "audit rule")]
    assert notes[0].startswith(f"C1 judged met but `{TEST_CMD}` failed in CHECK (exit ")
    assert [d["key"] for d in c["defect_history"]] == ["criterion-c1", "criterion-c2"]
    assert f"`{TEST_CMD}` -> exit 0" in logged(out, "unit U1 done")[0][6]  # DO's stale evidence said pass
    raw = out.cast.briefs["scout-check"][0].split("## Raw output")[1]  # straight from the executor
    assert f"$ {TEST_CMD}\n[exit 1; proves C1, C2]" in raw and "SyntaxError" in raw
    first_audit = out.cast.briefs["auditor"][0]  # the exit status and the scout's facts, not the output
    assert '"exit_code": 1' in first_audit and "SyntaxError" not in first_audit


def test_expert_continue_is_the_next_attempt_on_the_same_revision(tmp_path):
    again = verdict(met=("C2",), defects=("trailing-hyphen",))
    cont = {"decision": "continue", "reasons": ["one more try"]}
    out = run_cast(tmp_path, Cast(verdicts=[again, again, PASS], decisions=[cont]), status_writer="kit")
    c = out.result.counters
    assert (out.result.outcome, c["plan_revisions"], c["attempts_per_revision"]) == ("done", 1, {"r1": 3})
    assert [e["name"] for e in out.events("escalation")] == ["continue"]
    assert '"continue"' in out.cast.briefs["expert"][0]
    assert [(r[1], r[2], r[3]) for r in out.log if r[5] == "enter"][-3:] == [
        ("DO", "1", "3"),
        ("CHECK", "1", "3"),
        ("ACT", "1", "3"),
    ]
    assert c["defect_history"][0]["fix_count"] == 2
    # no attempts left on the revision: "continue" is not offered, and asking for it is asked again
    rejected = [verdict(met=("C2",), defects=(k,)) for k in ("a", "b")]
    stop = {"decision": "stop", "reasons": ["enough"]}
    cast = Cast(verdicts=rejected, decisions=[cont, stop])
    out = run_cast(tmp_path / "b", cast, status_writer="kit", max_attempts=2)
    c = out.result.counters
    assert c["stop_reason"] == "expert:stop (auditor rejected 2 times on revision 1)"
    assert c["format_retries"] == {"expert": 1} and c["attempts_per_revision"] == {"r1": 2}
    assert '"continue"' not in out.cast.briefs["expert"][0]
    assert "not available now" in logged(out, "expert report unusable")[0][6]


@pytest.mark.parametrize("mode", ["json", "text"])
def test_tool_attempts_of_tool_less_roles_are_denials_in_every_mode(tmp_path, mode):
    cast = Cast(
        first_action={"analyst": ("read_file", {"path": "textkit.py"}), "auditor": ("run", {"command": "ls"})}
    )
    out = run_cast(tmp_path, cast, mode=mode, status_writer="kit")
    assert out.result.outcome == "done"
    assert [(e["role"], e["name"]) for e in out.events("denied")] == [
        ("analyst", "read_file"),
        ("auditor", "run"),
    ]
    assert out.result.counters["permission_denials"] == 2 and out.result.counters["gate_rejections"] == 0


def test_status_file_updates_are_the_cheap_executors_model_calls(tmp_path):
    out = run_cast(tmp_path, Cast(status_replies=["nonsense", "garbage"]))  # the default writer: the model
    writes = [c for c in out.calls if (c["conversation"] or "").startswith("status-writer")]
    lines = len(out.log)
    assert len(writes) == lines == out.result.counters["status_updates"]["model_calls"]
    # on the executor's tier, under its own role label (not counted as executor work)
    assert {(c["role"], c["tier"]) for c in writes} == {("status-writer", "cheap")}
    assert out.result.counters["status_updates"]["repairs"] == 2  # the two replies that differed
    assert "".join(out.cast.status_updates) == out.status_text  # what the model was asked is the file
    assert [e["name"] for e in out.events("note")] == ["status-writer", "status-writer"]
    final = out.status_text.split("## Final @")[1]
    for section in ("### Done/Verified", "### Next plan", "### Changed artefacts\n\n- textkit.py"):
        assert section in final
    kit = run_cast(tmp_path / "kit", Cast(), status_writer="kit")
    assert not [c for c in kit.calls if (c["conversation"] or "").startswith("status-writer")]
    assert len(kit.calls) == len(out.calls) - lines


def test_the_run_call_budget_stops_the_run_by_name_and_the_kit_writes_the_stop(tmp_path):
    out = run_cast(tmp_path, Cast(), max_model_calls=12)  # status updates count as model calls
    c = out.result.counters
    assert c["stop_reason"] == "cap:budget (run budget of 12 model calls used up)"
    assert len(out.calls) == 12 == out.ctx.budget.model_calls
    assert c["status_updates"]["kit_fallback"] == 1 and out.log[-2][1:3] == ("STOP", "1")
    assert "## Final @" in out.status_text and out.result.outcome == "budget"


def test_the_orchestrator_brief_is_all_a_role_gets_unless_the_safety_net_is_on(tmp_path):
    out = run_cast(tmp_path, Cast(brief_text="implement it."), status_writer="kit", max_attempts=1)
    assert out.cast.briefs["executor"] == ["Brief 3: implement it."]
    # CHECK's re-run too: a brief without the commands runs none, so nothing is verified
    assert out.cast.briefs["executor-check"] == ["Brief 4: implement it."]
    assert out.result.counters["brief_safety_net_appends"] == 0 and not out.result.claimed_done
    assert f"C1 judged met but `{TEST_CMD}` was not re-run -> unverified" in [r[6] for r in out.log]
    net = run_cast(
        tmp_path / "b", Cast(brief_text="implement it."), status_writer="kit", brief_safety_net=True
    )
    assert net.cast.briefs["executor"][0].startswith(
        "Brief 3: implement it.\n\n## Reference (appended by the kit)"
    )
    assert '"id": "U1"' in net.cast.briefs["executor"][0]
    assert json.dumps(TEST_CMD) in net.cast.briefs["executor-check"][0] and net.result.claimed_done
    assert net.result.counters["brief_safety_net_appends"] == 5  # not the first scout's: nothing to carry


def test_tool_attempt_reads_both_written_forms_and_leaves_answers_alone():
    from kit.model.actions import FINISH, tool_attempt

    json_call = tool_attempt('{"thought": "look", "tool": "read_file", "args": {"path": "a.py"}}')
    assert (json_call.tool, json_call.args) == ("read_file", {"path": "a.py"})
    assert tool_attempt("Let me check.\n```bash\nls -la\n```").args == {"command": "ls -la"}
    assert tool_attempt('```tool search\n{"pattern": "x"}\n```').tool == "search"
    finish = tool_attempt('{"tool": "finish", "args": {"decision": "stop"}}')
    assert (finish.tool, finish.args) == (FINISH, {"decision": "stop"})
    for answer in (
        '{"criteria": [], "defects": []}',
        '```json\n{"facts": []}\n```',
        "I think it is fine.",
        "",
    ):
        assert tool_attempt(answer) is None, answer
