"""The gateway against recorded raw provider payloads, run through the pinned litellm itself."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import litellm
import openai
import pytest
from litellm.llms.custom_httpx.http_handler import HTTPHandler
from pydantic import BaseModel

from kit.config import ModelSpec, PriceSheet, Profile, load_price_sheet
from kit.errors import MissingKeyError, ModelError
from kit.model import scripted
from kit.model.gateway import Gateway
from kit.records.recorder import RunRecorder
from kit.records.schema import read_jsonl
from kit.usage import ModelPrice, Usage, normalise, price
from tests.support import FIXTURES

PAYLOADS = FIXTURES / "payloads"
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Status?"}]


def payload(name: str) -> dict:
    return json.loads((PAYLOADS / f"{name}.json").read_text())


class Capture:
    """A mock HTTP transport that answers with a recorded body and keeps the request bodies."""

    def __init__(self, body: dict) -> None:
        self.body = body
        self.requests: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content or b"{}"))
        return httpx.Response(200, json=self.body)


def one_tier_profile(spec: ModelSpec, sheet_name: str = "test") -> Profile:
    return Profile(
        name="test", price_sheet=sheet_name, tiers={t: spec for t in ("cheap", "medium", "strong")}
    )


def gateway_for(model: str, client, sheet: PriceSheet, tmp_path: Path, **spec) -> tuple[Gateway, RunRecorder]:
    recorder = RunRecorder(tmp_path / "run", "r1")
    spec_obj = ModelSpec(model=model, extra={"client": client, "api_key": "sk-test"}, **spec)
    return Gateway(one_tier_profile(spec_obj), sheet, recorder), recorder


def test_anthropic_payload_normalised_and_priced_like_litellm(tmp_path):
    capture = Capture(payload("anthropic"))
    client = HTTPHandler(client=httpx.Client(transport=httpx.MockTransport(capture)))
    sheet = load_price_sheet("anthropic")
    gw, rec = gateway_for("anthropic/claude-sonnet-4-5", client, sheet, tmp_path)

    reply = gw.call(role="coder", tier="cheap", messages=MESSAGES)

    u = reply.usage
    assert (u.input_uncached, u.cache_read, u.cache_write, u.output) == (500, 10_000, 1_500, 500)
    assert u.cost_usd == pytest.approx(0.017625, rel=1e-9)  # 500*3 + 10000*0.3 + 1500*3.75 + 500*15, per 1M
    row = read_jsonl(rec.run_dir / "calls.jsonl")[0]
    assert row["litellm_cost_usd"] == pytest.approx(0.017625, rel=0.01)
    assert row["cost_mismatch"] is False
    assert row["raw_usage"]["cache_creation_input_tokens"] == 1500  # raw kept beside normalised
    assert row["raw_usage"]["prompt_tokens"] == 12_000  # litellm folds read+write into prompt_tokens
    # explicit cache breakpoints on the system prompt and the newest message
    sent = capture.requests[0]
    assert sent["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_openai_payload_counts_cached_tokens_once(tmp_path):
    capture = Capture(payload("openai"))
    client = openai.OpenAI(
        api_key="sk-test", http_client=httpx.Client(transport=httpx.MockTransport(capture))
    )
    sheet = PriceSheet(
        name="openai",
        prices={"openai/gpt-4o-mini": ModelPrice(input=0.15, output=0.6, cache_read=0.075, cache_write=0.15)},
    )
    gw, rec = gateway_for("openai/gpt-4o-mini", client, sheet, tmp_path)

    u = gw.call(role="coder", tier="cheap", messages=MESSAGES).usage

    assert (u.input_uncached, u.cache_read, u.cache_write, u.output, u.reasoning) == (
        2_000,
        10_000,
        0,
        500,
        128,
    )
    assert u.cost_usd == pytest.approx((2_000 * 0.15 + 10_000 * 0.075 + 500 * 0.6) / 1e6)
    row = read_jsonl(rec.run_dir / "calls.jsonl")[0]
    assert row["litellm_cost_usd"] == pytest.approx(u.cost_usd, rel=0.01)
    assert "cache_control" not in json.dumps(capture.requests[0])  # no breakpoints for OpenAI


def test_deepseek_payload_uses_hit_and_miss_counts(tmp_path):
    capture = Capture(payload("deepseek"))
    client = HTTPHandler(client=httpx.Client(transport=httpx.MockTransport(capture)))
    sheet = PriceSheet(
        name="deepseek",
        prices={
            "deepseek/deepseek-chat": ModelPrice(input=0.28, output=0.42, cache_read=0.028, cache_write=0.28)
        },
    )
    gw, rec = gateway_for("deepseek/deepseek-chat", client, sheet, tmp_path)

    u = gw.call(role="coder", tier="cheap", messages=MESSAGES).usage

    assert (u.input_uncached, u.cache_read, u.cache_write, u.output) == (2_000, 10_000, 0, 500)
    row = read_jsonl(rec.run_dir / "calls.jsonl")[0]
    assert row["litellm_cost_usd"] == pytest.approx(0.00105, rel=0.01)
    assert row["cost_mismatch"] is False


def test_llamacpp_payload_recorded_from_the_embedded_server(tmp_path):
    capture = Capture(payload("llamacpp"))
    client = openai.OpenAI(api_key="none", http_client=httpx.Client(transport=httpx.MockTransport(capture)))
    sheet = PriceSheet(
        name="l", prices={"p": ModelPrice(input=1, output=5, cache_read=0.1, cache_write=1.25)}
    )
    gw, _ = gateway_for(
        "openai/smollm2", client, sheet, tmp_path, price="p", api_base="http://127.0.0.1:9/v1"
    )

    u = gw.call(role="coder", tier="cheap", messages=MESSAGES).usage

    assert (u.input_uncached, u.cache_read, u.cache_write, u.output) == (8, 546, 0, 8)


def test_disagreement_with_litellm_over_one_percent_is_flagged(tmp_path):
    capture = Capture(payload("anthropic"))
    client = HTTPHandler(client=httpx.Client(transport=httpx.MockTransport(capture)))
    wrong = PriceSheet(
        name="wrong",  # bills cache writes at the read price: the classic harness bug
        prices={
            "anthropic/claude-sonnet-4-5": ModelPrice(input=3, output=15, cache_read=0.3, cache_write=0.3)
        },
    )
    gw, rec = gateway_for("anthropic/claude-sonnet-4-5", client, wrong, tmp_path)
    gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert read_jsonl(rec.run_dir / "calls.jsonl")[0]["cost_mismatch"] is True


def test_cache_write_is_never_priced_at_the_read_rate():
    sheet = ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    writes_only = Usage(cache_write=1_000_000)
    reads_only = Usage(cache_read=1_000_000)
    assert price(writes_only, sheet) == pytest.approx(3.75)
    assert price(reads_only, sheet) == pytest.approx(0.3)
    # and normalisation keeps the two buckets apart for every provider shape that has writes
    u = normalise(
        {"prompt_tokens": 2_000, "cache_read_input_tokens": 500, "cache_creation_input_tokens": 1_000}
    )
    assert (u.input_uncached, u.cache_read, u.cache_write) == (500, 500, 1_000)


def test_usage_adds_and_sums():
    a = Usage(input_uncached=1, cache_read=2, cache_write=3, output=4, reasoning=1, cost_usd=0.5)
    b = Usage(input_uncached=10, cache_read=20, cache_write=30, output=40, reasoning=2, cost_usd=1.0)
    total = sum([a, b])
    assert total == Usage(
        input_uncached=11, cache_read=22, cache_write=33, output=44, reasoning=3, cost_usd=1.5
    )
    assert total.input_total == 66
    assert total.cache_hit_ratio == pytest.approx(22 / 66)


def scripted_gateway(source, tmp_path: Path, **kwargs) -> tuple[Gateway, RunRecorder]:
    model = scripted.register(source)
    sheet = PriceSheet(
        name="s", prices={model: ModelPrice(input=1, output=2, cache_read=0.1, cache_write=1.25)}
    )
    recorder = RunRecorder(tmp_path / "run", "r1")
    gw = Gateway(one_tier_profile(ModelSpec(model=model)), sheet, recorder, sleep=lambda s: None, **kwargs)
    return gw, recorder


def test_transient_errors_are_retried_then_surface_as_one_clear_error(tmp_path):
    errors = [litellm.RateLimitError("429 slow down", llm_provider="scripted", model="m") for _ in range(4)]
    gw, rec = scripted_gateway(errors, tmp_path, max_retries=3)
    with pytest.raises(ModelError) as info:
        gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert "gave up after 4 attempts" in str(info.value)
    assert "rerun" in str(info.value)  # says what to do
    rows = read_jsonl(rec.run_dir / "calls.jsonl")
    assert [r["attempt"] for r in rows] == [1, 2, 3, 4]
    assert all(not r["ok"] and "RateLimitError" in r["error"] for r in rows)


def test_a_transient_error_then_success_records_both_attempts(tmp_path):
    gw, rec = scripted_gateway(
        [litellm.InternalServerError("500", llm_provider="scripted", model="m"), "fine"], tmp_path
    )
    assert gw.call(role="coder", tier="cheap", messages=MESSAGES).content == "fine"
    rows = read_jsonl(rec.run_dir / "calls.jsonl")
    assert [(r["attempt"], r["ok"]) for r in rows] == [(1, False), (2, True)]


def test_a_bad_request_is_not_retried(tmp_path):
    gw, rec = scripted_gateway([litellm.BadRequestError("bad", llm_provider="scripted", model="m")], tmp_path)
    with pytest.raises(ModelError):
        gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert len(read_jsonl(rec.run_dir / "calls.jsonl")) == 1


class Verdict(BaseModel):
    verdict: str
    issues: list[str]


def test_scripted_structured_output_tool_calls_and_settable_usage(tmp_path):
    gw, rec = scripted_gateway(
        [
            Verdict(verdict="clean", issues=[]),
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]},
            {
                "content": "x",
                "usage": {
                    "prompt_tokens": 100,
                    "completion_tokens": 7,
                    "cached_tokens": 60,
                    "cache_write_tokens": 30,
                },
            },
        ],
        tmp_path,
    )
    r1 = gw.call(role="auditor", tier="medium", messages=MESSAGES, schema=Verdict)
    assert r1.parsed == Verdict(verdict="clean", issues=[])
    r2 = gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert r2.tool_calls[0].name == "read_file" and r2.tool_calls[0].arguments == {"path": "a.py"}
    u = gw.call(role="coder", tier="cheap", messages=MESSAGES).usage
    assert (u.input_uncached, u.cache_read, u.cache_write, u.output) == (10, 60, 30, 7)
    roles = [(r["role"], r["tier"]) for r in read_jsonl(rec.run_dir / "calls.jsonl")]
    assert roles == [("auditor", "medium"), ("coder", "cheap"), ("coder", "cheap")]


def test_missing_api_key_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    spec = ModelSpec(model="anthropic/claude-sonnet-4-5", api_key_env="ANTHROPIC_API_KEY")
    gw = Gateway(one_tier_profile(spec), load_price_sheet("anthropic"), None)
    with pytest.raises(MissingKeyError) as info:
        gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert "ANTHROPIC_API_KEY" in str(info.value) and "--profile local" in str(info.value)


def test_a_broken_scripted_policy_fails_once_not_like_an_outage(tmp_path):
    def policy(request):
        raise KeyError("no such step")

    gw, rec = scripted_gateway(policy, tmp_path)
    with pytest.raises(ModelError) as info:
        gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert "scripted policy failed" in str(info.value) and "no such step" in str(info.value)
    assert len(read_jsonl(rec.run_dir / "calls.jsonl")) == 1
