"""The gateway, the agent and the strategies against fake provider servers that speak the real wire
formats (tests/support/fake_providers.py), through litellm's real Anthropic and OpenAI code paths."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import httpx
import pytest
import yaml

from kit.config import Limits, ModelSpec, PriceSheet, Profile, RetryPolicy, load_price_sheet
from kit.errors import ConfigError, ModelError
from kit.model.actions import FINISH, render
from kit.model.caching import min_cacheable_tokens
from kit.model.gateway import Gateway
from kit.records.recorder import RunRecorder
from kit.records.schema import CALLS, read_jsonl
from kit.run.runner import run_experiment
from kit.usage import ModelPrice
from tests.support.context import run_context
from tests.support.fake_providers import PolicyResponder, role_phrases
from tests.support.helpers import experiment, rows, run_json

SONNET = "anthropic/claude-sonnet-4-5"
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Status?"}]
FAST = RetryPolicy(max_retries=3, backoff_s=0.01, max_backoff_s=0.05)


def profile_for(server, model: str = SONNET, **spec) -> Profile:
    base = server.url + ("/v1" if server.provider == "openai" else "")
    tier = ModelSpec(model=model, api_base=base, extra={"api_key": "test-key"}, **spec)
    return Profile(
        name="fake",
        price_sheet="anthropic",
        tiers=dict.fromkeys(("cheap", "medium", "strong"), tier),
        retry=FAST,
    )


OPENAI_SHEET = PriceSheet(
    name="openai",
    prices={"openai/gpt-4o-mini": ModelPrice(input=0.15, output=0.6, cache_read=0.075, cache_write=0.15)},
)


def gateway_for(server, tmp_path: Path, sleeps: list | None = None, **spec) -> tuple[Gateway, Path]:
    model = SONNET if server.provider == "anthropic" else "openai/gpt-4o-mini"
    sheet = load_price_sheet("anthropic") if server.provider == "anthropic" else OPENAI_SHEET
    recorder = RunRecorder(tmp_path / "run", "r1")
    sleep = sleeps.append if sleeps is not None else (lambda s: None)
    return Gateway(profile_for(server, model, **spec), sheet, recorder, sleep=sleep), tmp_path / "run" / CALLS


# --------------------------------------------------------------------------- the fake's rules


def post(server, body: dict) -> httpx.Response:
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    return httpx.post(server.url + "/v1/messages", json=body, headers=headers)


def tool_turns(result_content) -> list[dict]:
    return [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": result_content}],
        },
    ]


MARK = {"type": "ephemeral"}


@pytest.mark.parametrize(
    ("messages", "system", "error"),
    [
        (
            tool_turns([{"type": "text", "text": "a.py", "cache_control": MARK}]),
            None,
            "directly on the tool_result",
        ),
        (tool_turns("a.py")[:2], None, "without `tool_result`"),
        (
            [tool_turns("a.py")[0], {"role": "assistant", "content": "Sure."}, tool_turns("a.py")[2]],
            None,
            "unexpected `tool_use_id`",
        ),
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], None, "alternate"),
        ([{"role": "assistant", "content": "a"}], None, "first message"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": MARK}]}],
            [{"type": "text", "text": f"s{i}", "cache_control": MARK} for i in range(4)],
            "maximum of 4 blocks",
        ),
    ],
)
def test_the_fake_anthropic_refuses_what_the_real_api_refuses(fake_anthropic, messages, system, error):
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": messages}
    if system:
        body["system"] = system
    response = post(fake_anthropic, body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert error in response.json()["error"]["message"]


def test_the_fake_anthropic_caches_a_marked_prefix_only_from_the_models_minimum(fake_anthropic):
    text = "word " * 6000  # ~7,500 tokens by the fake's chars/4 count
    for model, long in (("claude-sonnet-4-5", 2000), ("claude-haiku-4-5", 2000), ("claude-haiku-4-5", 6000)):
        system = [{"type": "text", "text": text[: long * 5], "cache_control": MARK}]
        usages = []
        for _ in range(2):
            body = {
                "model": model,
                "max_tokens": 5,
                "system": system,
                "messages": [{"role": "user", "content": "q"}],
            }
            usages.append(post(fake_anthropic, body).json()["usage"])
        cached = usages[0]["cache_creation_input_tokens"] > 0 and usages[1]["cache_read_input_tokens"] > 0
        size = usages[0]["input_tokens"] + usages[0]["cache_creation_input_tokens"]
        assert cached == (size >= min_cacheable_tokens(model)), (model, usages)
    assert min_cacheable_tokens("anthropic/claude-haiku-4-5") == 4096
    assert min_cacheable_tokens("anthropic/claude-opus-4-5") == 4096
    assert min_cacheable_tokens("anthropic/claude-sonnet-4-5") == 1024


# --------------------------------------------------------------------------- the gateway


def test_a_tool_result_as_newest_message_is_accepted_with_the_marker_on_the_block(fake_anthropic, tmp_path):
    gw, calls = gateway_for(fake_anthropic, tmp_path)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "ls",
                "description": "list",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    messages = [
        {"role": "system", "content": "You list files. " * 400},
        {"role": "user", "content": "What is here?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
    ]
    first = gw.call(role="coder", tier="cheap", messages=messages, tools=tools)
    second = gw.call(role="coder", tier="cheap", messages=messages, tools=tools)
    sent = fake_anthropic.seen[0].body
    last = sent["messages"][-1]["content"][-1]
    assert last["type"] == "tool_result" and last["cache_control"] == MARK  # on the block itself
    assert sent["system"][-1]["cache_control"] == MARK
    assert first.usage.cache_write > 0 and second.usage.cache_read == first.usage.cache_write
    assert [r["ok"] for r in read_jsonl(calls)] == [True, True]


def test_a_tier_can_turn_caching_off(fake_anthropic, tmp_path):
    gw, _ = gateway_for(fake_anthropic, tmp_path, cache_breakpoints=False)
    gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert "cache_control" not in json.dumps(fake_anthropic.seen[0].body)


FAULTS = ["429", "429ms", "500", "529", "timeout", "reset", "empty", "empty_text", "garbage"]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("fault", FAULTS)
def test_every_attempt_the_server_saw_is_a_row(request, tmp_path, provider, fault):
    server = request.getfixturevalue(f"fake_{provider}")
    server.stall_s = 1.2
    gw, calls = gateway_for(server, tmp_path, timeout_s=0.4)
    server.inject(fault)
    reply = gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert reply.content == "ok"
    records = read_jsonl(calls)
    assert server.hits == len(records) == 2  # the SDK did not retry behind the kit's back
    assert [(r["attempt"], r["ok"]) for r in records] == [(1, False), (2, True)]
    assert records[0]["error"] and records[0]["latency_s"] >= 0
    if fault == "timeout":
        assert 0.3 < records[0]["latency_s"] < 1.1  # the profile's timeout, not a multiple of it


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_empty_replies_until_the_retries_run_out_are_an_error(request, tmp_path, provider):
    server = request.getfixturevalue(f"fake_{provider}")
    gw, calls = gateway_for(server, tmp_path)
    server.inject(*["empty"] * 4)
    with pytest.raises(ModelError, match="gave up after 4 attempts: EmptyReply"):
        gw.call(role="coder", tier="cheap", messages=MESSAGES)
    records = read_jsonl(calls)
    assert server.hits == len(records) == 4 and not any(r["ok"] for r in records)
    assert all(r["input_uncached"] + r["cache_write"] + r["cache_read"] > 0 for r in records)  # billed


@pytest.mark.parametrize(("fault", "wait"), [("429", 1.0), ("429ms", 0.2)])
def test_backoff_honours_retry_after(fake_anthropic, tmp_path, fault, wait):
    sleeps: list[float] = []
    recorder = RunRecorder(tmp_path / "run", "r1")
    profile = profile_for(fake_anthropic).model_copy(
        update={"retry": RetryPolicy(backoff_s=0.01, max_backoff_s=30)}
    )
    gw = Gateway(profile, load_price_sheet("anthropic"), recorder, sleep=sleeps.append)
    fake_anthropic.inject(fault, "500")
    gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert sleeps == [wait, 0.02]  # the server's figure, then the exponential backoff (0.01 * 2)


@pytest.mark.slow
def test_a_real_retry_after_wait(fake_anthropic, tmp_path):
    gw = Gateway(
        profile_for(fake_anthropic).model_copy(update={"retry": RetryPolicy(max_backoff_s=5)}),
        load_price_sheet("anthropic"),
        RunRecorder(tmp_path / "run", "r1"),
    )
    fake_anthropic.inject("429")  # retry-after: 1
    gw.call(role="coder", tier="cheap", messages=MESSAGES)
    first, second = read_jsonl(tmp_path / "run" / CALLS)
    from datetime import datetime

    gap = datetime.fromisoformat(second["started_at"][:-1]) - datetime.fromisoformat(first["started_at"][:-1])
    assert gap.total_seconds() >= 1.0


def test_missing_usage_is_estimated_and_flagged(fake_openai, tmp_path):
    gw, calls = gateway_for(fake_openai, tmp_path)
    fake_openai.inject("no_usage")
    reply = gw.call(role="coder", tier="cheap", messages=MESSAGES)
    (row,) = read_jsonl(calls)
    assert row["usage_estimated"] is True and row["ok"] is True
    assert reply.usage.input_uncached > 0 and reply.usage.output > 0 and reply.usage.cost_usd > 0
    assert row["litellm_cost_usd"] is None  # nothing to compare an estimate with
    gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert read_jsonl(calls)[1]["usage_estimated"] is False


def test_anthropic_reply_without_usage_is_a_failed_attempt(fake_anthropic, tmp_path):
    """litellm 1.110.2 cannot parse an Anthropic message without usage: a failed, retried attempt."""
    gw, calls = gateway_for(fake_anthropic, tmp_path)
    fake_anthropic.inject("no_usage")
    gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert [r["ok"] for r in read_jsonl(calls)] == [False, True] and fake_anthropic.hits == 2


def test_preflight_names_the_tier_and_the_unknown_model(fake_openai, tmp_path):
    sheet = PriceSheet(name="s", prices={"p": ModelPrice(input=1, output=1, cache_read=0.1, cache_write=1)})
    profile = profile_for(fake_openai, "openai/my-finetune-v3", price="p")
    with pytest.raises(
        ConfigError, match=r"tier cheap: litellm does not know the model 'openai/my-finetune-v3'"
    ) as info:
        Gateway(profile, sheet).preflight()
    assert "custom: true" in str(info.value)
    custom = {t: s.model_copy(update={"custom": True}) for t, s in profile.tiers.items()}
    gw = Gateway(profile.model_copy(update={"tiers": custom}), sheet, RunRecorder(tmp_path / "r", "r"))
    gw.preflight()  # marked custom: accepted, priced from the sheet
    assert gw.call(role="coder", tier="cheap", messages=MESSAGES).usage.cost_usd > 0


# --------------------------------------------------------------------------- runs through the runner


def write_fake_profile(
    folder: Path, server, model: str = SONNET, retry: dict | None = None, sheet: dict | None = None
) -> Path:
    (folder / "profiles").mkdir(parents=True, exist_ok=True)
    (folder / "prices").mkdir(parents=True, exist_ok=True)
    sheet = sheet or load_price_sheet("anthropic").model_dump(mode="json")
    (folder / "prices" / f"{sheet['name']}.yaml").write_text(yaml.safe_dump(sheet))
    base = server.url + ("/v1" if server.provider == "openai" else "")
    tier = {"model": model, "api_base": base, "api_key_env": "FAKE_ANTHROPIC_KEY"}
    profile = {
        "name": "fake-anthropic",
        "price_sheet": sheet["name"],
        "tiers": dict.fromkeys(("cheap", "medium", "strong"), tier),
        "retry": retry or {"max_retries": 2, "backoff_s": 0.01, "max_backoff_s": 0.05},
    }
    path = folder / "profiles" / "fake-anthropic.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def explorer(turns: int):
    """A coder that reads the task's files for ``turns - 1`` turns, then says it is done."""

    def policy(req):
        step = sum(m["role"] == "assistant" for m in req.messages)
        if step < turns - 1:
            path = ["textkit.py", "README.md", "tests/test_textkit.py"][step % 3]
            return render("native", "read_file", {"path": path}, f"Read {path}.")
        return render("native", FINISH, {"summary": "Looked around."}, "Done.")

    return policy


def test_a_ten_turn_tool_using_vibe_run_is_accepted_and_caches(fake_anthropic, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "test-key")
    fake_anthropic.responder = PolicyResponder(explorer(10))
    profile = write_fake_profile(tmp_path, fake_anthropic)
    out = run_experiment(
        experiment("fake10", profile, ["micro-slugify"], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    (run_dir,) = (out / "runs").iterdir()
    run, calls = run_json(run_dir), rows(run_dir, "calls.jsonl")
    assert run["outcome"] == "done", run["error"]
    assert len(calls) == 10 and all(c["ok"] for c in calls)
    assert [s.status for s in fake_anthropic.seen] == [200] * 10  # accepted at every call
    assert all(
        m["content"][-1].get("cache_control") == MARK
        for m in [s.body["messages"][-1] for s in fake_anthropic.seen]
    )
    first_write = next(i for i, c in enumerate(calls) if c["cache_write"] > 0)
    first_read = next(i for i, c in enumerate(calls) if c["cache_read"] > 0)
    assert first_write < first_read
    assert all(c["cache_read"] > 0 for c in calls[first_read:])
    assert [c["cache_read"] for c in calls] == [u["cache_read_input_tokens"] for u in fake_anthropic.usages]


def test_no_empty_reply_ends_a_run_as_done(fake_anthropic, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "test-key")
    fake_anthropic.responder = PolicyResponder(explorer(2))
    fake_anthropic.inject("empty", "empty_text", "empty")  # every attempt of the first call
    profile = write_fake_profile(tmp_path, fake_anthropic)
    out = run_experiment(
        experiment("empty", profile, ["micro-slugify"], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    (run_dir,) = (out / "runs").iterdir()
    run, calls = run_json(run_dir), rows(run_dir, "calls.jsonl")
    assert run["outcome"] == "error" and run["claimed_done"] is False
    assert "EmptyReply" in run["error"]
    assert fake_anthropic.hits == len(calls) == 3 and not any(c["ok"] for c in calls)


def test_models_check_tiered_reads_the_cache_on_every_tier(fake_anthropic, tmp_path, monkeypatch):
    from kit.app.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(
            [
                "models",
                "check",
                "--profile",
                "tiered",
                "--api-base",
                fake_anthropic.url,
                "--records",
                str(tmp_path / "check"),
            ]
        )
    text = out.getvalue()
    assert code == 0, text
    for tier in ("cheap", "medium", "strong"):
        assert f"{tier}: the second call read" in text, text
    assert f"records: {tmp_path / 'check' / CALLS}" in text
    calls = read_jsonl(tmp_path / "check" / CALLS)
    assert [c["model"] for c in calls[::2]] == [
        "anthropic/claude-haiku-4-5",
        "anthropic/claude-sonnet-4-5",
        "anthropic/claude-opus-4-5",
    ]
    assert all(c["cache_write"] >= 4096 for c in calls[::2])  # above Haiku's and Opus's minimum
    # the second call reads the shared system prefix (its own question differs from the first's)
    assert all(
        4096 <= c["cache_read"] <= w["cache_write"] for c, w in zip(calls[1::2], calls[::2], strict=True)
    )


# --------------------------------------------------------------------------- pdca and workflow


def fake_profile_obj(server) -> tuple[Profile, PriceSheet]:
    return profile_for(server), load_price_sheet("anthropic")


@pytest.mark.slow
def test_pdca_runs_against_the_fake_anthropic(fake_anthropic, tmp_path):
    from kit.strategies import pdca
    from kit.tasks.task import load_task
    from tests.support.pdca import Cast

    task = load_task("micro-slugify")
    cast = Cast()
    roles = ["orchestrator", "scout", "analyst", "auditor", "expert", "executor"]
    fake_anthropic.responder = PolicyResponder(
        cast, role_phrases("pdca", roles), {"task_path": str(task.path)}
    )
    profile, sheet = fake_profile_obj(fake_anthropic)
    ctx = run_context(tmp_path, "pdca", profile, sheet, task=task, limits=Limits(max_steps=10))
    recorder = ctx.recorder
    result = pdca.run(ctx)
    recorder.close()
    calls = read_jsonl(tmp_path / "run" / CALLS)
    assert result.claimed_done and result.outcome == "done", result  # EXIT: all criteria met
    assert {c["role"] for c in calls} >= {"analyst", "auditor", "executor"}
    assert (
        "NotImplementedError" not in (ctx.workspace.root / "textkit.py").read_text()
    )  # the executor's edits landed
    assert all(c["ok"] for c in calls) and all(s.status == 200 for s in fake_anthropic.seen)


def test_workflow_runs_against_the_fake_anthropic(fake_anthropic, tmp_path):
    from kit.strategies import workflow
    from kit.tasks.task import load_task
    from tests.support.workflow import WorkflowPolicy

    task = load_task("micro-slugify")
    policy = WorkflowPolicy(verdicts=["clean"])
    roles = ["editor", "analyzer", "refuter", "implementer"]  # editor's phrase extends implementer's
    fake_anthropic.responder = PolicyResponder(
        policy, role_phrases("workflow", roles), {"task_path": str(task.path)}
    )
    profile, sheet = fake_profile_obj(fake_anthropic)
    ctx = run_context(
        tmp_path, "workflow", profile, sheet, task=task, limits=Limits(max_steps=8), budget={},
        journal_dir=tmp_path / "journals",
    )  # fmt: skip
    recorder = ctx.recorder
    result = workflow.run(ctx)
    recorder.close()
    calls = read_jsonl(tmp_path / "run" / CALLS)
    assert (result.outcome, result.stop_reason) == ("done", "converged-clean"), result
    assert policy.counts["implementer"] >= 2 and policy.counts["analyzer"] >= 2
    assert all(c["ok"] for c in calls) and all(s.status == 200 for s in fake_anthropic.seen)


def test_the_agent_over_the_openai_wire(fake_openai, tmp_path):
    from kit.agent.loop import Agent, AgentConfig
    from kit.agent.toolbox import Toolbox
    from kit.tasks.task import load_task
    from kit.tasks.workspace import create_workspace

    fake_openai.responder = PolicyResponder(explorer(4))
    ws = create_workspace(load_task("micro-slugify"), tmp_path / "repo")
    gw, calls = gateway_for(fake_openai, tmp_path)
    toolbox = Toolbox(ws.root, {"read"}, recorder=gw.recorder, role="coder")
    agent = Agent(
        AgentConfig(role="coder", tier="cheap", system_prompt="You read."), gw, toolbox, gw.recorder
    )
    result = agent.run("Look around.")
    assert result.outcome == "done" and result.tool_calls == 3
    assert all(s.status == 200 for s in fake_openai.seen) and len(read_jsonl(calls)) == 4


def test_report_counts_the_calls_whose_usage_was_estimated(fake_openai, tmp_path, monkeypatch):
    from kit.analysis.report import report_text

    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "test-key")
    fake_openai.responder = PolicyResponder(explorer(3))
    fake_openai.inject("no_usage")
    sheet = OPENAI_SHEET.model_dump(mode="json")
    profile = write_fake_profile(tmp_path, fake_openai, "openai/gpt-4o-mini", sheet=sheet)
    out = run_experiment(
        experiment("est", profile, ["micro-slugify"], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    (run_dir,) = (out / "runs").iterdir()
    assert [c["usage_estimated"] for c in rows(run_dir, "calls.jsonl")] == [True, False, False]
    assert "NOTE: 1 of 3 call attempts came without usage" in report_text(out)


@pytest.mark.slow
def test_the_kit_keeps_litellm_offline_by_itself(tmp_path):
    """Importing the gateway with no litellm variables set makes no network connection."""
    import os
    import socket
    import subprocess
    import sys
    import threading

    from kit.paths import REPO_ROOT

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    connections = []

    def accept():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            connections.append(conn)
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    proxy = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    env.update(HTTP_PROXY=proxy, HTTPS_PROXY=proxy, http_proxy=proxy, https_proxy=proxy, NO_PROXY="")
    code = (
        "import os, kit.model.gateway as g; "
        "print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'], os.environ['LITELLM_OFFLINE_MODE'], "
        "len(g.litellm.model_cost) > 100)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    listener.close()
    assert done.stdout.split() == ["True", "true", "True"], done.stderr[-2000:]
    assert connections == []  # nothing was fetched through the proxy
