"""Live: the embedded SmolLM2-135M served by llama.cpp on 127.0.0.1 (no network, no key)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from kit.config import load_profile
from kit.model.check import PREFIX
from kit.model.gateway import Gateway
from kit.records.recorder import RunRecorder
from kit.records.schema import read_jsonl

pytestmark = [pytest.mark.live, pytest.mark.slow]


class Answer(BaseModel):
    language: str
    lines: int


@pytest.mark.slow
def test_two_calls_with_a_shared_prefix_hit_the_prompt_cache(tmp_path):
    profile, sheet = load_profile("local")
    recorder = RunRecorder(tmp_path / "run", "live")
    gw = Gateway(profile, sheet, recorder)
    for i in (1, 2):
        gw.call(
            role="check",
            tier="cheap",
            messages=[{"role": "system", "content": PREFIX}, {"role": "user", "content": f"Say hi ({i})"}],
            max_tokens=8,
        )
    first, second = read_jsonl(recorder.run_dir / "calls.jsonl")
    assert first["ok"] and second["ok"]
    assert first["input_uncached"] + first["cache_read"] > 1000  # the ~1.5k-token prefix
    assert first["output"] > 0 and second["output"] > 0
    assert second["cache_read"] > 1000  # the prefix came from llama.cpp's prompt cache
    assert second["cost_usd"] < first["cost_usd"]  # cache reads are cheaper (illustrative sheet)
    assert second["raw_usage"]["prompt_tokens_details"]["cached_tokens"] == second["cache_read"]


def test_a_json_schema_call_returns_an_object_that_validates(tmp_path):
    profile, sheet = load_profile("local")
    gw = Gateway(profile, sheet, RunRecorder(tmp_path / "run", "live"))
    reply = gw.call(
        role="check",
        tier="medium",
        messages=[
            {"role": "user", "content": "Describe a Python hello-world: language and number of lines."}
        ],
        schema=Answer,
        max_tokens=48,
    )
    assert reply.parse_error is None, reply.content
    assert isinstance(reply.parsed, Answer)
