"""One test per private litellm API the kit uses (:mod:`kit.model.litellm_private`), against the pinned
litellm. Each fails when an upgrade removes the symbol or changes the behaviour the kit relies on; each
also checks the contrast case, so that it could not pass with the private API doing nothing."""

from __future__ import annotations

import email.utils
import os
import time
from typing import Any

import httpx
import litellm
import pytest
from litellm import CustomLLM
from litellm._internal_context import is_internal_call
from litellm.litellm_core_utils import get_model_cost_map as cost_map_module
from litellm.llms.custom_httpx.http_handler import HTTPHandler
from litellm.types.utils import ModelResponse

from kit.model import gateway, litellm_private
from tests.model.test_gateway import MESSAGES, Capture, payload

ANTHROPIC = "anthropic/claude-sonnet-4-5"


def anthropic_completion() -> Any:
    """One real litellm Anthropic call, answered from a recorded payload by a mock transport."""
    client = HTTPHandler(client=httpx.Client(transport=httpx.MockTransport(Capture(payload("anthropic")))))
    return litellm.completion(model=ANTHROPIC, messages=MESSAGES, client=client, api_key="sk-test")


# --------------------------------------------------------------------------- go_offline


class CountingClient:
    """Stands in for httpx in ``get_model_cost_map``: counts fetches and fails them."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def get(self, url: str, timeout: int) -> httpx.Response:
        self.urls.append(url)
        raise httpx.ConnectError("no network in this test")


@pytest.mark.parametrize("switch", sorted(litellm_private.OFFLINE_ENV))
def test_each_offline_switch_keeps_litellms_cost_map_local(monkeypatch, switch):
    for name in litellm_private.OFFLINE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.argv", ["pytest"])  # not a litellm CLI process (those are always local)

    online = CountingClient()
    cost_map_module.get_model_cost_map(url="https://cost-map.invalid/map.json", client=online, max_attempts=1)
    assert online.urls, "without the switches litellm fetches the cost map (else this test proves nothing)"

    monkeypatch.setenv(switch, litellm_private.OFFLINE_ENV[switch])
    offline = CountingClient()
    costs = cost_map_module.get_model_cost_map(
        url="https://cost-map.invalid/map.json", client=offline, max_attempts=1
    )
    assert offline.urls == [] and len(costs) > 100 and ANTHROPIC.split("/")[1] in costs


def test_go_offline_sets_both_switches(monkeypatch):
    for name in litellm_private.OFFLINE_ENV:
        monkeypatch.delenv(name, raising=False)
    litellm_private.go_offline()
    assert {name: os.environ[name] for name in litellm_private.OFFLINE_ENV} == {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "true",
    }


# --------------------------------------------------------------------------- register_provider


class Probe(CustomLLM):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(
            model=model, choices=[{"index": 0, "message": {"role": "assistant", "content": self.text}}]
        )


def test_register_provider_routes_its_model_strings_to_the_handler(monkeypatch):
    monkeypatch.setattr(litellm, "custom_provider_map", list(litellm.custom_provider_map))
    monkeypatch.setattr(litellm, "provider_list", list(litellm.provider_list))
    monkeypatch.setattr(litellm, "_custom_providers", list(litellm._custom_providers))
    assert "kitprobe" not in litellm.provider_list

    litellm_private.register_provider("kitprobe", Probe("first"))
    litellm_private.register_provider("kitprobe", Probe("second"))  # replaces, does not stack

    assert [p["provider"] for p in litellm.custom_provider_map].count("kitprobe") == 1
    assert "kitprobe" in litellm.provider_list  # known before any call: custom_llm_setup() ran
    assert litellm.get_llm_provider("kitprobe/x")[1] == "kitprobe"
    reply = litellm.completion(model="kitprobe/x", messages=MESSAGES)
    assert reply.choices[0].message.content == "second"


def test_the_gateway_registered_the_scripted_provider():
    (entry,) = [p for p in litellm.custom_provider_map if p["provider"] == "scripted"]
    assert isinstance(entry["custom_handler"], gateway._ScriptedHandler)
    assert "scripted" in litellm.provider_list


# --------------------------------------------------------------------------- quiet_logging


@pytest.fixture
def submissions(monkeypatch):
    """What litellm hands to its success-logging thread pool."""
    seen: list[Any] = []
    executor = litellm.litellm_core_utils.litellm_logging.executor
    original = executor.submit

    def spy(fn, *args, **kwargs):
        seen.append(fn)
        return original(fn, *args, **kwargs)

    monkeypatch.setattr(executor, "submit", spy)
    return seen


def test_quiet_logging_skips_litellms_success_logging_thread(submissions):
    anthropic_completion()
    assert submissions, "a plain call submits its success logging (else this test proves nothing)"
    submissions.clear()
    with litellm_private.quiet_logging():
        anthropic_completion()
    assert submissions == []


def test_quiet_logging_marks_the_call_internal_only_without_callbacks(monkeypatch):
    async def on_success(kwargs, response, start, end):  # an async callback litellm files privately
        pass

    with litellm_private.quiet_logging():
        assert is_internal_call.get() is True
    assert is_internal_call.get() is False

    monkeypatch.setattr(litellm, "_async_success_callback", [])
    monkeypatch.setattr(litellm, "success_callback", [])
    litellm.logging_callback_manager.add_litellm_success_callback(on_success)
    assert litellm._async_success_callback == [on_success] and litellm.success_callback == []
    with litellm_private.quiet_logging():
        assert is_internal_call.get() is False  # the user's async callback still gets every call


# --------------------------------------------------------------------------- retry_after_seconds


def test_retry_after_seconds_reads_seconds_and_http_dates():
    assert litellm_private.retry_after_seconds(httpx.Headers({"retry-after": "7"})) == 7
    in_30s = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 27 <= litellm_private.retry_after_seconds(httpx.Headers({"retry-after": in_30s})) <= 30
    unreadable = litellm_private.retry_after_seconds(httpx.Headers({"retry-after": "soon"}))
    assert unreadable is None or unreadable < 0


# --------------------------------------------------------------------------- hidden_response_cost


def test_hidden_response_cost_is_the_cost_litellm_computed_during_the_call():
    response = anthropic_completion()
    assert response._hidden_params["response_cost"] is not None
    cost = litellm_private.hidden_response_cost(response)
    assert cost == pytest.approx(litellm.completion_cost(completion_response=response, model=ANTHROPIC))
    assert cost == pytest.approx(0.017625, rel=0.01)  # the recorded payload's tokens at Sonnet 4.5 prices
    assert litellm_private.hidden_response_cost(ModelResponse()) is None
