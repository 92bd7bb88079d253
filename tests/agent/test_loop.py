"""The agent loop: action modes, format errors, denials, result schemas, budget, context fitting."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from kit.agent.budget import Budget
from kit.agent.loop import SHORTENED, Agent, AgentConfig
from kit.agent.toolbox import Toolbox
from kit.model import scripted
from kit.model.actions import FINISH, FormatError, parse_text_action, render
from kit.model.gateway import Gateway
from kit.records.recorder import RunRecorder
from kit.records.schema import read_jsonl
from kit.tasks.task import load_task
from kit.tasks.workspace import create_workspace
from tests.support.helpers import scripted_profile

ALL = {"read", "write", "exec"}


@pytest.fixture
def ws(tmp_path):
    return create_workspace(load_task("micro-slugify"), tmp_path / "repo")


def make_agent(tmp_path, ws, source, mode="native", permissions=ALL, role="coder", **config):
    model = scripted.register(source)
    profile, sheet = scripted_profile(model, mode)
    recorder = RunRecorder(tmp_path / "run", "r1")
    gateway = Gateway(profile, sheet, recorder)
    toolbox = Toolbox(ws.root, permissions, recorder=recorder, role=role)
    cfg = AgentConfig(role=role, tier="cheap", system_prompt="You code.", **config)
    return Agent(cfg, gateway, toolbox, recorder), recorder


@pytest.mark.parametrize("mode", ["native", "json", "text"])
def test_write_then_finish_in_every_mode(tmp_path, ws, mode):
    replies = [
        render(mode, "write_file", {"path": "notes/hello.txt", "content": "hi\n"}, "Write it."),
        render(mode, "read_file", {"path": "notes/hello.txt"}, "Check it."),
        render(mode, FINISH, {"summary": "Wrote hello."}, "Done."),
    ]
    agent, rec = make_agent(tmp_path, ws, replies, mode)
    res = agent.run("Write notes/hello.txt")
    assert res.outcome == "done" and res.steps == 3 and res.tool_calls == 2
    assert (ws.root / "notes" / "hello.txt").read_text() == "hi\n"
    events = [e for e in read_jsonl(rec.run_dir / "events.jsonl") if e["kind"] == "tool"]
    assert [e["name"] for e in events] == ["write_file", "read_file"]
    # the observation of the read reached the model
    last_request = scripted.get_script(agent.gateway.spec("cheap").model).requests[-1]
    assert "hi" in str(last_request.messages[-1]["content"])


def test_invalid_actions_are_corrected_then_too_many_in_a_row_end_the_agent(tmp_path, ws):
    replies = ["no block here", render("text", "run", {"command": "true"}), "still nothing", "nope", "nah"]
    agent, rec = make_agent(tmp_path, ws, replies, "text", max_format_errors=3)
    res = agent.run("Do it")
    assert res.outcome == "format_errors"
    assert res.format_errors == 4 and res.steps == 5  # the valid action in between reset the streak
    kinds = [e["kind"] for e in read_jsonl(rec.run_dir / "events.jsonl")]
    assert kinds.count("format_error") == 4
    # each invalid reply was answered with a short correction
    corrections = [m for m in agent.messages if m["role"] == "user" and "fenced block" in m["content"]]
    assert len(corrections) >= 2


def test_a_denied_tool_is_answered_and_counted(tmp_path, ws):
    replies = [
        render("native", "write_file", {"path": "x.py", "content": "x = 1\n"}),
        render("native", FINISH, {"summary": "gave up"}),
    ]
    agent, rec = make_agent(tmp_path, ws, replies, "native", permissions={"read"}, role="scout")
    res = agent.run("Try to write")
    assert res.outcome == "done"
    assert not (ws.root / "x.py").exists()
    denied = [e for e in read_jsonl(rec.run_dir / "events.jsonl") if e["kind"] == "denied"]
    assert len(denied) == 1 and denied[0]["role"] == "scout" and denied[0]["name"] == "write_file"
    assert rec.denials == 1
    tool_msg = next(m for m in agent.messages if m["role"] == "tool")
    assert "permission denied" in tool_msg["content"]


class Report(BaseModel):
    changed: list[str]
    done: bool


@pytest.mark.parametrize("mode", ["native", "json", "text"])
def test_result_schema_is_validated_and_a_bad_result_is_corrected(tmp_path, ws, mode):
    replies = [
        render(mode, FINISH, {"changed": "not a list", "done": True}),
        render(mode, FINISH, {"changed": ["a.py"], "done": True}),
    ]
    agent, _ = make_agent(tmp_path, ws, replies, mode, result_schema=Report)
    res = agent.run("Report")
    assert res.outcome == "done" and res.format_errors == 1
    assert res.result == Report(changed=["a.py"], done=True)


def test_a_role_without_tools_answers_with_the_schema_as_response_format(tmp_path, ws):
    agent, _ = make_agent(
        tmp_path, ws, [Report(changed=[], done=False)], "native", permissions=set(), result_schema=Report
    )
    res = agent.run("Judge")
    assert res.result == Report(changed=[], done=False)
    request = scripted.get_script(agent.gateway.spec("cheap").model).requests[0]
    assert request.tools is None and request.response_format["json_schema"]["name"] == "Report"


def test_the_step_cap_holds(tmp_path, ws):
    agent, _ = make_agent(tmp_path, ws, lambda req: render("native", "list_files", {}), "native")
    res = agent.run("Loop", max_steps=4)
    assert res.outcome == "capped" and res.steps == 4
    res = agent.run("Again", max_steps=2)  # same conversation, a new turn
    assert res.steps == 2
    assert [m["content"] for m in agent.messages if m["role"] == "user"] == ["Loop", "Again"]


def test_the_budget_stops_the_agent(tmp_path, ws):
    agent, rec = make_agent(tmp_path, ws, lambda req: render("native", "list_files", {}), "native")
    agent.budget = Budget(rec, max_usd=None, max_tokens=1)
    res = agent.run("Loop", max_steps=10)
    assert res.outcome == "budget" and res.steps == 1


def test_old_tool_outputs_are_shortened_but_the_prefix_stays_identical(tmp_path, ws):
    (ws.root / "big.txt").write_text("x" * 6000)
    agent, _ = make_agent(
        tmp_path, ws, lambda req: render("native", "read_file", {"path": "big.txt"}), "native"
    )
    agent.window_chars = 20_000
    agent.run("Read it many times", max_steps=8)
    prefix = agent.messages[:2]
    shortened = [m for m in agent.messages if SHORTENED in str(m.get("content"))]
    assert shortened, "old outputs should have been shortened"
    assert sum(len(str(m.get("content") or "")) for m in agent.messages) <= 20_000 + 7000
    requests = scripted.get_script(agent.gateway.spec("cheap").model).requests
    assert all(r.messages[:2] == prefix for r in requests)
    assert SHORTENED not in str(agent.messages[-1]["content"])  # the newest output is intact


def test_text_action_parsing():
    assert parse_text_action("```bash\nls -la\n```", ["run"]).args == {"command": "ls -la"}
    a = parse_text_action("Here:\n```python textkit.py\ndef f():\n    pass\n```", ["write_file"])
    assert a.tool == "write_file" and a.args["path"] == "textkit.py" and "def f" in a.args["content"]
    assert parse_text_action("All good.\nDONE", []).tool == FINISH
    # a python block without a path replaces the definitions it holds (small models write these)
    a = parse_text_action("```python\ndef slugify(t):\n    return t\n```", ["replace_definitions"])
    assert a.tool == "replace_definitions" and a.args["code"].startswith("def slugify")
    # a block cut off by the output-token cap still parses
    assert parse_text_action("```bash\nls", ["run"]).args == {"command": "ls"}
    with pytest.raises(FormatError):
        parse_text_action("```ruby\nputs 1\n```", ["write_file"])


def test_replace_definitions_edits_the_file_that_defines_the_name(tmp_path, ws):
    toolbox = Toolbox(ws.root, {"read", "write"}, role="coder")
    code = (
        "import re\n\n\ndef slugify(text):\n    return re.sub('[^a-z0-9]+', '-', text.lower()).strip('-')\n"
    )
    res = toolbox.execute("replace_definitions", {"code": code})
    assert res.ok, res.output
    source = (ws.root / "textkit.py").read_text()
    assert "import re" in source and "NotImplementedError" not in source
    assert "def word_count" in source  # the other definition is untouched
    import importlib.util

    spec = importlib.util.spec_from_file_location("textkit_under_test", ws.root / "textkit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.slugify("Hello World") == "hello-world" and module.word_count("a b") == 2
    missing = toolbox.execute("replace_definitions", {"code": "def nowhere():\n    pass\n"})
    assert not missing.ok and "no file" in missing.output
    broken = toolbox.execute("replace_definitions", {"code": "def f(:\n"})
    assert not broken.ok and "does not parse" in broken.output


def test_the_tool_log_carries_the_run_tools_exit_code(tmp_path, ws):
    replies = [
        render("native", "run", {"command": "exit 3"}),
        render("native", "read_file", {"path": "README.md"}),
        render("native", FINISH, {"summary": "ran it"}),
    ]
    agent, _ = make_agent(tmp_path, ws, replies)
    res = agent.run("Run it")
    run, read = res.tool_log
    assert (run.tool, run.exit_code, run.timed_out, run.ok) == ("run", 3, False, False)
    assert run.output.endswith("exit code: 3")  # the model's text is unchanged
    assert (read.tool, read.exit_code, read.timed_out) == ("read_file", None, False)


def test_the_loops_messages_come_from_kit_prompts_and_an_experiment_can_override_them(tmp_path, ws):
    """Every text the model sees lives in kit/prompts/ (here kit/prompts/agent/), so the prompt lab can
    vary it: prompt_overrides {"agent/<name>": text} replaces the format-error and observation notices."""
    from kit.paths import PROMPTS_DIR
    from kit.prompts import PromptBook

    assert "No action found" in (PROMPTS_DIR / "agent" / "text_no_action.md").read_text()
    overrides = {
        "agent/text_no_action": "One block, please ($$ stays).",
        "agent/observation": "Seen:\n$output",
        "agent/text_help_finish": "Say DONE when the tests pass.",
    }
    replies = ["no block here", render("text", "run", {"command": "echo hi"}), "DONE"]
    agent, _ = make_agent(tmp_path, ws, replies, "text", prompts=PromptBook("agent", overrides))
    assert agent.run("Do it").outcome == "done"
    assert agent.messages[0]["content"].endswith("\nSay DONE when the tests pass.")  # the system prompt
    said = [m["content"] for m in agent.messages if m["role"] == "user"][1:]
    assert said[0] == "One block, please ($ stays)." and said[1].startswith("Seen:\nhi")
