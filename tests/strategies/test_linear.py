"""The linear strategy with scripted models: steps in order and once each, the per-step cap, the gate,
skipped and failed steps, prompt overrides, the steps option -- in every action mode."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kit.config import TIERS, Experiment, Limits, ModelSpec, PriceSheet, Profile
from kit.errors import ConfigError
from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.model.policies import solution_files
from kit.model.scripted import Request
from kit.records.schema import CALLS, EVENTS, RUN, TRANSCRIPT, read_jsonl
from kit.run.runner import run_experiment
from kit.strategies import linear
from kit.strategies.context import RunContext
from kit.tasks.task import load_task
from kit.usage import ModelPrice
from tests.support.context import run_context

MODES = ["native", "json", "text"]
STEP_HEADER = re.compile(r"^Step (\d+) of (\d+): ", re.MULTILINE)
DEFAULT_STEPS = [
    s.name for s in linear.Skill.model_validate(yaml.safe_load(linear.SKILL_FILE.read_text())).steps
]
PRICE = ModelPrice(input=1, output=2, cache_read=0.1, cache_write=1.25)
NO_GATE = {"gate_commands": ["true"]}  # where the gate is not the point: skip the compile + pytest run


# --------------------------------------------------------------------------- scripted policies


def current_step(request: Request) -> tuple[int, int]:
    """(number of the step being worked on, model calls already made in it), read from the conversation."""
    calls = 0
    for m in reversed(request.messages):
        if m.get("role") == "assistant":
            calls += 1
        elif m.get("role") == "user" and (found := STEP_HEADER.search(str(m.get("content") or ""))):
            return int(found.group(1)), calls
    raise AssertionError("no step message in the conversation")


def _mode(request: Request) -> str:
    return request.context["action_mode"]


def scripted_skill(actions_per_step: dict[int, list[tuple[str, dict]]]) -> Callable[[Request], Any]:
    """A policy doing the given actions in each step (by step number), then ending the step."""

    def policy(request: Request) -> dict[str, Any]:
        if request.context.get("role") == "reviewer":
            return render(_mode(request), FINISH, {"issues": []}, "Nothing to report.")
        number, calls = current_step(request)
        todo = actions_per_step.get(number, [])
        if calls < len(todo):
            tool, args = todo[calls]
            return render(_mode(request), tool, args, f"step {number} action {calls + 1}")
        return render(
            _mode(request), FINISH, {"summary": f"step {number} complete"}, f"End of step {number}."
        )

    return policy


def diligent(task_path: Path, *, implementation: str | None = None) -> Callable[[Request], Any]:
    """Does what each default step asks (the reference solution in step 4, unless told otherwise)."""
    (path, content), *_ = solution_files(str(task_path))
    return scripted_skill(
        {
            2: [("read_file", {"path": "textkit.py"})],
            3: [("write_file", {"path": "PLAN.md", "content": "1. implement slugify\n2. test it\n"})],
            4: [("write_file", {"path": path, "content": implementation or content})],
            5: [("run", {"command": "python -m pytest -q"})],
            6: [("run", {"command": "git diff"})],
            7: [
                (
                    "write_file",
                    {
                        "path": "tests/test_slugify.py",
                        "content": "from textkit import slugify\n\n\n"
                        "def test_slugify():\n    assert slugify('Hello World') == 'hello-world'\n",
                    },
                )
            ],
            8: [("write_file", {"path": "CHANGELOG.md", "content": "- slugify() implemented\n"})],
        }
    )


def never_finishes(request: Request) -> dict[str, Any]:
    return render(_mode(request), "list_files", {"path": "."}, "Let me look around once more.")


def finishes_at_once(request: Request) -> dict[str, Any]:
    return render(_mode(request), FINISH, {"summary": "Done."}, "Done.")


# --------------------------------------------------------------------------- helpers


def make_ctx(
    tmp_path: Path,
    policy: Callable[[Request], Any],
    mode: str,
    *,
    options: dict[str, Any] | None = None,
    overrides: dict[str, str] | None = None,
    budget_tokens: int | None = None,
) -> RunContext:
    model = scripted.register(policy)
    profile = Profile(
        name="t",
        price_sheet="t",
        tiers={t: ModelSpec(model=model, price="p", action_mode=mode) for t in TIERS},
    )
    return run_context(
        tmp_path,
        "linear",
        profile,
        PriceSheet(name="t", prices={"p": PRICE}),
        gateway_context={"run_id": "r1", "task_path": ..., "workspace": ...},
        limits=Limits(command_timeout_s=60),
        options=options,
        budget={"max_tokens": budget_tokens},
        overrides=overrides,
    )


def run_linear(ctx: RunContext) -> tuple[linear.StrategyResult, dict[str, list[dict]]]:
    result = linear.run(ctx)
    ctx.recorder.close()
    d = ctx.recorder.run_dir
    return result, {
        "events": read_jsonl(d / EVENTS),
        "transcript": read_jsonl(d / TRANSCRIPT),
        "calls": read_jsonl(d / CALLS),
    }


def step_turns(transcript: list[dict]) -> list[tuple[int, int, str]]:
    """(step number, total, text) of every step message the kit sent, in order."""
    out = []
    for row in transcript:
        msg = row["message"]
        if msg["role"] == "user" and (found := STEP_HEADER.search(str(msg.get("content") or ""))):
            out.append((int(found.group(1)), int(found.group(2)), msg["content"]))
    return out


def assistant_turns_per_step(transcript: list[dict]) -> list[int]:
    """Model replies between one step message and the next (counted from the transcript)."""
    counts: list[int] = []
    for row in transcript:
        if row["conversation"] != "coder":
            continue
        msg = row["message"]
        if msg["role"] == "user" and STEP_HEADER.search(str(msg.get("content") or "")):
            counts.append(0)
        elif msg["role"] == "assistant":
            counts[-1] += 1
    return counts


def events_of(records: dict, kind: str) -> list[dict]:
    return [e for e in records["events"] if e["kind"] == kind]


# --------------------------------------------------------------------------- tests


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_steps_run_in_order_exactly_once(tmp_path, mode):
    ctx = make_ctx(tmp_path, diligent(load_task("micro-slugify").path), mode)
    result, rec = run_linear(ctx)

    turns = step_turns(rec["transcript"])
    assert [(n, total) for n, total, _ in turns] == [(i, 8) for i in range(1, 9)]
    assert (
        "Implement the function `slugify(text: str) -> str`" in turns[0][2]
    )  # the task prompt rides on step 1
    assert all("Implement the function `slugify" not in text for _, _, text in turns[1:])
    assert all("cannot go back" in text for _, _, text in turns)
    conversations = {row["conversation"] for row in rec["transcript"]}
    assert conversations == {"coder", "reviewer#1", "reviewer#2"}  # one coder conversation
    assert [e["name"] for e in events_of(rec, "step")] == DEFAULT_STEPS
    assert [e["name"] for e in events_of(rec, "phase")] == DEFAULT_STEPS
    assert all(e["ok"] for e in events_of(rec, "step"))

    c = result.counters
    assert result.outcome == "done" and result.claimed_done
    assert (c["steps_total"], c["steps_done"], c["steps_skipped"], c["steps_capped"]) == (8, 8, 0, 0)
    assert [e["outcome"] for e in c["per_step"]] == ["done"] * 8
    assert [e["tool_calls"] for e in c["per_step"]] == [0, 1, 1, 1, 1, 1, 1, 1]
    assert [e["steps"] for e in c["per_step"]] == assistant_turns_per_step(rec["transcript"])
    assert c["model_calls"] == len(rec["calls"]) == 15 + 2  # the coder's, then the two reviewers'
    assert c["review_calls"] == 2 and c["review_findings"] == 0 and c["reviewer_failures"] == 0
    assert c["tool_calls"] == 7 and c["format_errors"] == 0
    assert c["gate_passed"] is True
    assert [e["gate"] for e in c["per_step"]] == [None] * 4 + [True] + [None] * 3
    gates = events_of(rec, "gate")
    assert len(gates) == 1 and gates[0]["ok"] and gates[0]["name"] == "step_5_build_check"
    assert c["params"]["action_mode"] == mode and c["params"]["max_steps_per_step"] == 12
    root = ctx.workspace.root
    assert (root / "PLAN.md").is_file() and (root / "CHANGELOG.md").is_file()


@pytest.mark.parametrize("mode", MODES)
def test_per_step_cap_then_moves_on(tmp_path, mode):
    ctx = make_ctx(tmp_path, never_finishes, mode, options={"max_steps_per_step": 3, **NO_GATE})
    result, rec = run_linear(ctx)

    assert [n for n, _, _ in step_turns(rec["transcript"])] == list(range(1, 9))
    assert assistant_turns_per_step(rec["transcript"]) == [3] * 8
    assert len(rec["calls"]) == 24 + 2 * 3  # two reviewers, capped at the step cap too
    c = result.counters
    assert (c["steps_capped"], c["steps_done"], c["steps_skipped"]) == (8, 0, 0)
    assert [e["outcome"] for e in c["per_step"]] == ["capped"] * 8
    assert [e["steps"] for e in c["per_step"]] == [3] * 8
    assert c["tool_calls"] == 24
    assert result.outcome == "done" and not result.claimed_done
    assert not any(e["ok"] for e in events_of(rec, "step"))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["json"])  # the gate is not about the action mode; each gate runs pytest
def test_failed_gate_is_sent_back_then_recorded_and_the_next_step_runs(tmp_path, mode):
    broken = "def slugify(text:\n    return text\n"  # a syntax error: compileall fails
    policy = diligent(load_task("micro-slugify").path, implementation=broken)
    ctx = make_ctx(tmp_path, policy, mode, options={"gate_commands": [linear.COMPILE_CHECK]})
    result, rec = run_linear(ctx)

    gates = events_of(rec, "gate")
    assert len(gates) == 3 and not any(g["ok"] for g in gates)  # the step was sent back twice
    assert "compileall -q . -> exit 1" in gates[0]["detail"]
    c = result.counters
    assert c["gate_passed"] is False and c["gate_sent_back"] == 2
    gate_step = c["per_step"][4]
    assert (gate_step["name"], gate_step["outcome"], gate_step["gate"], gate_step["steps"]) == (
        "step_5_build_check",
        "gate_failed",
        False,
        2 + 1 + 1,  # run + finish, then one finish per send-back
    )
    sent_back = [t for t in rec["transcript"] if "gate after this step and it failed" in str(t["message"])]
    assert len(sent_back) == 2 and "compileall" in sent_back[0]["message"]["content"]
    assert c["steps_failed"] == 1 and c["steps_done"] == 7
    # the skill goes on: steps 6, 7 and 8 were sent and worked on after the failed gate
    assert [n for n, _, _ in step_turns(rec["transcript"])] == list(range(1, 9))
    step_events = events_of(rec, "step")
    assert [e["name"] for e in step_events[5:]] == DEFAULT_STEPS[5:]
    assert [e["outcome"] for e in c["per_step"][5:]] == ["done"] * 3
    assert gates[0]["seq"] < step_events[5]["seq"]
    assert result.outcome == "done"


@pytest.mark.parametrize("mode", MODES)
def test_skipped_steps_are_recorded(tmp_path, mode):
    ctx = make_ctx(tmp_path, finishes_at_once, mode)
    result, rec = run_linear(ctx)

    c = result.counters
    expected = ["done"] + ["skipped"] * 4 + ["done"] + ["skipped"] * 2  # no findings: the audit needs nothing
    assert [e["outcome"] for e in c["per_step"]] == expected
    assert (c["steps_done"], c["steps_skipped"], c["tool_calls"]) == (2, 6, 0)
    assert "ended without the step's write" in c["per_step"][3]["detail"]
    assert [e["ok"] for e in events_of(rec, "step")] == [o == "done" for o in expected]
    assert len([r for r in rec["calls"] if r["role"] == "coder"]) == 8
    assert c["review_calls"] == len([r for r in rec["calls"] if r["role"] == "reviewer"]) >= 2
    assert c["gate_passed"] is True  # the untouched repo still builds and its own tests pass
    assert result.outcome == "done" and result.claimed_done  # it said done at the last step


def test_format_errors_fail_one_step_only(tmp_path):
    inner = scripted_skill({})

    def policy(request: Request) -> Any:
        if request.context.get("role") == "reviewer":
            return inner(request)
        number, _ = current_step(request)
        return "this is not an action" if number == 2 else inner(request)

    ctx = make_ctx(tmp_path, policy, "json", options=NO_GATE)
    result, rec = run_linear(ctx)
    c = result.counters
    assert c["per_step"][1]["outcome"] == "format_errors"
    assert c["per_step"][1]["format_errors"] == 3 == c["format_errors"]
    assert len(events_of(rec, "format_error")) == 3
    assert [e["outcome"] for e in c["per_step"][2:]] == ["skipped"] * 3 + ["done"] + ["skipped"] * 2
    assert len(step_turns(rec["transcript"])) == 8


@pytest.mark.parametrize("mode", MODES)
def test_prompt_override_of_one_step(tmp_path, mode):
    overrides = {"linear/step_3_plan": "Write the plan as a haiku into $plan_file."}
    ctx = make_ctx(
        tmp_path, finishes_at_once, mode, overrides=overrides, options={"plan_file": "HAIKU.md", **NO_GATE}
    )
    result, rec = run_linear(ctx)

    turns = step_turns(rec["transcript"])
    assert "Write the plan as a haiku into HAIKU.md." in turns[2][2]
    assert "acceptance criterion will be checked" not in turns[2][2]  # the file's text is not used
    assert "Implement the plan" in turns[3][2]  # the other steps keep their files
    assert result.counters["params"]["plan_file"] == "HAIKU.md"


def test_steps_option_adds_and_removes_steps(tmp_path):
    options = {
        "steps": ["step_1_requirements", {"name": "lint", "title": "Lint", "needs": ["exec"]}, "step_8_docs"]
    }
    ctx = make_ctx(
        tmp_path, finishes_at_once, "text", options=options, overrides={"linear/lint": "Run ruff."}
    )
    result, rec = run_linear(ctx)

    turns = step_turns(rec["transcript"])
    assert [(n, total) for n, total, _ in turns] == [(1, 3), (2, 3), (3, 3)]
    assert turns[1][2].startswith("Step 2 of 3: Lint\n\nRun ruff.")
    assert [e["name"] for e in events_of(rec, "step")] == ["step_1_requirements", "lint", "step_8_docs"]
    assert result.counters["gate_passed"] is None  # no gate step in this skill
    assert not events_of(rec, "gate")
    assert [e["outcome"] for e in result.counters["per_step"]] == ["done", "skipped", "skipped"]


def test_unknown_step_fails_before_any_call(tmp_path):
    ctx = make_ctx(tmp_path, finishes_at_once, "native", options={"steps": ["step_1_requirements", "nope"]})
    with pytest.raises(ConfigError, match="nope"):
        linear.run(ctx)
    ctx.recorder.close()
    assert read_jsonl(ctx.recorder.run_dir / CALLS) == []


def test_step_named_like_a_frame_prompt_is_refused(tmp_path):
    ctx = make_ctx(tmp_path, finishes_at_once, "native", options={"steps": ["step_1_requirements", "task"]})
    with pytest.raises(ConfigError, match="clash"):
        linear.run(ctx)


def test_budget_stops_sending_steps(tmp_path):
    ctx = make_ctx(tmp_path, finishes_at_once, "native", budget_tokens=1)
    result, rec = run_linear(ctx)

    c = result.counters
    assert [e["outcome"] for e in c["per_step"]] == ["done", "budget"] + ["not_run"] * 6
    assert len(rec["calls"]) == 1 and c["steps_not_run"] == 6
    assert len(step_turns(rec["transcript"])) == 2
    assert result.outcome == "budget" and not result.claimed_done


@pytest.mark.slow
def test_whole_run_through_the_runner(tmp_path):
    """run_experiment -> run.json counters, records, and a clean score for the diligent policy."""
    task = load_task("micro-slugify")
    model = scripted.register(diligent(task.path))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "prices").mkdir()
    (tmp_path / "prices" / "lin.yaml").write_text(
        yaml.safe_dump({"name": "lin", "prices": {"p": PRICE.model_dump()}}), encoding="utf-8"
    )
    profile = {
        "name": "lin",
        "price_sheet": "lin",
        "tiers": {t: {"model": model, "price": "p"} for t in TIERS},
    }
    (tmp_path / "profiles" / "lin.yaml").write_text(yaml.safe_dump(profile), encoding="utf-8")
    experiment = Experiment(
        name="lin",
        tasks=["micro-slugify"],
        strategies=["linear"],
        profile=str(tmp_path / "profiles" / "lin.yaml"),
        strategy_options={"linear": {"max_steps_per_step": 4}},
    )
    out = run_experiment(experiment, results_dir=tmp_path / "results", progress=False)
    run_dir = out / "runs" / "micro-slugify__linear__lin__r1"
    record = json.loads((run_dir / RUN).read_text())

    assert record["outcome"] == "done" and record["claimed_done"] and record["error"] is None
    c = record["counters"]
    assert c["steps_done"] == 8 and c["gate_passed"] is True
    assert c["params"]["max_steps_per_step"] == 4
    assert record["calls"] == c["model_calls"] == len(read_jsonl(run_dir / CALLS)) == 15 + 2
    assert {r["role"] for r in read_jsonl(run_dir / CALLS)} == {"coder", "reviewer"}
    assert record["role_tiers"] == {"coder": "cheap", "reviewer": "cheap"}
    assert record["score"]["requirements_failed"] == 0 and record["score"]["requirements_total"] > 0
    assert [e["name"] for e in read_jsonl(run_dir / EVENTS) if e["kind"] == "step"] == DEFAULT_STEPS


# --------------------------------------------------------------------------- gate, audit, budget


def test_a_failed_gate_sends_the_step_back_and_a_fix_passes_it(tmp_path):
    (path, good), *_ = solution_files(str(load_task("micro-slugify").path))
    inner = scripted_skill(
        {
            4: [("write_file", {"path": path, "content": "def slugify(text:\n"})],
            5: [("run", {"command": "true"})],
        }
    )

    def policy(request: Request) -> Any:
        last_user = next(m for m in reversed(request.messages) if m.get("role") == "user")
        told = "gate after this step and it failed" in str(last_user.get("content"))
        if told and request.messages[-1] is last_user:  # sent back: fix it, then end the step
            return render(_mode(request), "write_file", {"path": path, "content": good}, "Fix the syntax.")
        return inner(request)

    options = {"gate_commands": ["python -m compileall -q ."]}
    result, rec = run_linear(make_ctx(tmp_path, policy, "native", options=options))
    c = result.counters
    gate_step = c["per_step"][4]
    assert (gate_step["outcome"], gate_step["gate"], gate_step["gate_sent_back"]) == ("done", True, 1)
    assert [g["ok"] for g in events_of(rec, "gate")] == [False, True]
    assert c["gate_passed"] is True and c["gate_sent_back"] == 1
    assert gate_step["steps"] == 2 + 2  # run + finish; then (sent back) write + finish
    # only the gate step came back: every step message was still sent once, in order
    assert [n for n, _, _ in step_turns(rec["transcript"])] == list(range(1, 9))


def test_a_gate_send_back_stays_within_the_step_cap(tmp_path):
    inner = scripted_skill({4: [("write_file", {"path": "textkit.py", "content": "def slugify(text:\n"})]})
    options = {"gate_commands": ["python -m compileall -q ."], "max_steps_per_step": 2, "gate_retries": 5}
    result, rec = run_linear(make_ctx(tmp_path, inner, "native", options=options))
    gate_step = result.counters["per_step"][4]
    assert (gate_step["outcome"], gate_step["steps"], gate_step["gate_sent_back"]) == ("gate_failed", 2, 1)
    assert len(events_of(rec, "gate")) == 2


def test_two_read_only_reviewers_audit_and_their_findings_reach_the_coder(tmp_path):
    problems = {1: "slugify keeps trailing dashes", 2: "no test for empty input"}

    def reviewer(request: Request) -> Any:
        seat = int(re.search(r"reviewer (\d) of 2", request.messages[1]["content"]).group(1))
        if sum(m.get("role") == "assistant" for m in request.messages) == 0:  # tries to write: denied
            return render(
                _mode(request), "write_file", {"path": "hacked.txt", "content": "x"}, "Fix it myself."
            )
        issue = {"file": "textkit.py", "problem": problems[seat], "severity": "Major"}
        return render(_mode(request), FINISH, {"issues": [issue]}, "Found one.")

    inner = scripted_skill({})

    def policy(request: Request) -> Any:
        return reviewer(request) if request.context.get("role") == "reviewer" else inner(request)

    result, rec = run_linear(make_ctx(tmp_path, policy, "native", options=NO_GATE))
    c = result.counters
    assert (c["review_findings"], c["review_calls"], c["reviewer_failures"]) == (2, 4, 0)
    audit_turn = step_turns(rec["transcript"])[5][2]
    assert "Findings of the reviewers (2)" in audit_turn
    assert all(p in audit_turn for p in problems.values()) and "(major)" in audit_turn
    # the reviewers saw the diff and had read tools only: their write was denied, nothing was written
    denied = events_of(rec, "denied")
    assert len(denied) == 2 and {d["role"] for d in denied} == {"reviewer"}
    assert not (tmp_path / "repo" / "hacked.txt").exists()
    review_msgs = [t for t in rec["transcript"] if t["conversation"] == "reviewer#1"]
    assert "git diff against the starting commit" in review_msgs[1]["message"]["content"]
    # the coder ended the audit step without changing anything although there were findings: skipped
    audit = c["per_step"][5]
    assert (audit["outcome"], audit["findings"]) == ("skipped", 2) and "write" in audit["detail"]


@pytest.mark.slow
def test_linear_and_vibe_stop_at_the_same_max_model_calls(tmp_path):
    """The same run budget bounds both: vibe's one agent and linear's eight steps plus two reviewers.
    The model never finishes, so each strategy spends exactly what the budget allows."""
    from tests.support.helpers import experiment as make_experiment
    from tests.support.helpers import write_profile

    def endless(request: Request) -> Any:
        return render(_mode(request), "list_files", {"path": "."}, "Looking around once more.")

    profile = write_profile(tmp_path, scripted.register(endless, name="endless"), "native")
    base = {"limits": Limits(max_steps=60, max_model_calls=11)}
    explicit = {"linear": {**NO_GATE, "max_steps_per_step": 12}}  # 12 x 8 steps would be 96 calls
    runs = {}
    for name, strategies, options in (
        ("explicit", ["vibe", "linear"], explicit),
        ("derived", ["linear"], {"linear": NO_GATE}),
    ):
        exp = make_experiment(name, profile, ["micro-slugify"], strategies, **base, strategy_options=options)
        out = run_experiment(exp, results_dir=tmp_path / "results", progress=False)
        for strategy in strategies:
            runs[name, strategy] = json.loads(
                (out / "runs" / f"micro-slugify__{strategy}__scripted-test__r1" / RUN).read_text()
            )
    for (name, strategy), record in runs.items():
        assert record["calls"] == 11, (name, strategy, record["calls"])
        assert record["budget"] == {"max_model_calls": 11, "max_usd": None, "max_tokens": None}
    assert runs["explicit", "vibe"]["outcome"] == "budget"
    assert runs["explicit", "linear"]["outcome"] == "budget"  # the budget, not the step caps, stopped it
    derived = runs["derived", "linear"]["counters"]
    assert derived["params"]["step_cap_from"].startswith("run budget")
    assert sum(e["steps"] for e in derived["per_step"]) + derived["review_calls"] == 11
    assert [e["cap"] for e in derived["per_step"]][:5] == [1, 1, 1, 1, 1]  # 11 // 8, 10 // 7, ...
