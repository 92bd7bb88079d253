"""The workflow runtime: agent, parallel, pipeline, caps, and the journal that lets a run resume."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from pydantic import BaseModel

from kit.errors import BudgetExceeded, CallCapReached
from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.records.schema import read_jsonl
from kit.strategies.workflow import runtime as workflow_runtime
from kit.strategies.workflow.runtime import ProviderFailure, Runtime, default_concurrency
from tests.support.workflow import make_ctx


class Answer(BaseModel):
    value: int


class Policy:
    """Answers by role; counts requests per role and per conversation (thread-safe)."""

    def __init__(self, **handlers):
        self.handlers = handlers
        self.counts: Counter = Counter()
        self.conversations: Counter = Counter()
        self._lock = threading.Lock()

    def __call__(self, request):
        role = request.context["role"]
        with self._lock:
            self.counts[role] += 1
            self.conversations[request.context["conversation"]] += 1
        return self.handlers[role](request)


def mode(request):
    return request.context.get("action_mode") or "native"


def finish(value=None, summary="Done."):
    def reply(request):
        args = {"value": value} if value is not None else {"summary": summary}
        return render(mode(request), FINISH, args, "Done.")

    return reply


def runtime(tmp_path, policy, journal=True, name="run", **kwargs):
    ctx = make_ctx(
        tmp_path, scripted.register(policy, name="rt-model"), journal_dir=tmp_path / "journals" if journal else None,
        name=name,
    )  # fmt: skip
    return Runtime(ctx, **kwargs), ctx


# --------------------------------------------------------------------------- agent


def test_agent_returns_text_or_a_validated_object_in_fresh_conversations(tmp_path):
    policy = Policy(writer=finish(summary="all good"), judge=finish(value=7))
    rt, ctx = runtime(tmp_path, policy)
    assert rt.agent("say it", role="writer", tier="cheap") == "all good"
    answer = rt.agent("judge it", Answer, role="judge", tier="medium", permissions={"read"})
    assert answer == Answer(value=7)
    assert set(policy.conversations) == {"writer#1", "judge#2"}
    assert rt.counters()["agent_calls"] == 2 and rt.counters()["model_agent_calls"] == 2


def test_invalid_output_is_retried_in_the_same_conversation(tmp_path):
    def judge(request):
        if request.index < 3:  # three format errors: the agent gives up, the runtime asks again
            return {"content": "no idea"}
        return render(mode(request), FINISH, {"value": 3}, "Here.")

    policy = Policy(judge=judge)
    rt, _ = runtime(tmp_path, policy)
    assert rt.agent("judge", Answer, role="judge", tier="cheap", permissions={"read"}) == Answer(value=3)
    assert policy.counts["judge"] == 4 and list(policy.conversations) == ["judge#1"]
    assert rt.calls == 1 and rt.failed_calls == 0


def test_agent_is_none_after_bounded_retries_or_an_exception(tmp_path, monkeypatch):
    policy = Policy(judge=lambda r: {"content": "no idea"})
    rt, _ = runtime(tmp_path, policy, format_retries=1, retry_steps=2)
    assert rt.agent("judge", Answer, role="judge", tier="cheap", permissions={"read"}) is None
    assert policy.counts["judge"] == 3 + 2  # 3 format errors, then 1 retry of 2 steps

    def broken_tool_layer(*args, **kwargs):
        raise RuntimeError("not a provider problem")

    monkeypatch.setattr(rt, "_run_agent", broken_tool_layer)
    assert rt.agent("x", role="broken", tier="cheap") is None
    assert rt.failed_calls == 2 and rt.provider_failures == 0
    # the exception was not journaled (it is redone on resume); the format failure was
    assert [e["role"] for e in read_jsonl(rt.journal.path)] == ["judge"]


def test_a_provider_failure_is_a_stop_not_a_none(tmp_path):
    def down(request):
        raise ValueError("provider down")

    policy = Policy(broken=down, writer=finish())
    rt, ctx = runtime(tmp_path, policy)
    with pytest.raises(ProviderFailure, match="failed for provider reasons") as info:
        rt.parallel(
            [
                lambda: rt.agent("x", role="broken", tier="cheap"),
                lambda: rt.agent("y", role="writer", tier="cheap"),
            ]
        )
    assert "--retry-errors" in str(info.value)
    assert policy.counts["writer"] == 1  # the sibling finished first
    assert rt.provider_failures == 1 and [e["role"] for e in read_jsonl(rt.journal.path)] == ["writer"]


def test_the_agent_call_cap_is_a_clear_error(tmp_path):
    rt, _ = runtime(tmp_path, Policy(writer=finish()), max_calls=2)
    rt.phase("write")
    rt.agent("a", role="writer", tier="cheap")
    rt.agent("b", role="writer", tier="cheap")
    with pytest.raises(CallCapReached) as info:
        rt.agent("c", role="writer", tier="cheap")
    assert "cap of 2 agent calls" in str(info.value) and "'write'" in str(info.value)
    assert "max_agent_calls" in str(info.value)  # how to raise it


def test_the_output_budget_stops_before_the_next_agent(tmp_path):
    policy = Policy(writer=finish(summary="x" * 400))
    rt, _ = runtime(tmp_path, policy, max_output_tokens=50)
    rt.agent("a", role="writer", tier="cheap")
    assert rt.output_tokens >= 50
    with pytest.raises(BudgetExceeded, match="output-token budget of 50"):
        rt.agent("b", role="writer", tier="cheap")
    assert policy.counts["writer"] == 1


def test_phase_and_log_are_events(tmp_path):
    rt, ctx = runtime(tmp_path, Policy())
    rt.phase("analyze", "cycle 1")
    rt.log("3 findings")
    events = read_jsonl(ctx.recorder.run_dir / "events.jsonl")
    assert [(e["kind"], e["name"], e["detail"]) for e in events] == [
        ("phase", "analyze", "cycle 1"),
        ("note", "log", "3 findings"),
    ]


# --------------------------------------------------------------------------- parallel / pipeline


def test_default_concurrency(monkeypatch):
    for cores, expected in [(1, 2), (2, 2), (4, 2), (8, 6), (64, 16)]:
        monkeypatch.setattr(workflow_runtime.os, "cpu_count", lambda c=cores: c)
        assert default_concurrency() == expected


def test_parallel_keeps_order_bounds_concurrency_and_turns_failures_into_none(tmp_path):
    rt, _ = runtime(tmp_path, Policy(), concurrency=2)
    lock, running, peak = threading.Lock(), [0], [0]

    def thunk(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        if i == 3:
            raise RuntimeError("thunk 3 broke")
        return i * 10

    results = rt.parallel([lambda i=i: thunk(i) for i in range(6)])
    assert results == [0, 10, 20, None, 40, 50]
    assert peak[0] == 2


def test_parallel_waits_for_all_then_raises_a_stop(tmp_path):
    rt, _ = runtime(tmp_path, Policy(), concurrency=4)
    finished = []

    def slow():
        time.sleep(0.1)
        finished.append("slow")
        return 1

    def capped():
        raise CallCapReached("cap")

    with pytest.raises(CallCapReached):
        rt.parallel([capped, slow])
    assert finished == ["slow"]


def test_parallel_agents_with_one_failing(tmp_path):
    def judge(request):
        if "seat 2" in request.messages[1]["content"]:
            return {"content": "garbage"}
        return render(mode(request), FINISH, {"value": 1}, "ok")

    rt, _ = runtime(tmp_path, Policy(judge=judge))
    results = rt.parallel(
        [
            lambda s=s: rt.agent(f"seat {s}", Answer, role="judge", tier="cheap", permissions={"read"})
            for s in (1, 2, 3)
        ]
    )
    assert results == [Answer(value=1), None, Answer(value=1)]
    assert rt.failed_calls == 1 and rt.calls == 3


def test_pipeline_has_no_barrier_between_items(tmp_path):
    """Item B's first stage waits until item A has finished its LAST stage: a barrier after stage 1
    would deadlock (B's wait times out and the test fails)."""
    rt, _ = runtime(tmp_path, Policy(), concurrency=2)
    log, lock, a_done = [], threading.Lock(), threading.Event()

    def note(entry):
        with lock:
            log.append(entry)

    def stage1(item):
        if item == "B" and not a_done.wait(timeout=5):
            return "B-timed-out"
        note(("s1", item))
        return item

    def stage2(item):
        note(("s2", item))
        return item

    def stage3(item):
        note(("s3", item))
        if item == "A":
            a_done.set()
        return item + "!"

    assert rt.pipeline(["A", "B"], stage1, stage2, stage3) == ["A!", "B!"]
    assert log.index(("s3", "A")) < log.index(("s1", "B"))


def test_a_failing_stage_ends_only_its_item(tmp_path):
    rt, _ = runtime(tmp_path, Policy())
    reached = []

    def first(x):
        if x == 2:
            raise ValueError("bad item")
        return None if x == 3 else x

    def second(x):
        reached.append(x)
        return x * 2

    assert rt.pipeline([1, 2, 3, 4], first, second) == [2, None, None, 8]
    assert sorted(reached) == [1, 4]


# --------------------------------------------------------------------------- the journal


def test_identical_calls_are_journaled_separately_and_replayed_in_order(tmp_path):
    answers = iter([1, 2, 3])
    lock = threading.Lock()

    def judge(request):
        with lock:
            value = next(answers)
        return render(mode(request), FINISH, {"value": value}, "ok")

    first = Policy(judge=judge)
    rt, _ = runtime(tmp_path, first)
    got = [
        rt.agent("same prompt", Answer, role="judge", tier="cheap", permissions={"read"}).value
        for _ in range(3)
    ]
    assert got == [1, 2, 3]
    keys = [e["key"] for e in read_jsonl(rt.journal.path)]
    assert len(set(keys)) == 3  # each chains on the one before it

    second = Policy(judge=lambda r: pytest.fail("a journaled call reached the model"))
    rt2, _ = runtime(tmp_path, second, name="rerun")
    replayed = [
        rt2.agent("same prompt", Answer, role="judge", tier="cheap", permissions={"read"}) for _ in range(3)
    ]
    assert [a.value for a in replayed] == [1, 2, 3]
    assert second.counts.total() == 0 and rt2.journal_hits == 3
    # a fourth identical call is new: it goes to the model
    third = Policy(judge=finish(value=4))
    scripted.register(third, name="rt-model")
    assert rt2.agent("same prompt", Answer, role="judge", tier="cheap", permissions={"read"}).value == 4
    assert third.counts["judge"] == 1 and rt2.counters()["model_agent_calls"] == 1


def test_the_key_covers_parent_prompt_schema_model_and_role(tmp_path):
    k = workflow_runtime.journal_key
    base = k("h", "sys", "p", Answer, "m", "judge")
    assert base == k("h", "sys", "p", Answer, "m", "judge")
    assert len({base, k("h", "sys", "q", Answer, "m", "judge"), k("h", "sys", "p", None, "m", "judge"),
                k("h", "sys", "p", Answer, "m2", "judge"), k("h", "sys", "p", Answer, "m", "editor"),
                k("h", "other", "p", Answer, "m", "judge"), k("h2", "sys", "p", Answer, "m", "judge")}) == 7  # fmt: skip


def _sequence(rt, prompts, fan_out):
    """a -> parallel(fan_out) -> z: the shape of a workflow cycle."""
    out = [rt.agent(prompts[0], Answer, role="judge", tier="cheap", permissions={"read"}).value]
    results = rt.parallel(
        [lambda p=p: rt.agent(p, Answer, role="judge", tier="cheap", permissions={"read"}) for p in fan_out]
    )
    out += [r.value for r in results]
    out.append(rt.agent(prompts[1], Answer, role="judge", tier="cheap", permissions={"read"}).value)
    return out


def test_a_change_replays_only_the_unchanged_prefix(tmp_path):
    lock = threading.Lock()
    counter = iter(range(1, 1000))

    def judge(request):
        with lock:
            value = next(counter)
        return render(mode(request), FINISH, {"value": value}, "ok")

    first = Policy(judge=judge)
    rt, _ = runtime(tmp_path, first)
    _sequence(rt, ["a", "z"], ["p1", "p2", "p3"])
    assert first.counts["judge"] == 5

    # the same script with the second parallel sibling's prompt edited: a, p1 and p3 replay (siblings
    # do not chain on each other); p2' runs, and z runs again because it comes after the group
    second = Policy(judge=judge)
    scripted.register(second, name="rt-model")
    rt2, _ = runtime(tmp_path, second, name="edited")
    _sequence(rt2, ["a", "z"], ["p1", "p2 edited", "p3"])
    assert rt2.journal_hits == 3 and second.counts["judge"] == 2

    # the first agent edited: nothing after it is replayed, although the later prompts are unchanged
    third = Policy(judge=judge)
    scripted.register(third, name="rt-model")
    rt3, _ = runtime(tmp_path, third, name="edited-first")
    _sequence(rt3, ["a edited", "z"], ["p1", "p2", "p3"])
    assert rt3.journal_hits == 0 and third.counts["judge"] == 5

    # nothing changed: all five replay
    fourth = Policy(judge=judge)
    scripted.register(fourth, name="rt-model")
    rt4, _ = runtime(tmp_path, fourth, name="unchanged")
    _sequence(rt4, ["a", "z"], ["p1", "p2", "p3"])
    assert rt4.journal_hits == 5 and fourth.counts["judge"] == 0


def test_replayed_calls_keep_their_records_and_count_in_the_budget(tmp_path):
    policy = Policy(writer=finish(summary="x" * 40))
    rt, ctx = runtime(tmp_path, policy)
    rt.agent("a", role="writer", tier="cheap")
    rt.agent("b", role="writer", tier="cheap")
    spent = ctx.recorder.totals

    rt2, ctx2 = runtime(
        tmp_path, Policy(writer=lambda r: pytest.fail("replay called the model")), name="rerun"
    )
    ctx2.budget.max_model_calls = 3
    rt2.agent("a", role="writer", tier="cheap")
    rt2.agent("b", role="writer", tier="cheap")
    assert ctx2.recorder.totals == spent and ctx2.recorder.calls == 2
    rows = read_jsonl(ctx2.recorder.run_dir / "calls.jsonl")
    assert [r["replayed"] for r in rows] == [True, True]
    assert [r["conversation"] for r in rows] == ["writer#1", "writer#2"] and rows[0]["run_id"] == "r1"
    assert ctx2.budget.model_calls == 2 and ctx2.recorder.model_s == 0  # the time was spent earlier
    # one model call left in the budget: the third agent makes it, the fourth is stopped
    scripted.register(Policy(writer=finish()), name="rt-model")
    rt2.agent("c", role="writer", tier="cheap")
    with pytest.raises(BudgetExceeded, match="3 model calls"):
        rt2.agent("d", role="writer", tier="cheap")


def test_replayed_write_calls_restore_the_clone(tmp_path):
    def editor(request):
        step = sum(m["role"] == "assistant" for m in request.messages)
        prompt = request.messages[1]["content"]
        if step == 0 and prompt == "create":
            return render(mode(request), "write_file", {"path": "notes/a.txt", "content": "one\n"}, "w")
        if step == 0 and prompt == "change":
            return render(mode(request), "write_file", {"path": "notes/a.txt", "content": "two\n"}, "w")
        if step == 0 and prompt == "remove":
            return render(mode(request), "delete_file", {"path": "README.md"}, "rm")
        return render(mode(request), FINISH, {"summary": "ok"}, "Done.")

    rw = {"read", "write", "exec"}
    first = Policy(editor=editor)
    rt, ctx = runtime(tmp_path, first)
    for prompt in ("create", "change", "remove"):
        rt.agent(prompt, role="editor", tier="cheap", permissions=rw)
    assert (ctx.workspace.root / "notes" / "a.txt").read_text() == "two\n"
    assert not (ctx.workspace.root / "README.md").exists()
    diffs = [e["diff"] for e in read_jsonl(rt.journal.path)]
    assert all(diffs) and "notes/a.txt" in diffs[0]

    # a rerun of the interrupted run after "create" and "change": a fresh clone, replayed step by step
    rt2, ctx2 = runtime(
        tmp_path, Policy(editor=lambda r: pytest.fail("replay called the model")), name="rerun"
    )
    rt2.agent("create", role="editor", tier="cheap", permissions=rw)
    assert (ctx2.workspace.root / "notes" / "a.txt").read_text() == "one\n"
    rt2.agent("change", role="editor", tier="cheap", permissions=rw)
    assert (ctx2.workspace.root / "notes" / "a.txt").read_text() == "two\n"
    rt2.agent("remove", role="editor", tier="cheap", permissions=rw)
    assert not (ctx2.workspace.root / "README.md").exists()
    assert rt2.journal_hits == 3
    assert workflow_runtime.workspace_diff(ctx2.workspace) == workflow_runtime.workspace_diff(ctx.workspace)


def test_without_a_journal_dir_nothing_is_journaled(tmp_path):
    rt, _ = runtime(tmp_path, Policy(writer=finish()), journal=False)
    rt.agent("a", role="writer", tier="cheap")
    assert rt.journal is None and not (tmp_path / "journals").exists()
