"""harness: initializer + fresh-context coder sessions, driven by a scripted model (offline).

The scripted policy is stateless: the step is the number of assistant turns in the conversation, the
session number comes from the conversation id ``coder#<k>``, and the feature list is read from the
clone, so the same policy speaks every action mode through :func:`kit.model.actions.render`.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kit.agent.budget import Budget
from kit.config import TIERS, Experiment, Limits, ModelSpec, PriceSheet, Profile
from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.records.schema import load_run, read_jsonl
from kit.run.runner import run_experiment
from kit.strategies import harness
from kit.strategies.context import RunContext
from kit.usage import ModelPrice
from tests.support.context import run_context

Action = tuple[str, dict[str, Any]]
FINISHED: Action = (FINISH, {"summary": "Done."})
COMMIT = "git add -A && git -c user.name=t -c user.email=t@example.com commit -qm"


def features(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"F{i}",
            "category": "functional",
            "description": f"feature {i}",
            "steps": [f"check {i}"],
            "passes": False,
        }
        for i in range(1, n + 1)
    ]


def listing(ws: Path) -> list[dict[str, Any]]:
    return json.loads((ws / harness.FEATURE_LIST).read_text())


def good_initializer(n: int) -> Callable[[int, Path], Action]:
    """Writes a list of ``n`` features, init.sh and the progress file, commits, stops."""

    def act(step: int, ws: Path) -> Action:
        plan: list[Action] = [
            ("write_file", {"path": harness.FEATURE_LIST, "content": json.dumps(features(n), indent=2)}),
            ("write_file", {"path": harness.INIT_SH, "content": "#!/bin/sh\npython -m pytest -q\n"}),
            (
                "write_file",
                {"path": harness.PROGRESS, "content": "# Progress\n- initializer: feature list\n"},
            ),
            ("run", {"command": f"{COMMIT} 'harness: feature list'"}),
        ]
        return plan[step] if step < len(plan) else FINISHED

    return act


def flip_one_coder(k: int, step: int, ws: Path) -> Action:
    """Orients, implements the first failing feature, flips only its flag, commits, logs progress."""
    data = listing(ws)
    todo = next((f for f in data if not f["passes"]), None)
    if step == 0:
        return ("run", {"command": f"cat {harness.PROGRESS} {harness.FEATURE_LIST} && git log --oneline -5"})
    if step == 1 and todo is not None:
        return ("write_file", {"path": f"feature_{todo['id']}.txt", "content": f"done in session {k}\n"})
    if step == 2 and todo is not None:
        flipped = [{**f, "passes": True} if f["id"] == todo["id"] else f for f in data]
        return ("write_file", {"path": harness.FEATURE_LIST, "content": json.dumps(flipped, indent=2)})
    if step == 3:
        return ("run", {"command": f"echo '- session {k}' >> {harness.PROGRESS} && {COMMIT} s{k}"})
    return FINISHED


def idle_coder(k: int, step: int, ws: Path) -> Action:
    return FINISHED


def policy(initializer: Callable[[int, Path], Action], coder: Callable[[int, int, Path], Action]):
    def reply(request: scripted.Request) -> dict[str, Any]:
        conversation = request.context["conversation"]
        ws = Path(request.context["workspace"])
        step = sum(m.get("role") == "assistant" for m in request.messages)
        if request.context["role"] == "initializer":
            tool, args = initializer(step, ws)
        else:
            tool, args = coder(int(conversation.split("#")[1]), step, ws)
        if (tool, args) == FINISHED:
            args = {"summary": f"{conversation} is done."}
        return render(request.context["action_mode"], tool, args, f"{conversation} step {step}.")

    return reply


SHEET = PriceSheet(name="t", prices={"p": ModelPrice(input=1, output=2, cache_read=0.1, cache_write=1.25)})


def make_ctx(tmp_path: Path, model: str, options: dict | None = None, mode: str = "native") -> RunContext:
    profile = Profile(
        name="t",
        price_sheet="t",
        tiers={t: ModelSpec(model=model, price="p", action_mode=mode) for t in TIERS},
    )
    return run_context(
        tmp_path,
        "harness",
        profile,
        SHEET,
        gateway_context={"task_path": ..., "workspace": ..., "test_command": ...},
        limits=Limits(max_steps=8),
        options=options,
    )


def run_harness(tmp_path, initializer, coder, options=None, mode="native"):
    model = scripted.register(policy(initializer, coder))
    ctx = make_ctx(tmp_path, model, {"verify_tests": False, **(options or {})}, mode)
    result = harness.run(ctx)
    return result, ctx, model


def events(ctx: RunContext) -> list[dict[str, Any]]:
    return read_jsonl(ctx.recorder.run_dir / "events.jsonl")


def git(ws: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=ws, capture_output=True, text=True, check=True
    ).stdout


# --------------------------------------------------------------------------- stopping


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["native", "json", "text"])
def test_stops_at_all_pass_one_feature_per_session(tmp_path, mode):
    options = {"verify_tests": mode == "native"}  # the kit's own test run costs ~2 s a session
    result, ctx, _ = run_harness(tmp_path, good_initializer(3), flip_one_coder, options, mode=mode)
    c = result.counters
    assert result.outcome == "done" and result.claimed_done
    assert c["sessions"] == 3 and c["stop_reason"] == result.stop_reason == "all-pass"
    assert c["features_total"] == 3 and c["features_passing"] == 3
    assert c["features_passing_history"] == [0, 1, 2, 3]
    assert [h["flipped_to_pass"] for h in c["session_history"]] == [["F1"], ["F2"], ["F3"]]
    assert c["commits"] == 4 and c["kit_commits"] == 0  # initializer + one per session, all by the agents
    assert c["initializer"]["committed_by_agent"] is True and c["initializer"]["attempts"] == 1
    assert c["feature_list_rejections"] == 0 and c["regressions_found"] == 0
    ws = ctx.workspace.root
    assert all(f["passes"] for f in listing(ws))
    assert git(ws, "status", "--porcelain") == ""
    assert len(git(ws, "log", "--oneline").splitlines()) == 1 + 4  # base + the agents' commits
    assert (ws / harness.PROGRESS).read_text().count("- session ") == 3
    checks = [e for e in events(ctx) if e["kind"] == "gate" and e["name"] == "tests"]
    if mode == "native":  # the kit re-ran the task's tests after every session
        assert [e["ok"] for e in checks] == [True, True, True]
        assert [h["tests_ok"] for h in c["session_history"]] == [True, True, True]
    else:
        assert checks == [] and c["session_history"][0]["tests_ok"] is None


def test_a_spent_run_budget_ends_the_run_as_budget(tmp_path):
    """The same run budget as every other strategy: once it is spent, the outcome says so."""
    model = scripted.register(policy(good_initializer(2), idle_coder))
    ctx = make_ctx(tmp_path, model, {"verify_tests": False, "max_sessions": 5, "max_steps_per_session": 2})
    ctx.budget = Budget(ctx.recorder, max_model_calls=4)
    result = harness.run(ctx)
    assert result.outcome == "budget" and not result.claimed_done
    assert result.counters["stop_reason"] == "budget"
    assert ctx.recorder.calls == 4


def test_stops_at_the_session_cap(tmp_path):
    options = {"max_sessions": 3, "max_steps_per_session": 2}
    result, ctx, _ = run_harness(tmp_path, good_initializer(2), idle_coder, options)
    c = result.counters
    assert result.outcome == "capped" and not result.claimed_done
    assert c["sessions"] == 3 and c["stop_reason"] == "session-cap"
    assert c["features_passing_history"] == [0, 0, 0, 0]
    assert c["params"]["max_sessions"] == 3 and c["params"]["max_steps_per_session"] == 2
    assert c["params"]["max_sessions"] == 3 and c["params"]["coder_tier"] == "cheap"
    calls = read_jsonl(ctx.recorder.run_dir / "calls.jsonl")
    assert sorted({r["conversation"] for r in calls if r["role"] == "coder"}) == [
        "coder#1",
        "coder#2",
        "coder#3",
    ]


def test_per_session_step_cap(tmp_path):
    def busy(k: int, step: int, ws: Path) -> Action:
        return ("list_files", {"path": "."})

    result, ctx, _ = run_harness(
        tmp_path, good_initializer(1), busy, {"max_sessions": 2, "max_steps_per_session": 3}
    )
    assert [h["steps"] for h in result.counters["session_history"]] == [3, 3]
    assert [h["outcome"] for h in result.counters["session_history"]] == ["capped", "capped"]
    calls = read_jsonl(ctx.recorder.run_dir / "calls.jsonl")
    assert sum(r["role"] == "coder" for r in calls) == 6


# --------------------------------------------------------------------------- fresh context


def test_each_coder_session_starts_from_a_fresh_conversation(tmp_path):
    result, ctx, model = run_harness(tmp_path, good_initializer(3), flip_one_coder)
    assert result.counters["sessions"] == 3
    rows = read_jsonl(ctx.recorder.run_dir / "transcript.jsonl")
    order = list(dict.fromkeys(r["conversation"] for r in rows))
    assert order == ["initializer", "coder#1", "coder#2", "coder#3"]
    coder_prompt = ctx.prompts.get(
        "system", feature_list=harness.FEATURE_LIST, init_sh=harness.INIT_SH, progress=harness.PROGRESS
    ).strip()
    by_conv = {c: [r["message"] for r in rows if r["conversation"] == c] for c in order}
    for k in (1, 2, 3):
        msgs = by_conv[f"coder#{k}"]
        assert msgs[0]["role"] == "system" and msgs[0]["content"].startswith(coder_prompt)
        assert msgs[1]["role"] == "user" and f"coding session {k} of at most 12" in msgs[1]["content"]
        assert f"{k - 1} of 3 features pass" in msgs[1]["content"]
    for k in (1, 2):
        earlier = [json.dumps(m, sort_keys=True) for m in by_conv[f"coder#{k}"][1:]]
        later = {json.dumps(m, sort_keys=True) for m in by_conv[f"coder#{k + 1}"]}
        assert earlier and not any(m in later for m in earlier)
    # what the model was actually sent: the first call of every session carries system + start only
    requests = scripted.get_script(model).requests
    for k in (1, 2, 3):
        first = next(r for r in requests if r.context["conversation"] == f"coder#{k}")
        assert [m["role"] for m in first.messages] == ["system", "user"]
        assert f"session {k} of" in first.messages[1]["content"]
        assert not any("coder#" in str(m.get("content")) for m in first.messages)


def test_initializer_and_coder_share_one_system_prompt_and_tool_set(tmp_path):
    """The source: "the system prompt, the set of tools and the harness are otherwise identical" -- the
    two sessions differ only in their first user message (issue 21, item 7)."""
    result, ctx, model = run_harness(tmp_path, good_initializer(2), flip_one_coder)
    assert result.outcome == "done"
    requests = scripted.get_script(model).requests
    firsts = {}
    for r in requests:
        firsts.setdefault(r.context["conversation"], r)
    init, coder1, coder2 = firsts["initializer"], firsts["coder#1"], firsts["coder#2"]
    assert init.messages[0]["role"] == coder1.messages[0]["role"] == "system"
    assert init.messages[0]["content"] == coder1.messages[0]["content"] == coder2.messages[0]["content"]
    assert init.tools and init.tools == coder1.tools == coder2.tools
    # the first user message is what differs: the initializer's carries the task and its own job
    assert init.messages[1]["content"] != coder1.messages[1]["content"]
    assert "you are the initializer" in init.messages[1]["content"]
    assert ctx.task.prompt.strip()[:60] in init.messages[1]["content"]
    assert "coding session 1 of at most 12" in coder1.messages[1]["content"]
    assert "initializer" not in init.messages[0]["content"].lower()


# --------------------------------------------------------------------------- the feature list is guarded


def test_guard_refuses_feature_list_edits_through_file_tools(tmp_path):
    def tamperer(k: int, step: int, ws: Path) -> Action:
        data = features(2)  # what the initializer wrote
        if step == 0:  # a new description (plus a flag): refused as a whole
            bad = [{**data[0], "description": "something easier", "passes": True}, *data[1:]]
            return ("write_file", {"path": harness.FEATURE_LIST, "content": json.dumps(bad, indent=2)})
        if step == 1:
            return ("edit_file", {"path": f"./{harness.FEATURE_LIST}", "old": '"feature 2"', "new": '"easy"'})
        if step == 2:
            return ("delete_file", {"path": harness.FEATURE_LIST})
        if step == 3:  # the legit change goes through
            flipped = [{**data[0], "passes": True}, *data[1:]]
            return ("write_file", {"path": harness.FEATURE_LIST, "content": json.dumps(flipped, indent=2)})
        return FINISHED

    result, ctx, _ = run_harness(tmp_path, good_initializer(2), tamperer, {"max_sessions": 1})
    c = result.counters
    assert c["feature_list_guard_refusals"] == 3 and c["feature_list_reverts"] == 0
    assert c["feature_list_rejections"] == 3
    assert c["session_history"][0]["guard_refusals"] == 3
    denied = [e for e in events(ctx) if e["kind"] == "denied"]
    assert [e["name"] for e in denied] == ["write_file", "edit_file", "delete_file"]
    assert "F1: description changed" in denied[0]["detail"]
    assert "F2: description changed" in denied[1]["detail"]
    data = listing(ctx.workspace.root)
    assert [f["description"] for f in data] == ["feature 1", "feature 2"]
    assert [f["passes"] for f in data] == [True, False]
    assert c["features_passing_history"] == [0, 1] and result.outcome == "capped"


SHELL_TAMPERING = {
    "description": (
        "import json; p='feature_list.json'; d=json.load(open(p)); d[1]['description']='trivial'; "
        "d[0]['passes']=True; json.dump(d, open(p, 'w'))",
        [True, False],
    ),
    "added-feature": (
        "import json; p='feature_list.json'; d=json.load(open(p)); d[0]['passes']=True; "
        "d.append(dict(id='F9', category='x', description='extra', steps=[], passes=True)); "
        "json.dump(d, open(p, 'w'))",
        [True, False],
    ),
    "deleted": ("import os; os.remove('feature_list.json')", [False, False]),
}


@pytest.mark.parametrize("case", sorted(SHELL_TAMPERING))
def test_shell_rewrite_of_the_feature_list_is_reverted_after_the_session(tmp_path, case):
    script, expected_passes = SHELL_TAMPERING[case]

    def shell_tamperer(k: int, step: int, ws: Path) -> Action:
        if step == 0:
            return ("run", {"command": f'python -c "{script}"'})
        if step == 1:
            return ("run", {"command": f"{COMMIT} tamper"})
        return FINISHED

    result, ctx, _ = run_harness(tmp_path, good_initializer(2), shell_tamperer, {"max_sessions": 1})
    c = result.counters
    assert c["feature_list_reverts"] == 1 and c["feature_list_rejections"] == 1
    assert c["feature_list_guard_refusals"] == 0
    ws = ctx.workspace.root
    data = listing(ws)
    assert [f["id"] for f in data] == ["F1", "F2"]
    assert [f["description"] for f in data] == ["feature 1", "feature 2"]  # restored
    assert [f["passes"] for f in data] == expected_passes  # the legit flip is kept
    assert c["session_history"][0]["reverted"] is True
    assert c["features_passing"] == sum(expected_passes)
    gates = [e for e in events(ctx) if e["kind"] == "gate" and e["name"] == "feature_list" and not e["ok"]]
    assert len(gates) == 1 and "session 1: reverted" in gates[0]["detail"]
    # the agent's commit holds the tampered file; the kit commits the restored one on top
    assert c["commits"] == 2 and c["kit_commits"] == 1
    assert git(ws, "status", "--porcelain") == ""
    assert json.loads(git(ws, "show", f"HEAD:{harness.FEATURE_LIST}")) == data


def test_regression_is_counted(tmp_path):
    def regress(k: int, step: int, ws: Path) -> Action:
        if k == 1:
            return flip_one_coder(k, step, ws)
        data = listing(ws)
        if step == 0:  # re-verification failed: F1 back to false (a legit passes change)
            back = [{**f, "passes": False} for f in data]
            return ("write_file", {"path": harness.FEATURE_LIST, "content": json.dumps(back, indent=2)})
        return FINISHED

    result, _, _ = run_harness(tmp_path, good_initializer(2), regress, {"max_sessions": 2})
    c = result.counters
    assert c["regressions_found"] == 1 and c["feature_list_rejections"] == 0
    assert c["features_passing_history"] == [0, 1, 0]
    assert c["session_history"][1]["regressed"] == ["F1"]
    assert c["session_history"][1]["kit_commit"] is True  # the coder did not commit; the kit did


# --------------------------------------------------------------------------- the initializer


def test_invalid_feature_list_gets_a_bounded_retry_then_incomplete(tmp_path):
    def broken(step: int, ws: Path) -> Action:
        if step % 2 == 0:
            return (
                "write_file",
                {"path": harness.FEATURE_LIST, "content": '[{"id": "F1", "passes": false}]'},
            )
        return FINISHED

    result, ctx, model = run_harness(tmp_path, broken, flip_one_coder, {"initializer_retries": 2})
    c = result.counters
    # no cap was reached: the initializer's retries ran out without a valid list (issue 21, item 2)
    assert result.outcome == "incomplete" and not result.claimed_done
    assert c["stop_reason"] == result.stop_reason == "no-valid-feature-list" and c["sessions"] == 0
    assert c["initializer"]["attempts"] == 3 and c["initializer"]["valid"] is False
    assert "does not match the feature schema" in result.summary
    calls = read_jsonl(ctx.recorder.run_dir / "calls.jsonl")
    assert {r["role"] for r in calls} == {"initializer"}
    retries = [
        m for m in scripted.get_script(model).requests[-1].messages if "found problems" in str(m["content"])
    ]
    assert len(retries) == 2 and "init.sh does not exist" in retries[0]["content"]
    gates = [e for e in events(ctx) if e["kind"] == "gate" and e["name"] == "feature_list"]
    assert [e["ok"] for e in gates] == [False, False, False]


def test_initializer_retry_recovers_and_the_kit_commits_for_it(tmp_path):
    def late(step: int, ws: Path) -> Action:
        if step == 0:  # passes must start false
            bad = [{**f, "passes": True} for f in features(2)]
            return ("write_file", {"path": harness.FEATURE_LIST, "content": json.dumps(bad)})
        if step == 2:
            return ("write_file", {"path": harness.FEATURE_LIST, "content": json.dumps(features(2))})
        return FINISHED  # never writes init.sh / the progress file, never commits

    result, ctx, model = run_harness(
        tmp_path, late, idle_coder, {"max_sessions": 1, "initializer_retries": 1}
    )
    init = result.counters["initializer"]
    assert init["attempts"] == 2 and init["valid"] is True
    assert init["committed_by_agent"] is False and init["kit_wrote"] == [harness.INIT_SH, harness.PROGRESS]
    assert result.counters["kit_commits"] == 1 and result.counters["commits"] == 0
    first_retry = scripted.get_script(model).requests[2].messages[-1]["content"]
    assert '"passes": false' in first_retry
    ws = ctx.workspace.root
    assert "kit commit after initializer" in git(ws, "log", "--oneline")
    assert (ws / harness.INIT_SH).read_text().endswith("python -m pytest -q\n")
    assert result.outcome == "capped" and result.counters["features_total"] == 2


# --------------------------------------------------------------------------- through the runner


def test_run_json_records_the_harness_counters(tmp_path):
    model = scripted.register(policy(good_initializer(2), flip_one_coder))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "prices").mkdir()
    (tmp_path / "prices" / "t.yaml").write_text(yaml.safe_dump(SHEET.model_dump(mode="json")))
    profile = {"name": "h", "price_sheet": "t", "tiers": {t: {"model": model, "price": "p"} for t in TIERS}}
    (tmp_path / "profiles" / "h.yaml").write_text(yaml.safe_dump(profile))
    experiment = Experiment(
        name="harness-test",
        tasks=["micro-slugify"],
        strategies=["harness"],
        profile=str(tmp_path / "profiles" / "h.yaml"),
        strategy_options={"harness": {"max_sessions": 5, "verify_tests": False}},
    )
    out = run_experiment(experiment, results_dir=tmp_path / "results", progress=False)
    record = load_run(out / "runs" / "micro-slugify__harness__h__r1")
    assert record is not None and record.error is None
    assert (record.outcome, record.stop_reason) == ("done", "all-pass") and record.claimed_done
    c = record.counters
    assert c["sessions"] == 2 and c["features_total"] == 2 and c["features_passing"] == 2
    assert c["features_passing_history"] == [0, 1, 2] and c["commits"] == 3
    assert c["params"]["max_sessions"] == 5 and c["params"]["verify_tests"] is False
    assert c["feature_list_rejections"] == 0 and c["permission_denials"] == 0
    assert record.calls == sum(1 for _ in read_jsonl(out / "runs" / record.run_id / "calls.jsonl"))
    assert record.score is not None and record.score.claimed_done_but_failed  # features pass, slugify doesn't
