"""litellm's per-call success logging (a background thread that recomputes the cost) is skipped when no
litellm callback is configured; litellm's own cost figure still lands in calls.jsonl."""

from __future__ import annotations

import threading

import httpx
import litellm
import pytest
from litellm.llms.custom_httpx.http_handler import HTTPHandler

from kit.config import load_price_sheet
from kit.records.schema import read_jsonl
from tests.model.test_gateway import MESSAGES, Capture, gateway_for, payload


def _client() -> HTTPHandler:
    return HTTPHandler(client=httpx.Client(transport=httpx.MockTransport(Capture(payload("anthropic")))))


@pytest.fixture
def submissions(monkeypatch):
    seen: list[str] = []
    original = litellm.utils.executor.submit

    def spy(fn, *args, **kwargs):
        seen.append(getattr(fn, "__name__", repr(fn)))
        return original(fn, *args, **kwargs)

    monkeypatch.setattr(litellm.utils.executor, "submit", spy)
    return seen


def test_no_success_logging_thread_and_litellms_cost_is_kept(tmp_path, submissions):
    gw, rec = gateway_for("anthropic/claude-sonnet-4-5", _client(), load_price_sheet("anthropic"), tmp_path)
    gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert submissions == []  # nothing handed to litellm's logging executor
    row = read_jsonl(rec.run_dir / "calls.jsonl")[0]
    direct = litellm.completion(
        model="anthropic/claude-sonnet-4-5", messages=MESSAGES, client=_client(), api_key="sk-test"
    )
    assert row["litellm_cost_usd"] == litellm.completion_cost(
        completion_response=direct, model="anthropic/claude-sonnet-4-5"
    )
    assert row["litellm_cost_usd"] == pytest.approx(0.017625, rel=0.01)


def test_a_configured_litellm_callback_still_gets_every_call(tmp_path, submissions, monkeypatch):
    got = threading.Event()
    costs: list[float] = []

    def callback(kwargs, response, start, end):
        costs.append(kwargs.get("response_cost"))
        got.set()

    monkeypatch.setattr(litellm, "success_callback", [callback])
    gw, rec = gateway_for("anthropic/claude-sonnet-4-5", _client(), load_price_sheet("anthropic"), tmp_path)
    gw.call(role="coder", tier="cheap", messages=MESSAGES)
    assert got.wait(10) and submissions  # the user's logging runs as litellm would run it
    assert costs[0] == pytest.approx(read_jsonl(rec.run_dir / "calls.jsonl")[0]["litellm_cost_usd"])
