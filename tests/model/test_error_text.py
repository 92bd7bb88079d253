"""Errors as the provider gave them: its status code (a 529 stays 529 through litellm) and the useful
part of its message (a long one loses its middle, not its end) -- ``kit.model.retry.describe``."""

from __future__ import annotations

import pytest

from kit.errors import ModelError
from kit.model.retry import short
from kit.records.schema import read_jsonl
from tests.model.test_providers import MESSAGES, gateway_for


def test_a_529_is_recorded_as_529_with_the_providers_message(fake_anthropic, tmp_path):
    gw, calls = gateway_for(fake_anthropic, tmp_path)
    fake_anthropic.inject("529", "500")
    gw.call(role="coder", tier="cheap", messages=MESSAGES)
    first, second, third = read_jsonl(calls)
    assert first["error"].startswith("InternalServerError [529]: ")
    assert "overloaded_error" in first["error"] and "Overloaded" in first["error"]
    assert "[500]" not in first["error"]
    assert second["error"].startswith("InternalServerError [500]: ") and "internal error" in second["error"]
    assert "Handle with `litellm" not in second["error"]  # litellm's boilerplate is not the message
    assert third["ok"] and third["error"] is None


def test_giving_up_on_529_names_529(fake_anthropic, tmp_path):
    gw, _ = gateway_for(fake_anthropic, tmp_path)
    fake_anthropic.inject(*["529"] * 4)
    with pytest.raises(
        ModelError, match=r"gave up after 4 attempts: InternalServerError \[529\]: .*Overloaded"
    ):
        gw.call(role="coder", tier="cheap", messages=MESSAGES)


def test_a_long_message_keeps_its_end():
    text = "Error code: 400 - " + "context " * 200 + "prompt is too long: 250000 tokens > 200000 maximum"
    cut = short(text, 200)
    assert len(cut) <= 200
    assert cut.startswith("Error code: 400") and cut.endswith("250000 tokens > 200000 maximum")
    assert " ... " in cut
