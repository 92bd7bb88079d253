"""The fake Anthropic server a new user tries the kit with (README, 'Trying it without a key'): each
request answered for the right task and role, so its pdca runs do the task they were given."""

from __future__ import annotations

from kit.prompts import PromptBook
from tests.support.fake_providers import WireRequest
from tests.support.fake_server import Responder


def _request(system: str, user: str) -> WireRequest:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return WireRequest("anthropic", "claude-haiku-4-5", messages, None, None, {})


def test_the_task_is_found_in_briefs_that_quote_no_prompt():
    fake = Responder()
    ids = [t.id for t in fake.tasks]
    assert ids[0] != "micro-slugify"  # the fallback would be the wrong task
    book = PromptBook("pdca")
    slugify = next(t for t in fake.tasks if t.id == "micro-slugify")
    turn = _request(book.get("orchestrator"), f"Goal:\n{slugify.prompt}")
    turn.messages += [{"role": "assistant", "content": "Brief 1: ..."},
                      {"role": "user", "content": 'Hand-off to the executor: implement unit U1.\n{"unit": "U1"}'}]  # fmt: skip
    brief = fake(turn)["content"]
    executor = _request(book.get("executor"), brief)  # pdca's executor: the orchestrator's brief, no prompt
    assert "textkit" not in brief and fake._task(executor).id == "micro-slugify"
    named = 'Hand-off to the scout.\n{"pointer": "textkit.py:9"}'
    assert fake._task(_request(book.get("scout"), named)).id == "micro-slugify"  # a file it names
    update = "Event: enter\nAppend to csv-export-stream-1.md:\n\n- task: csv-export-stream\n"
    assert fake._task(_request("x", update)).id == "csv-export-stream"  # a status update: the task named
    prompt = next(t for t in fake.tasks if t.id == "table-computed-columns").prompt
    assert fake._task(_request("x", prompt)).id == "table-computed-columns"  # the prompt quoted
    assert fake._task(_request("x", "nothing to go by")).id == ids[0]


def test_pdca_status_updates_are_answered_by_the_cast():
    fake = Responder()
    writer = PromptBook("pdca").get("status_writer")
    asked = "2026-12-03T13:52:06.739Z | PLAN | r1 | n1/3 | scout report | 1 facts\n"
    reply = fake(_request(writer, f"Event: scout report\nAppend to micro-slugify-1.md:\n\n{asked}"))
    assert reply["content"] == asked  # the text asked for, as the status writer's prompt wants


def test_a_brief_is_traced_to_its_run_in_blocks_and_after_another_task_wrote_the_same():
    """issue 41: over the wire the newest message carries its cache breakpoint as a content-block list,
    and a brief one run wrote can be word for word another's (the same test command): the executor must
    still get its own task's solution."""
    fake = Responder()
    book = PromptBook("pdca")
    handoff = (
        'Hand-off to the executor: implement unit U1.\n{"criteria": ["C1"], "command": "python -m pytest -q"}'
    )
    for task in ("bugfix-date-range", "micro-slugify"):  # the second run is the one in flight
        prompt = next(t for t in fake.tasks if t.id == task).prompt
        fake(_request(book.get("orchestrator"), f"Goal:\n{prompt}"))  # a new run of this task
        turn = _request(book.get("orchestrator"), f"Goal:\n{prompt}")
        turn.messages += [
            {"role": "assistant", "content": "Brief 1: ..."},
            {"role": "user", "content": handoff},
        ]
        brief = fake(turn)["content"]
    blocks = [{"type": "text", "text": brief, "cache_control": {"type": "ephemeral"}}]
    executor = _request(book.get("executor"), "")
    executor.messages[-1] = {"role": "user", "content": blocks}
    assert fake._task(executor).id == "micro-slugify"
    assert fake._who(executor) == ("pdca", "executor")
