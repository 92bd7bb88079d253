"""The kit's retry policy (:mod:`kit.model.retry`): what is transient, how long to wait, and the error a
call ends with when the kit gives up."""

from __future__ import annotations

import httpx
import litellm
import openai
import pytest

from kit.config import ModelSpec, RetryPolicy
from kit.errors import MissingKeyError, ModelError
from kit.model.retry import EmptyReply, describe, is_transient, model_error, retry_delay, short

POLICY = RetryPolicy(max_retries=3, backoff_s=2.0, max_backoff_s=30.0)


def rate_limited(headers: dict[str, str] | None = None) -> litellm.RateLimitError:
    response = httpx.Response(429, headers=headers or {}, request=httpx.Request("POST", "https://x.invalid"))
    return litellm.RateLimitError("429 slow down", llm_provider="anthropic", model="m", response=response)


class StatusError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"status {status}")
        self.status_code = status


@pytest.mark.parametrize(
    "exc",
    [
        rate_limited(),
        litellm.InternalServerError("500", llm_provider="x", model="m"),
        litellm.Timeout("slow", model="m", llm_provider="x"),
        EmptyReply("the reply had no choices"),
        StatusError(529),
        StatusError(503),
        StatusError(408),
    ],
)
def test_transient_failures_are_retried(exc):
    assert is_transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        litellm.BadRequestError("bad", llm_provider="x", model="m"),
        litellm.AuthenticationError("no key", llm_provider="x", model="m"),
        ModelError("ran out of replies"),
        StatusError(404),
        ValueError("a bug"),
    ],
)
def test_other_failures_are_not(exc):
    assert not is_transient(exc)


def test_retry_after_ms_wins_then_retry_after_then_backoff():
    assert retry_delay(rate_limited({"retry-after-ms": "1500", "retry-after": "9"}), 1, POLICY) == 1.5
    assert retry_delay(rate_limited({"retry-after": "9"}), 1, POLICY) == 9.0
    assert retry_delay(rate_limited({"retry-after": "soon"}), 3, POLICY) == 8.0  # unreadable: 2 * 2**2
    assert [retry_delay(rate_limited(), a, POLICY) for a in (1, 2, 3)] == [2.0, 4.0, 8.0]


def test_no_wait_is_longer_than_the_cap():
    assert retry_delay(rate_limited({"retry-after": "600"}), 1, POLICY) == 30.0
    assert retry_delay(rate_limited(), 10, POLICY) == 30.0


def test_describe_gives_type_status_and_one_line():
    assert describe(StatusError(503)) == "StatusError [503]: status 503"
    assert describe(ValueError("a\n  b")) == "ValueError: a b"
    assert short(ValueError("a" * 200 + "z" * 200), 20) == "a" * 10 + " ... " + "z" * 5  # the end is kept


def test_model_error_says_what_to_do():
    spec = ModelSpec(model="anthropic/claude-sonnet-4-5", api_key_env="ANTHROPIC_API_KEY")
    given_up = model_error(rate_limited(), spec, 4, transient=True)
    assert "gave up after 4 attempts" in str(given_up) and "rerun later" in given_up.hint
    rejected = model_error(litellm.AuthenticationError("no", llm_provider="x", model="m"), spec, 1, False)
    assert isinstance(rejected, MissingKeyError) and "ANTHROPIC_API_KEY" in rejected.hint
    own = ModelError("scripted model ran out of replies")
    assert model_error(own, spec, 1, False) is own
    other = model_error(openai.OpenAIError("odd"), spec, 1, False)
    assert "OpenAIError: odd" in str(other) and "model string" in other.hint


def test_a_host_that_cannot_be_reached_gets_advice_that_fits_it():
    """An unresolvable host (no DNS, no network) or a closed port: waiting does not help, so the advice is
    the address or the network, never "rerun later" (issue 41: a lab run sent to the real provider from
    a machine without network was told to rerun later)."""
    import socket

    spec = ModelSpec(model="anthropic/claude-haiku-4-5", api_key_env="ANTHROPIC_API_KEY")
    cause = socket.gaierror(-3, "Temporary failure in name resolution")
    unresolved = litellm.APIConnectionError("Connection error.", llm_provider="anthropic", model="m")
    unresolved.__cause__ = cause
    err = model_error(unresolved, spec, 4, transient=True)
    assert "cannot be resolved" in err.hint and "rerun later" not in err.hint
    assert "anthropic's API" in err.hint and "gave up after 4 attempts" in str(err)
    local = ModelSpec(model="anthropic/claude-haiku-4-5", api_base="http://127.0.0.1:9")
    refused = litellm.APIConnectionError(
        "[Errno 111] Connection refused", llm_provider="anthropic", model="m"
    )
    err = model_error(refused, local, 4, transient=True)
    assert "nothing accepts connections at http://127.0.0.1:9" in err.hint and "rerun later" not in err.hint
    assert "rerun later" in model_error(rate_limited(), spec, 4, transient=True).hint  # a real outage: wait
