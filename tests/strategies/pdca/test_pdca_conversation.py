"""pdca's roles as its source runs them (issue 21): the orchestrator is one conversation that reads
nothing raw, CHECK's re-runs are an executor session, the one outcome vocabulary, status updates under
their own role label, and the user-message templates in kit/prompts/pdca/."""

from __future__ import annotations

from kit.agent.loop import SHORTENED
from kit.config import Limits
from kit.strategies import pdca
from tests.support.context import run_context
from tests.support.pdca import (
    PASS,
    TEST_CMD,
    Cast,
    Outcome,
    run_cast,
    scripted_profile,
    verdict,
)


def orchestrator_calls(out: Outcome) -> list[dict]:
    return [c for c in out.calls if c["role"] == "orchestrator"]


def test_the_orchestrator_is_one_conversation_whose_prompt_grows_and_is_read_from_the_cache(tmp_path):
    out = run_cast(tmp_path, Cast(), status_writer="kit")
    assert out.result.claimed_done
    calls = orchestrator_calls(out)
    assert len(calls) == out.result.counters["role_calls"]["orchestrator"] == 6
    assert {c["conversation"] for c in calls} == {"orchestrator"}
    prompts = [c["input_uncached"] + c["cache_read"] + c["cache_write"] for c in calls]
    assert prompts == sorted(prompts) and len(set(prompts)) == 6  # every turn adds to the prompt
    # from the second turn on, the whole previous prompt is read from the (simulated prefix) cache
    assert all(c["cache_read"] >= p - 5 for c, p in zip(calls[1:], prompts, strict=False))
    turns = out.cast.briefs["orchestrator"]
    assert turns[0].startswith("Goal:\n") and all(not t.startswith("Goal:") for t in turns[1:])
    # each role's report arrives as the next turn: the analyst's plan is in the executor's hand-off
    assert "Hand-off to the executor: implement unit U1" in turns[2] and '"C1"' in turns[2]


def test_the_orchestrators_old_turns_are_shortened_to_fit_its_window(tmp_path):
    cast = Cast()
    profile, sheet = scripted_profile(cast)
    # small enough to shorten old turns, big enough for the newest whole (CHECK's carries its commands)
    profile.tiers["cheap"] = profile.tiers["cheap"].model_copy(update={"context_window": 2000})
    ctx = run_context(
        tmp_path,
        "pdca",
        profile,
        sheet,
        gateway_context={"task_path": ..., "test_command": ..., "workspace": ...},
        limits=Limits(max_steps=10),
        options={"status_writer": "kit"},
    )
    result = pdca.run(ctx)
    ctx.recorder.close()
    assert result.claimed_done
    last = cast_requests(cast, "orchestrator")[-1]
    users = [m["content"] for m in last if m["role"] == "user"]
    assert len(users) == 6 and users[0].startswith("Goal:") and SHORTENED not in users[0]  # kept whole
    assert any(SHORTENED in u for u in users[1:])


def cast_requests(cast: Cast, role: str) -> list[list[dict]]:
    return [r.messages for r in cast.requests if r.context.get("role") == role]


def test_check_reruns_are_an_executor_session_on_its_tier_read_only_and_counted(tmp_path):
    cast = Cast(check_first=("write_file", {"path": "textkit.py", "content": "x = 1\n"}))
    out = run_cast(tmp_path, cast, status_writer="kit", tiers={"executor": "medium"})
    c = out.result.counters
    assert out.result.claimed_done and c["check_reruns"] == 1
    assert c["role_calls"]["executor"] == 2 and len(out.cast.briefs["executor-check"]) == 1
    check = [x for x in out.calls if x["conversation"] == "executor-2"]
    assert [(x["role"], x["tier"]) for x in check] == [("executor", "medium")] * 3  # write, run, report
    assert sum(x["cost_usd"] for x in check) > 0 and len(out.calls) == out.ctx.budget.model_calls
    runs = [(e["role"], e["name"]) for e in out.events() if e["kind"] in ("tool", "denied")]
    assert ("scout", "run") not in runs and runs.count(("executor", "run")) == 2  # DO's test and CHECK's
    denied = [e for e in out.events("denied") if e["name"] == "write_file"]
    assert [e["role"] for e in denied] == ["executor"] and c["permission_denials"] == 1  # no write in CHECK
    assert (out.root / "textkit.py").read_text() != "x = 1\n"  # the denied write did nothing


def test_a_check_session_that_runs_nothing_leaves_the_criteria_unverified(tmp_path):
    out = run_cast(tmp_path, Cast(check_runs=False, verdicts=[PASS]), status_writer="kit", max_attempts=1)
    notes = [r[6] for r in out.log if r[5] == "audit rule"]
    assert f"C1 judged met but `{TEST_CMD}` was not re-run -> unverified" in notes
    assert out.result.outcome == "incomplete" and out.result.counters["escalations"] == 1


def test_one_outcome_vocabulary_with_pdcas_stop_reasons(tmp_path):
    done = run_cast(tmp_path / "done", Cast(), status_writer="kit")
    assert (done.result.outcome, done.result.counters["stop_reason"]) == ("done", "pass")
    spent = run_cast(tmp_path / "budget", Cast(), status_writer="kit", max_model_calls=6)
    assert spent.result.outcome == "budget"
    assert spent.result.counters["stop_reason"] == "cap:budget (run budget of 6 model calls used up)"
    capped = run_cast(tmp_path / "capped", Cast(), status_writer="kit", max_role_calls=4)
    assert (capped.result.outcome, capped.result.counters["stop_reason"]) == (
        "capped",
        "cap:max_role_calls (4)",
    )
    stopped = run_cast(
        tmp_path / "stop", Cast(verdicts=[verdict(met=("C2",))]), status_writer="kit", max_attempts=1
    )
    assert stopped.result.outcome == "incomplete"
    assert stopped.result.counters["stop_reason"].startswith("expert:stop (")


def test_status_updates_have_their_own_role_label_on_the_executors_tier(tmp_path):
    out = run_cast(tmp_path, Cast(), tiers={"executor": "strong"})
    updates = [c for c in out.calls if c["role"] == "status-writer"]
    assert len(updates) == out.result.counters["status_updates"]["model_calls"] > 10
    assert {c["tier"] for c in updates} == {"strong"}  # wherever the executor runs
    assert all(c["conversation"].startswith("status-writer-") for c in updates)
    executor = [c for c in out.calls if c["role"] == "executor"]
    assert {c["conversation"] for c in executor} == {"executor-1", "executor-2"}  # only its sessions
    assert {e["role"] for e in out.events("note")} <= {"status-writer"}


def test_pdcas_user_messages_come_from_prompt_files_the_lab_can_override(tmp_path):
    overrides = {
        "pdca/handoff": "NEXT TURN for the $role ($purpose)\n$material\n",
        "pdca/scout_evidence": "$brief\n\n## Raw output, as the lab words it\n$evidence\n",
        "pdca/reask": "$brief\n\nAGAIN: $problem\n",
    }
    only_c1 = verdict(met=("C1",))
    only_c1["criteria"] = only_c1["criteria"][:1]  # leaves C2 unjudged: asked again
    out = run_cast(tmp_path, Cast(verdicts=[only_c1, PASS]), status_writer="kit", overrides=overrides)
    assert out.result.claimed_done
    turns = out.cast.briefs["orchestrator"]
    assert turns[0].startswith("Goal:") and all(t.startswith("NEXT TURN for the ") for t in turns[1:])
    first, again = out.cast.briefs["auditor"]
    assert "## Raw output, as the lab words it\n$ " in out.cast.briefs["scout-check"][0]
    assert again.startswith(first) and again.endswith("AGAIN: no verdict for criteria C2")
