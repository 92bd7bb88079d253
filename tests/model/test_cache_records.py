"""What the gateway records about its cache breakpoints, and the 1-hour cache, against the fake
Anthropic server through litellm's real Anthropic code."""

from __future__ import annotations

import pytest

from kit.config import load_price_sheet
from kit.records.schema import read_jsonl
from kit.usage import ModelPrice
from tests.model.test_providers import gateway_for

SYSTEM = {"role": "system", "content": "You list files and explain them. " * 200}  # ~1,700 fake tokens


def conversation(turns: int) -> list[dict]:
    messages = [SYSTEM, {"role": "user", "content": "What is here?"}]
    for i in range(turns - 1):
        messages += [
            {"role": "assistant", "content": f"Looking {i}."},
            {"role": "user", "content": f"Observation: file_{i}.py " * 30},
        ]
    return messages


def test_a_one_hour_tier_asks_for_ttl_1h_and_its_writes_are_priced_at_the_1h_price(fake_anthropic, tmp_path):
    gw, calls = gateway_for(fake_anthropic, tmp_path, cache_ttl="1h")
    reply = gw.call(role="coder", tier="cheap", messages=conversation(1))
    sent = fake_anthropic.seen[0].body
    assert sent["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    (row,) = read_jsonl(calls)
    assert row["cache_write"] > 0 and row["cache_write_1h"] == row["cache_write"]
    assert row["cache_ttl"] == "1h"
    sonnet = load_price_sheet("anthropic").get("anthropic/claude-sonnet-4-5")
    assert sonnet.cache_write_1h == 6.0  # 2x input, explicit in the shipped sheet
    expected = (row["input_uncached"] * 3.0 + row["cache_write"] * 6.0 + row["output"] * 15.0) / 1e6
    assert row["cost_usd"] == pytest.approx(expected) and reply.usage.cache_write_1h == row["cache_write"]
    assert (
        row["litellm_cost_usd"] == pytest.approx(row["cost_usd"]) and not row["cost_mismatch"]
    )  # litellm agrees


def test_a_five_minute_tier_writes_at_the_5m_price(fake_anthropic, tmp_path):
    gw, calls = gateway_for(fake_anthropic, tmp_path)
    gw.call(role="coder", tier="cheap", messages=conversation(1))
    (row,) = read_jsonl(calls)
    assert "ttl" not in fake_anthropic.seen[0].body["system"][-1]["cache_control"]
    assert row["cache_ttl"] == "5m" and row["cache_write_1h"] == 0 and row["cache_write"] > 0
    assert row["cost_usd"] == pytest.approx(
        (row["input_uncached"] * 3.0 + row["cache_write"] * 3.75 + row["output"] * 15.0) / 1e6
    )


def test_an_old_price_sheet_without_a_1h_price_derives_it_as_twice_input():
    price = ModelPrice.model_validate({"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75})
    assert price.cache_write_1h == 6.0


def test_records_carry_each_breakpoints_position_and_prefix_hash(fake_anthropic, tmp_path):
    gw, calls = gateway_for(fake_anthropic, tmp_path)
    first, second = conversation(2), conversation(3)
    gw.call(role="coder", tier="cheap", messages=first, conversation="c")
    gw.call(role="coder", tier="cheap", messages=second, conversation="c")
    changed = [{"role": "system", "content": "Another system prompt. " * 200}, *second[1:]]
    gw.call(role="coder", tier="cheap", messages=changed, conversation="c")
    a, b, c = read_jsonl(calls)
    for row in (a, b, c):
        total = row["input_uncached"] + row["cache_read"] + row["cache_write"]
        assert len(row["cache_breakpoints"]) == len(row["cache_prefix_hashes"]) == 2  # system + newest
        assert row["cache_breakpoints"][-1] == total  # the newest message: the provider's own count
        assert 0 < row["cache_breakpoints"][0] < total
    # the second call's lookback holds the first call's newest-message prefix, at about its size
    # (an earlier boundary's position is the token_counter estimate scaled to the exact total)
    sizes = {h: n for n, h in b["cache_lookback"]}
    assert sizes[a["cache_prefix_hashes"][-1]] == pytest.approx(a["cache_breakpoints"][-1], rel=0.05)
    assert b["cache_read"] == a["cache_breakpoints"][-1]  # what the provider read is that prefix
    assert a["cache_prefix_hashes"][0] == b["cache_prefix_hashes"][0]  # same system prompt
    assert c["cache_prefix_hashes"][0] != b["cache_prefix_hashes"][0]  # a changed one is seen
