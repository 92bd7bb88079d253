"""pdca: one scenario per control path, asserted on the status file, the records and the counters."""

from __future__ import annotations

import copy
import shutil
import subprocess

import pytest
import yaml

from kit.config import TIERS, Experiment, Limits
from kit.model import scripted
from kit.paths import PRICES_DIR
from kit.records.schema import CALLS, EVENTS, load_run, read_jsonl
from kit.run.runner import run_experiment
from kit.strategies.pdca.plan import PlanDraft, check_plan
from tests.support.pdca import PASS, TEST_CMD, Cast, plan, run_cast, verdict

TWO_UNITS = [
    {"id": "U1", "expected_result": "slugify written", "criteria": ["C1"]},
    {"id": "U2", "expected_result": "word_count kept", "criteria": ["C2"]},
]


def events_of(out, kind):
    return [(e["name"], e["ok"]) for e in out.events(kind)]


def logged(out, event):
    return [row for row in out.log if row[5] == event]


@pytest.mark.parametrize("mode", ["native", "json", "text"])
def test_happy_path_plan_do_check_act_exit(tmp_path, mode):
    out = run_cast(tmp_path, Cast(), mode=mode)
    c = out.result.counters
    assert (out.result.outcome, out.result.claimed_done) == ("done", True)
    assert (c["cycles"], c["plan_revisions"], c["attempts"], c["escalations"], c["gate_rejections"]) == (
        1,
        1,
        1,
        0,
        0,
    )
    # executor: the unit's session and CHECK's re-run session, each briefed by the orchestrator
    assert c["role_calls"] == {"orchestrator": 6, "scout": 2, "analyst": 1, "executor": 2, "auditor": 1}
    assert c["handoffs_by_role"] == {"scout": 2, "analyst": 1, "executor": 2, "auditor": 1}
    assert c["handoffs"] == 6 and c["check_scout_sessions"] == 1
    assert c["role_calls_by_phase"] == {
        "PLAN": {"orchestrator": 2, "scout": 1, "analyst": 1},
        "DO": {"orchestrator": 1, "executor": 1},
        "CHECK": {"orchestrator": 3, "executor": 1, "scout": 1, "auditor": 1},
    }
    assert [(r[1], r[5]) for r in out.log] == [
        ("PLAN", "enter"),
        ("PLAN", "scout report"),
        ("PLAN", "analyst answered"),
        ("PLAN", "gate PLAN->DO passed"),
        ("DO", "enter"),
        ("DO", "unit U1 running"),
        ("DO", "unit U1 done"),
        ("DO", "gate DO->CHECK passed"),
        ("CHECK", "enter"),
        ("CHECK", "CHECK re-run"),
        ("CHECK", "scout report"),
        ("CHECK", "gate CHECK->ACT passed"),
        ("ACT", "enter"),
        ("ACT", "cycle closed"),
        ("EXIT", "exit"),
    ]
    assert {(r[2], r[3], r[4]) for r in out.log} == {("1", "1", "3")}
    assert [e["name"] for e in out.events("phase")] == ["PLAN", "DO", "CHECK", "ACT", "EXIT"]
    assert events_of(out, "gate") == [("PLAN->DO", True), ("DO->CHECK", True), ("CHECK->ACT", True)]
    assert "exit 0" in logged(out, "unit U1 done")[0][6]
    # append-only: snapshots were appended, and the copy in the run folder is the same file
    assert out.status_text.count("## State @") == 6 and "- counters: N=1 r=1 n=1/3" in out.status_text
    assert (out.ctx.recorder.run_dir / "pdca-status" / "micro-slugify-1.md").read_text() == out.status_text
    # the status file is not part of the task's diff
    status = subprocess.run(
        ["git", "-c", "safe.directory=*", "status", "--porcelain"],
        cwd=out.root,
        capture_output=True,
        text=True,
    ).stdout
    assert status.split() == ["M", "textkit.py"]
    # the orchestrator composed every hand-off and its tokens were recorded on the cheap tier
    assert {(c["role"], c["tier"]) for c in out.calls if c["role"] == "orchestrator"} == {
        ("orchestrator", "cheap")
    }
    assert all(
        b.startswith("Brief ")
        for role in ("scout", "analyst", "executor", "auditor")
        for b in out.cast.briefs[role]
    )


def test_plan_missing_field_goes_back_to_the_analyst(tmp_path):
    incomplete = plan(constraints=[])
    del incomplete["risks"]
    out = run_cast(tmp_path, Cast(plans=[incomplete, plan()]))
    c = out.result.counters
    assert out.result.outcome == "done"
    assert (c["gate_rejections"], c["gate_rejections_by_gate"], c["plan_revisions"]) == (
        1,
        {"PLAN->DO": 1},
        1,
    )
    assert out.cast.briefs["analyst"][1].count("missing or empty") == 2
    assert "missing or empty: constraints" in out.cast.briefs["analyst"][1]
    assert "missing or empty: risks" in out.cast.briefs["analyst"][1]
    gates = [(r[5], r[2], r[3]) for r in out.log if r[5].startswith("gate PLAN")]
    assert gates == [("gate PLAN->DO rejected", "1", "1"), ("gate PLAN->DO passed", "1", "1")]
    assert events_of(out, "gate")[:2] == [("PLAN->DO", False), ("PLAN->DO", True)]


def test_unreadable_plan_is_a_gate_rejection_not_a_crash(tmp_path):
    out = run_cast(tmp_path, Cast(plans=["I will write slugify.", plan()]), answer_steps=1)
    c = out.result.counters
    assert out.result.outcome == "done" and c["gate_rejections_by_gate"] == {"PLAN->DO": 1}
    assert "missing or empty: expected_result" in logged(out, "gate PLAN->DO rejected")[0][6]
    assert [r[6] for r in logged(out, "analyst answered")] == ["capped", "done"]
    # a gate that keeps rejecting goes to the expert (no kit-made STOP); without a plan, no "continue"
    stopped = run_cast(tmp_path / "b", Cast(plans=["no plan"]), answer_steps=1, max_plan_rejections=2)
    assert stopped.result.counters["stop_reason"] == "expert:stop (PLAN->DO gate rejected 2 plans in a row)"
    assert stopped.result.outcome == "incomplete" and "(no accepted plan)" in stopped.result.summary
    assert stopped.sessions("analyst") == 2 and stopped.sessions("executor") == 0
    assert '"replan",\n  "stop"\n ]' in stopped.cast.briefs["expert"][0]  # allowed_decisions


def test_three_rejections_then_expert_never_a_fourth_attempt(tmp_path):
    verdicts = [verdict(met=("C2",), defects=(k,)) for k in ("case", "hyphen", "digits")]
    out = run_cast(tmp_path, Cast(verdicts=verdicts + [PASS]))
    c = out.result.counters
    assert out.sessions("executor") == 3 and out.sessions("auditor") == 3 and out.sessions("expert") == 1
    assert (c["attempts"], c["attempts_per_revision"], c["escalations"]) == (3, {"r1": 3}, 1)
    assert c["gate_rejections_by_gate"] == {"CHECK->ACT": 3}
    assert max(int(r[3]) for r in out.log) == 3
    assert [(r[3], r[5]) for r in out.log if r[1] == "ESCALATE"][0] == ("3", "enter")
    assert "auditor rejected 3 times on revision 1" in out.log[-2][6]  # the stop line
    assert events_of(out, "escalation") == [("stop", False)]
    assert [d["fix_count"] for d in c["defect_history"]] == [1, 1, 0]
    assert [d["escalation"] for d in c["defect_history"]] == ["", "", "stop @ r1/n3"]


def test_same_defect_key_twice_goes_to_the_expert_before_a_second_fix(tmp_path):
    again = verdict(met=("C2",), defects=("Trailing hyphen",))
    out = run_cast(tmp_path, Cast(verdicts=[again, again, PASS]))
    c = out.result.counters
    assert out.sessions("executor") == 2 and out.sessions("expert") == 1
    assert c["attempts_per_revision"] == {"r1": 2}
    (rec,) = c["defect_history"]
    assert (rec["key"], rec["first_seen"], rec["last_seen"], rec["seen"], rec["fix_count"]) == (
        "trailing-hyphen", "r1/n1", "r1/n2", 2, 1,
    )  # fmt: skip
    assert rec["escalation"] == "stop @ r1/n2"
    escalate = [r for r in out.log if r[1] == "ESCALATE" and r[5] == "enter"][0]
    assert (escalate[3], "defect trailing-hyphen came back after a fix") == ("2", escalate[6])
    assert "| trailing-hyphen | major | DO | r1/n1 | r1/n2 | 2 | 1 | stop @ r1/n2 |" in out.status_text


@pytest.mark.slow
def test_expert_replan_bumps_r_resets_n_and_keeps_the_defect_history(tmp_path):
    again = verdict(met=("C2",), defects=("trailing-hyphen",))
    reworded = plan(constraints=["do not change word_count", "strip hyphens at both ends"])
    revised = copy.deepcopy(reworded)  # a new verification method for C1: a structural change
    revised["acceptance_criteria"][0]["how_verified"] = "python -m pytest -q tests"  # runs the repo's tests
    cast = Cast(
        plans=[plan(), reworded, revised],  # the expert wants a change: a reworded plan is rejected
        verdicts=[again, again, PASS],
        decisions=[{"decision": "replan", "new_input": "strip the hyphens", "reasons": ["same defect"]}],
    )
    out = run_cast(tmp_path, cast)
    c = out.result.counters
    assert (out.result.outcome, c["plan_revisions"], c["escalations"]) == ("done", 2, 1)
    assert c["attempts_per_revision"] == {"r1": 2, "r2": 1}
    assert c["gate_rejections_by_gate"] == {"CHECK->ACT": 2, "PLAN->DO": 1}
    assert (
        "structure (units, criteria, dependencies, verification methods) is unchanged"
        in (logged(out, "gate PLAN->DO rejected")[0][6])
    )
    assert "expert: strip the hyphens" in out.cast.briefs["analyst"][1]
    assert events_of(out, "escalation") == [("replan", True)]
    rn = [(r[1], r[2], r[3]) for r in out.log]
    assert rn[rn.index(("DO", "2", "1")) - 1] == ("PLAN", "2", "1")  # r2 starts at n1
    assert ("DO", "2", "2") not in rn
    (rec,) = c["defect_history"]
    assert (rec["first_seen"], rec["fix_count"], rec["escalation"]) == ("r1/n1", 1, "replan @ r1/n2")
    assert (
        "| trailing-hyphen | major | DO | r1/n1 | r1/n2 | 2 | 1 | replan @ r1/n2 |"
        in out.status_text.split("## State @")[-1]
    )  # the final snapshot, after the replan


def test_expert_stop_is_incomplete_and_lists_unmet_criteria(tmp_path):
    no_evidence = verdict()  # C2 "met" without evidence -> unverified -> a defect keyed on C2
    no_evidence["criteria"][1]["evidence"] = ""
    out = run_cast(tmp_path, Cast(verdicts=[no_evidence]))
    c = out.result.counters
    assert (out.result.outcome, out.result.claimed_done) == ("incomplete", False)
    assert c["stop_reason"] == "expert:stop (defect criterion-c2 came back after a fix)"
    assert c["unmet"] == ["C2 (unverified): word_count is unchanged"]
    assert "C2 (unverified): word_count is unchanged" in out.result.summary
    assert logged(out, "audit rule")[0][6] == "C2 judged met without evidence -> unverified"
    assert out.log[-1][1:] == (
        "STOP",
        "1",
        "2",
        "3",
        "unmet/unverified",
        "C2 (unverified): word_count is unchanged",
    )
    assert "- current state: STOP" in out.status_text.split("## State @")[-1]


def test_superseded_unit_must_inherit_all_its_criteria(tmp_path):
    drops = [*TWO_UNITS[:1], {**TWO_UNITS[1], "state": "superseded", "superseded_by": "U3"}]
    keeps = [*drops, {"id": "U3", "expected_result": "word_count checked", "criteria": ["C2"]}]
    drops = [*drops, {"id": "U3", "expected_result": "word_count checked", "criteria": ["C1"]}]
    cast = Cast(
        plans=[plan(TWO_UNITS), plan(drops), plan(keeps)],
        verdicts=[verdict(met=("C1",), defects=("split-wrong",), route="PLAN"), PASS],
    )
    out = run_cast(tmp_path, cast)
    c = out.result.counters
    assert (out.result.outcome, c["plan_revisions"], c["attempts_per_revision"]) == (
        "done",
        2,
        {"r1": 1, "r2": 1},
    )
    assert c["gate_rejections_by_gate"] == {"CHECK->ACT": 1, "PLAN->DO": 1}
    assert (
        "unit U3 replaces U2 but does not inherit criteria C2" in logged(out, "gate PLAN->DO rejected")[0][6]
    )
    runs = [(r[2], r[5]) for r in out.log if r[5].endswith("running")]
    assert runs == [
        ("1", "unit U1 running"),
        ("1", "unit U2 running"),
        ("2", "unit U3 running"),
    ]  # U1 stays done
    assert "| U2 | superseded | C2 |  | U3 |  | 1 |" in out.status_text.split("## State @")[-1]


def test_plan_route_with_an_unchanged_plan_is_the_next_attempt_not_a_revision(tmp_path):
    plan_defect = verdict(met=("C1",), defects=("criteria-vague",), route="PLAN")
    out = run_cast(tmp_path, Cast(plans=[plan()], verdicts=[plan_defect, PASS]))
    c = out.result.counters
    assert (out.result.outcome, c["plan_revisions"], c["attempts_per_revision"]) == ("done", 1, {"r1": 2})
    assert out.sessions("analyst") == 2 and out.sessions("executor") == 2  # U1 reopened for attempt 2
    assert [(r[1], r[2], r[3]) for r in out.log if r[5] == "enter"][-4:] == [
        ("PLAN", "1", "1"), ("DO", "1", "2"), ("CHECK", "1", "2"), ("ACT", "1", "2"),
    ]  # fmt: skip
    assert "criteria-vague" in out.cast.briefs["analyst"][1]
    assert "- r1/n2: plan kept" in out.status_text


def test_blocked_unit_resumes_after_its_new_prerequisite(tmp_path):
    blocked = [
        {"id": "U0", "expected_result": "helper added", "criteria": ["C2"]},
        {"id": "U1", "expected_result": "slugify written", "criteria": ["C1", "C2"], "state": "blocked", "blocked_by": "U0"},
    ]  # fmt: skip
    cast = Cast(
        plans=[plan(), plan(blocked)], reports=[{"done": False, "blockers": ["needs a helper first"]}]
    )
    out = run_cast(tmp_path, cast)
    c = out.result.counters
    assert (out.result.outcome, c["plan_revisions"], c["gate_rejections_by_gate"]) == (
        "done",
        2,
        {"DO->CHECK": 1},
    )
    assert "needs a helper first" in out.cast.briefs["analyst"][1]
    order = [(r[2], r[5]) for r in out.log if r[5].startswith("unit ")]
    assert order == [
        ("1", "unit U1 running"),
        ("1", "unit U1 blocked"),
        ("2", "unit U0 running"),
        ("2", "unit U0 done"),
        ("2", "unit U1 resumes"),
        ("2", "unit U1 running"),
        ("2", "unit U1 done"),
    ]


def test_evidence_from_a_command_never_run_is_refused(tmp_path):
    fake = {"evidence": [{"command": "pytest --all-green", "exit_code": 0}]}
    out = run_cast(tmp_path, Cast(reports=[fake, fake]), max_do_rejections=2)
    c = out.result.counters
    assert out.result.outcome == "incomplete" and c["gate_rejections_by_gate"] == {"DO->CHECK": 2}
    assert len(logged(out, "unit U1 evidence refused")) == 2 and out.sessions("auditor") == 0
    assert c["escalations"] == 1 and "DO gate rejected 2 times" in c["stop_reason"]


def test_tool_calls_of_analyst_and_auditor_are_denied_and_counted(tmp_path):
    cast = Cast(
        first_action={"analyst": ("read_file", {"path": "textkit.py"}), "auditor": ("run", {"command": "ls"})}
    )
    out = run_cast(tmp_path, cast)
    assert out.result.outcome == "done"
    denied = [(e["role"], e["name"]) for e in out.events("denied")]
    assert denied == [("analyst", "read_file"), ("auditor", "run")]
    assert out.result.counters["permission_denials"] == 2 == out.ctx.recorder.denials


def test_only_the_executor_changes_files(tmp_path):
    status = ".pdca/status/micro-slugify-1.md"
    cast = Cast(
        first_action={
            "scout": ("write_file", {"path": "textkit.py", "content": "x = 1\n"}),
            "expert": ("edit_file", {"path": "textkit.py", "old": "def", "new": "fed"}),
            "executor": (
                "write_file",
                {"path": "./.pdca/status/../status/micro-slugify-1.md", "content": "ok"},
            ),
        },
        verdicts=[verdict(met=("C1",), defects=("x",)), verdict(met=("C1",), defects=("x",)), PASS],
        decisions=[{"decision": "stop", "reasons": ["r"]}],
    )
    out = run_cast(tmp_path, cast)
    denied = [(e["role"], e["name"]) for e in out.events("denied")]
    assert ("scout", "write_file") in denied and ("expert", "edit_file") in denied
    assert denied.count(("executor", "write_file")) == 2  # the status-file guard, in both sessions
    changing = {
        (e["role"], e["name"]) for e in out.events("tool") if e["name"] in ("write_file", "edit_file", "run")
    }  # CHECK's re-runs of the proving commands are the executor's too (read + exec, no write tools)
    assert changing == {("executor", "write_file"), ("executor", "run")}
    git = ["git", "-c", "safe.directory=*", "status", "--porcelain", "--untracked-files=all", "--ignored"]
    changed = subprocess.run(git, cwd=out.root, capture_output=True, text=True).stdout.splitlines()
    changed = [line for line in changed if "cache" not in line]
    assert changed == [" M textkit.py", f"!! {status}"]  # the executor's change, and the loop's status file
    assert out.status_text.startswith("# PDCA status: micro-slugify") and out.status_text != "ok"


def test_status_file_changed_by_a_shell_command_is_restored(tmp_path):
    cast = Cast(
        first_action={"executor": ("run", {"command": "echo gone > .pdca/status/micro-slugify-1.md"})}
    )
    out = run_cast(tmp_path, cast)
    assert out.status_text.startswith("# PDCA status: micro-slugify") and "gone" not in out.status_text
    assert [e["name"] for e in out.events("note") if not e["ok"]] == ["status-file"]


def test_check_plan_gate_rules():
    full = plan(TWO_UNITS)
    accepted, problems = check_plan(PlanDraft.model_validate(full), None)
    assert problems == [] and [u.state for u in accepted.units] == ["pending", "pending"]
    uncovered, problems = check_plan(PlanDraft.model_validate(plan(TWO_UNITS[:1])), None)
    assert problems == ["criterion C2 is covered by no active unit"]
    _, problems = check_plan(
        PlanDraft.model_validate(plan([TWO_UNITS[1]] + [TWO_UNITS[0] | {"id": "U3"}])), accepted
    )
    assert problems == [
        "unit U1 of the previous revision is gone; keep it, marked superseded_by its replacement"
    ]
    no_split, problems = check_plan(
        PlanDraft.model_validate(plan(units=[], no_split=True, no_split_reason="tiny")), None
    )
    assert problems == [] and [(u.id, u.criteria) for u in no_split.units] == [("U1", ["C1", "C2"])]
    assert check_plan(PlanDraft.model_validate(plan(units=[], no_split=True)), None)[1] == [
        "missing or empty: units (or no_split with no_split_reason)"
    ]
    schema = PlanDraft.model_json_schema()  # the analyst is asked for the strict plan
    assert {"expected_result", "risks", "units", "acceptance_criteria"} <= set(schema["required"])
    assert (schema["properties"]["risks"]["minItems"], schema["properties"]["risks"]["maxItems"]) == (1, 4)
    assert (
        PlanDraft.model_validate(plan(risks=[f"r{i}" for i in range(9)])).risks[8] == "r8"
    )  # read leniently


def test_runner_records_roles_tiers_and_counters(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "prices").mkdir()
    shutil.copy(PRICES_DIR / "scripted.yaml", tmp_path / "prices" / "scripted.yaml")
    model = scripted.register(Cast())
    tiers = {t: {"model": model, "price": f"scripted-{t}"} for t in TIERS}
    profile = tmp_path / "profiles" / "p.yaml"
    profile.write_text(yaml.safe_dump({"name": "p", "price_sheet": "scripted", "tiers": tiers}))
    exp = Experiment(
        name="pdca-test",
        tasks=["micro-slugify"],
        strategies=["pdca"],
        profile=str(profile),
        limits=Limits(max_steps=10),
        strategy_options={"pdca": {"report_retries": 1}},
    )
    run_dir = (
        run_experiment(exp, results_dir=tmp_path / "results", progress=False)
        / "runs"
        / "micro-slugify__pdca__p__r1"
    )
    record = load_run(run_dir)
    assert record.outcome == "done" and record.claimed_done and record.score.defects_total == 0
    assert record.score.files_touched == 1  # the status file is not counted against the task
    assert "pdca" not in (run_dir / "diff.patch").read_text()
    c = record.counters
    assert (c["cycles"], c["plan_revisions"], c["attempts"], c["permission_denials"]) == (1, 1, 1, 0)
    assert c["params"]["report_retries"] == 1 and c["params"]["max_attempts"] == 3
    roles = {(c["role"], c["tier"]) for c in read_jsonl(run_dir / CALLS)}
    assert roles == {
        ("orchestrator", "cheap"), ("scout", "cheap"), ("analyst", "medium"), ("executor", "cheap"), ("auditor", "medium"),
        ("status-writer", "cheap"),
    }  # fmt: skip
    assert TEST_CMD in (run_dir / "pdca-status" / "micro-slugify-1.md").read_text()
    assert [e["ok"] for e in read_jsonl(run_dir / EVENTS) if e["kind"] == "gate"] == [True, True, True]
