"""Nothing an agent sends crashes the kit: property tests (hypothesis) over tool calls and model replies.

Whatever a model answers -- malformed or deeply nested JSON, a lone surrogate, arguments of the wrong
type or out of range, odd paths, a tool that does not exist -- the agent loop turns it into a tool
error or a format error for the agent and goes on; no exception escapes ``Agent.run`` (which would end
the run as ``error`` and drop it from the means). ``error`` stays for provider and kit failures: a
model that never answers with anything (empty replies through every retry) is a provider failure.

The examples are derandomized (the same cases on every run); the ``@example`` rows are the inputs
that crashed the kit before this test existed.
"""

from __future__ import annotations

import itertools
import json
import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from kit.agent.loop import Agent, AgentConfig
from kit.agent.toolbox import TOOLS, Toolbox
from kit.errors import ModelError
from kit.model import scripted
from kit.model.actions import FINISH, MAX_JSON_DEPTH, load_json, render
from kit.model.gateway import Gateway
from kit.records.recorder import RunRecorder
from kit.records.schema import read_jsonl
from kit.tasks.task import load_task
from kit.tasks.workspace import create_workspace
from tests.support.helpers import scripted_profile

DEEP = "[" * 5000 + "]" * 5000  # json.loads answers this with RecursionError
PROPS = settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

ODD_STRINGS = st.sampled_from(
    [
        "",
        ".",
        "..",
        "/",
        "~",
        ".git/config",
        "a/../../x",
        "**/*",
        "[",
        "\udcff",
        "a\ud800b",
        "\x00",
        "x" * 5000,
    ]
)
LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    ODD_STRINGS,
)
KEYS = st.sampled_from(sorted({k for t in TOOLS.values() for k in t.parameters["properties"]} | {"x"}))
JSON = st.recursive(
    LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    ws = create_workspace(load_task("micro-slugify"), tmp_path_factory.mktemp("agent-input") / "repo")
    # a file name that is not UTF-8: listings and searches carry it back to the model
    os.makedirs(bytes(ws.root) + b"/d\xff", exist_ok=True)
    with open(bytes(ws.root) + b"/d\xff/\xfe.py", "wb") as fh:
        fh.write(b"x = '\xff'\n")
    return ws.root


def test_deep_json_is_a_value_error_not_a_recursion_error():
    with pytest.raises(ValueError, match="nested deeper"):
        load_json(DEEP)
    with pytest.raises(ValueError, match="nested deeper"):
        load_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))
    assert load_json('{"a": "\\ud800"}') == {"a": "?"}  # a lone surrogate becomes encodable


@pytest.mark.slow
@PROPS
@given(
    name=st.sampled_from([*sorted(TOOLS), "nope", ""]),
    args=st.one_of(st.dictionaries(KEYS, JSON, max_size=5), JSON),
)
@example(name="read_file", args={"path": "\udcff"})
@example(name="run", args={"command": "ls", "timeout_s": float("nan")})
@example(name="run", args={"command": "ls", "timeout_s": 10**400})  # OverflowError in float()
@example(name="read_file", args={"path": "src/slugify.py", "start_line": 10**400, "end_line": -(10**400)})
def test_no_tool_call_raises(clone, name, args):
    box = Toolbox(clone, {"read", "write", "exec"}, role="coder", timeout_s=5)
    if name == "run" and isinstance(args, dict):
        args = {**args, "command": "ls d*"}  # the arguments vary; the command stays harmless and quick
    result = box.execute(name, args)
    assert isinstance(result.output, str)
    assert "check the arguments" not in result.output, "only the safety net caught it: " + result.output
    result.output.encode("utf-8", "surrogateescape")  # the model can be sent it


class Verdict(BaseModel):
    verdict: str
    n: int = 0


TEXT_REPLY = st.one_of(
    st.text(max_size=200),
    st.builds(
        lambda lang, body: f"```{lang}\n{body}\n```",
        st.sampled_from(
            ["bash", "python", "python src/x.py", "python ../x.py", "tool read_file", "json", ""]
        ),
        st.text(max_size=120),
    ),
    JSON.map(lambda v: json.dumps(v, default=str)),
    st.sampled_from(
        [
            DEEP,
            '{"tool": "finish", "args": ' + DEEP + "}",
            "```tool read_file\n" + DEEP + "\n```",
            "```bash\necho \ud800\n```",
            "```python src/\udcff.py\nx = 1\n```",
            "DONE \udcff",
        ]
    ),
)
TOOL_CALL = st.fixed_dictionaries(
    {
        "name": st.sampled_from([*sorted(TOOLS), FINISH, "nope", "", "\udcff"]),
        "arguments": st.one_of(JSON, st.text(max_size=40), st.just(DEEP)),
    }
)
REPLY = st.one_of(
    TEXT_REPLY,
    st.fixed_dictionaries(
        {
            "content": st.one_of(st.none(), st.text(max_size=40)),
            "tool_calls": st.lists(TOOL_CALL, min_size=1, max_size=3),
        }
    ),
)
_names = itertools.count()


@pytest.mark.slow
@PROPS
@given(
    mode=st.sampled_from(["native", "json", "text"]),
    structured=st.booleans(),
    permissions=st.sampled_from(["all", "read", "none"]),
    replies=st.lists(REPLY, min_size=1, max_size=4),
)
@example(
    mode="json", structured=False, permissions="all", replies=['{"tool": "finish", "args": ' + DEEP + "}"]
)
@example(mode="text", structured=True, permissions="none", replies=[DEEP])
@example(
    mode="native",
    structured=False,
    permissions="all",
    replies=[{"content": None, "tool_calls": [{"name": "read_file", "arguments": DEEP}]}],
)
@example(mode="native", structured=False, permissions="all", replies=["```bash\necho \ud800\n```"])
def test_no_model_reply_escapes_the_agent_loop(
    tmp_path_factory, clone, mode, structured, permissions, replies
):
    # commands stay out of it: they are the sandbox's business, and would only slow the search down
    replies = [
        r for r in replies if not (isinstance(r, dict) and any(t["name"] == "run" for t in r["tool_calls"]))
    ]
    answer = {"verdict": "ok"} if structured else {"summary": "done"}
    model = scripted.register(
        [*replies, *[render(mode, FINISH, answer)] * 3], name=f"agent-input-{next(_names)}"
    )
    profile, sheet = scripted_profile(model, mode)
    recorder = RunRecorder(tmp_path_factory.mktemp("run"), "r1")
    perms = {"all": {"read", "write"}, "read": {"read"}, "none": set()}[permissions]
    box = Toolbox(clone, perms, recorder=recorder, role="coder", timeout_s=5)
    config = AgentConfig(
        role="coder",
        tier="cheap",
        system_prompt="You code.",
        max_steps=6,
        max_format_errors=5,
        result_schema=Verdict if structured else None,
    )
    gateway = Gateway(profile, sheet, recorder)
    gateway._sleep = lambda _s: None  # empty replies are retried after a backoff: not worth waiting for
    try:
        result = Agent(config, gateway, box, recorder).run("Do the task.")
    except ModelError as e:  # empty replies through every retry: the provider failing, not agent input
        assert "EmptyReply" in str(e)
        return
    assert result.outcome in ("done", "capped", "format_errors")
    recorder.close()
    for name in ("calls.jsonl", "events.jsonl", "transcript.jsonl"):  # every record was written
        read_jsonl(recorder.run_dir / name)
