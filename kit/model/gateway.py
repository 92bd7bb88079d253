"""The gateway: the one door to models (with :mod:`kit.model.litellm_private`, the only importers of
litellm).

One call = role + tier + messages + either tools (native tool calls) or a response schema (a
pydantic model, sent as a JSON-schema ``response_format``). It returns a
:class:`~kit.model.replies.Reply` -- the text, the tool calls or the parsed object, and a
:class:`~kit.usage.Usage` -- and appends one line per attempt to the run's ``calls.jsonl`` as it
happens (see ``docs/records.md``). Cost comes from the profile's price sheet; where litellm knows the
model, litellm's own figure is recorded beside it and a disagreement over 1 % is flagged.

Choices made here (``docs/strategies.md``, "Where the kit chooses"):

* **One retry policy, the kit's** (:mod:`kit.model.retry`): litellm is called with
  ``max_retries=0`` so the provider SDKs never retry behind the kit's back; every attempt is a
  row in ``calls.jsonl``.
* **An empty reply is a failed attempt**: no choices, or no text and no tool call, is recorded
  as ``ok=false`` (with the tokens it was billed) and retried, then a :class:`ModelError` -- never
  a finish. A reply the SDK cannot parse surfaces as a litellm error and is retried the same way.
  (A schema answer that does not validate is the agent's business: it gets a format error.)
* **Missing usage is estimated, and says so**: a reply whose usage is absent or all zeros is
  recorded with litellm's ``token_counter`` estimate and ``usage_estimated: true``.
* **Cache breakpoints** go through litellm's ``cache_control_injection_points`` (system prompt and
  the newest message, whatever its role), so the marker lands where the provider accepts it
  (e.g. on an Anthropic ``tool_result`` block, not inside its content). On by default for Claude;
  a tier turns it on or off with ``cache_breakpoints``.
* **Offline**: importing :mod:`kit.model.litellm_private` first switches litellm's remote fetches
  off before litellm is imported: prices and model facts come from the pinned package, the same
  online and offline.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

from kit.model import litellm_private  # first: it switches litellm offline, then imports it

# isort: split
import litellm
import openai
from litellm import CustomLLM
from litellm.types.utils import ModelResponse
from pydantic import BaseModel

from kit.caching_rules import DEFAULT_TTL
from kit.config import ActionMode, ModelSpec, PriceSheet, Profile, RetryPolicy, Tier
from kit.errors import ConfigError, MissingKeyError
from kit.model import scripted
from kit.model.calls import CACHE_POINTS, Call, Target, disagrees, request_options
from kit.model.prefixes import PrefixCounter
from kit.model.replies import Reply, ToolCall, as_int, emptiness, parse_structured, tool_call, usage_dict
from kit.model.retry import (
    TRANSIENT,
    TRANSIENT_STATUS,
    EmptyReply,
    describe,
    is_transient,
    model_error,
    retry_delay,
)
from kit.records.recorder import RunRecorder
from kit.records.schema import CallRecord, encodable, utc_now
from kit.secrets import Redactor
from kit.usage import Usage, normalise, priced

__all__ = [
    "CACHE_POINTS",
    "EMBEDDED_ACTION_MODE",
    "EMBEDDED_PREFIX",
    "SCRIPTED_PREFIX",
    "TRANSIENT",
    "TRANSIENT_STATUS",
    "EmptyReply",
    "Gateway",
    "Reply",
    "ToolCall",
    "is_transient",
    "parse_structured",
    "retry_delay",
]

litellm.suppress_debug_info = True
litellm.drop_params = True  # e.g. temperature on models that refuse it

EMBEDDED_PREFIX = "embedded/"
SCRIPTED_PREFIX = "scripted/"
# What the embedded model does best (measured with tests/benchmarks/action_modes.py; see README).
EMBEDDED_ACTION_MODE: ActionMode = "text"


# --------------------------------------------------------------------------- scripted provider


class _ScriptedHandler(CustomLLM):
    """litellm custom provider ``scripted/<name>`` backed by :mod:`kit.model.scripted`."""

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        optional = dict(kwargs.get("optional_params") or {})
        try:
            out = scripted.complete(model, messages, optional)
        except openai.OpenAIError:
            raise  # an injected provider error: retried (or not) like the real one
        except Exception as exc:  # a bug in the policy is not a provider outage: fail once, clearly
            raise litellm.BadRequestError(
                message=f"scripted policy failed: {type(exc).__name__}: {exc}",
                model=model,
                llm_provider="scripted",
            ) from exc
        message: dict[str, Any] = {"role": "assistant", "content": out["content"]}
        if out["tool_calls"]:
            message["tool_calls"] = out["tool_calls"]
        return ModelResponse(
            id=f"scripted-{uuid.uuid4().hex[:8]}",
            model=model,
            choices=[
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if out["tool_calls"] else "stop",
                    "message": message,
                }
            ],
            usage=out["usage"],
        )


litellm_private.register_provider("scripted", _ScriptedHandler())


# --------------------------------------------------------------------------- the gateway


class Gateway:
    """Calls models for one run and records every attempt."""

    def __init__(
        self,
        profile: Profile,
        price_sheet: PriceSheet,
        recorder: RunRecorder | None = None,
        *,
        context: dict[str, Any] | None = None,
        max_retries: int | None = None,
        backoff_s: float | None = None,
        max_backoff_s: float | None = None,
        sleep: Any = time.sleep,
    ) -> None:
        """Retry settings come from ``profile.retry`` unless given here."""
        self.profile = profile
        self.price_sheet = price_sheet
        self.recorder = recorder
        self.context = dict(context or {})
        policy = profile.retry
        self.retry = RetryPolicy(
            max_retries=policy.max_retries if max_retries is None else max_retries,
            backoff_s=policy.backoff_s if backoff_s is None else backoff_s,
            max_backoff_s=policy.max_backoff_s if max_backoff_s is None else max_backoff_s,
        )
        self._sleep = sleep
        self._targets: dict[str, Target] = {}
        self.redact = Redactor.for_profile(profile)  # a provider error may echo the key
        self._prefixes = PrefixCounter(_count_message, _count_text)  # breakpoint positions, for the records

    # -- per-tier facts --------------------------------------------------------------------
    def spec(self, tier: Tier) -> ModelSpec:
        return self.profile.tiers[tier]

    def action_mode(self, tier: Tier) -> ActionMode:
        spec = self.spec(tier)
        if spec.action_mode:
            return spec.action_mode
        return EMBEDDED_ACTION_MODE if spec.model.startswith(EMBEDDED_PREFIX) else "native"

    def context_window(self, tier: Tier) -> int:
        spec = self.spec(tier)
        if spec.model.startswith(EMBEDDED_PREFIX):
            from kit.model.embedded import DEFAULT_CTX

            return min(spec.context_window, DEFAULT_CTX)
        return spec.context_window

    def preflight(self) -> None:
        """Resolve every tier's model now (keys checked, embedded server started), so a missing key
        or a model litellm does not know fails once, before any run, instead of inside every run.

        A real provider's model must be known to litellm (``get_model_info``) or marked
        ``custom: true`` in the profile (its cost then comes from the price sheet alone)."""
        for tier in self.profile.tiers:
            spec = self.spec(tier)
            target = self._target(spec)
            local = spec.model.startswith((EMBEDDED_PREFIX, SCRIPTED_PREFIX))
            if not (local or target.known_to_litellm or spec.custom):
                raise ConfigError(
                    f"profile {self.profile.name!r}, tier {tier}: litellm does not know the model "
                    f"{spec.model!r}",
                    "fix the model string (provider/model, as litellm spells it), or, for a model "
                    "litellm cannot know (fine-tune, self-hosted server), set `custom: true` on the "
                    "tier and price it in the price sheet",
                )

    def count_tokens(self, tier: Tier, messages: list[dict[str, Any]]) -> int:
        """litellm's estimate of the prompt tokens of ``messages`` for the tier's model."""
        return int(litellm.token_counter(model=self._token_model(self.spec(tier)), messages=messages))

    def _token_model(self, spec: ModelSpec) -> str:
        return spec.model if not spec.model.startswith((EMBEDDED_PREFIX, SCRIPTED_PREFIX)) else ""

    def _target(self, spec: ModelSpec) -> Target:
        if spec.model in self._targets:
            return self._targets[spec.model]
        kwargs: dict[str, Any] = dict(spec.extra)
        if spec.api_base:
            kwargs["api_base"] = spec.api_base
        if spec.model.startswith(EMBEDDED_PREFIX):
            from kit.model.embedded import ensure_server

            server = ensure_server()
            target = Target(
                f"openai/{server.alias}", {**kwargs, "api_base": server.api_base, "api_key": "local"}, False
            )
        elif spec.model.startswith(SCRIPTED_PREFIX):
            target = Target(spec.model, kwargs, False)
        else:
            if spec.api_key_env:
                key = os.environ.get(spec.api_key_env)
                if not key:
                    raise MissingKeyError(
                        f"model {spec.model!r} needs {spec.api_key_env}, which is not set",
                        f"export {spec.api_key_env}=... or pick --profile local",
                    )
                kwargs["api_key"] = key
            elif "api_key" not in kwargs and not spec.api_base:
                env = litellm.validate_environment(model=spec.model)
                if not env.get("keys_in_environment", True):
                    missing = ", ".join(env.get("missing_keys") or []) or "its API key"
                    raise MissingKeyError(
                        f"model {spec.model!r} needs {missing}, which is not set",
                        f"export {missing.split(',')[0]}=... or pick --profile local",
                    )
            target = Target(spec.model, kwargs, spec.model in litellm.model_cost or _known(spec.model))
        self._targets[spec.model] = target
        return target

    # -- the call ----------------------------------------------------------------------------
    def call(
        self,
        *,
        role: str,
        tier: Tier,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        schema: type[BaseModel] | None = None,
        conversation: str | None = None,
        max_tokens: int | None = None,
        action_mode: str | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> Reply:
        """One model call. ``schema`` (pydantic) is validated into ``Reply.parsed``; ``json_schema``
        (a raw JSON schema, e.g. the JSON-action schema) only constrains the output."""
        spec = self.spec(tier)
        target = self._target(spec)
        kwargs = request_options(
            spec, target, tools=tools, schema=schema, json_schema=json_schema, max_tokens=max_tokens
        )
        call = Call(role, tier, spec, target, schema, conversation, action_mode)
        token = scripted.CALL_CONTEXT.set(
            {
                **self.context,
                "role": role,
                "tier": tier,
                "conversation": conversation or role,
                "action_mode": action_mode,
                "schema": schema,
            }
        )
        try:
            return self._call_with_retries(call, messages, kwargs)
        finally:
            scripted.CALL_CONTEXT.reset(token)

    def _call_with_retries(self, call: Call, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> Reply:
        attempts = self.retry.max_retries + 1
        for attempt in range(1, attempts + 1):
            started_at = utc_now()
            t0 = time.monotonic()
            failure: Exception
            waiting = self.recorder.waiting(call.role) if self.recorder is not None else None
            try:
                try:
                    with litellm_private.quiet_logging():
                        response = litellm.completion(model=call.target.model, messages=messages, **kwargs)
                finally:
                    self._answered(waiting)
            except Exception as exc:  # noqa: BLE001 - every failure is recorded, then classified
                latency = time.monotonic() - t0
                self._record(
                    call.record(attempt, started_at, latency, ok=False, error=self.redact(describe(exc)))
                )
                failure = exc
            else:
                try:
                    latency = time.monotonic() - t0
                    return self._finish(call, response, messages, kwargs, attempt, latency, started_at)
                except EmptyReply as exc:  # already recorded, with the tokens it was billed
                    failure = exc
            transient = is_transient(failure)
            if transient and attempt < attempts:
                self._sleep(retry_delay(failure, attempt, self.retry))
                continue
            raise self.redact.error(model_error(failure, call.spec, attempt, transient)) from failure
        raise AssertionError("unreachable")  # pragma: no cover

    def _finish(
        self,
        call: Call,
        response: Any,
        messages: list[dict[str, Any]],
        kwargs: dict[str, Any],
        attempt: int,
        latency: float,
        started_at: str,
    ) -> Reply:
        raw = usage_dict(response)
        choice = response.choices[0] if response.choices else None
        message = getattr(choice, "message", None)
        content = encodable(getattr(message, "content", None) if message is not None else None)
        tool_calls = [tool_call(tc) for tc in (getattr(message, "tool_calls", None) or [])]
        estimated = not (as_int(raw.get("prompt_tokens")) or as_int(raw.get("completion_tokens")))
        if estimated:
            tokens = self._estimate(call.spec, messages, kwargs.get("tools"), content, tool_calls)
        else:
            tokens = normalise(raw)
        usage = priced(tokens, self.price_sheet.get(call.spec.price_key))
        empty = emptiness(response, content, tool_calls)
        litellm_cost = None
        if call.target.known_to_litellm and not estimated:
            try:
                litellm_cost = _litellm_cost(response, call.target.model)
            except Exception:  # noqa: BLE001 - litellm may not price every model
                litellm_cost = None
        self._record(
            call.record(
                attempt,
                started_at,
                latency,
                ok=empty is None,
                error=f"EmptyReply: {empty}" if empty else None,
                usage=usage,
                usage_estimated=estimated,
                litellm_cost_usd=litellm_cost,
                cost_mismatch=litellm_cost is not None and disagrees(usage.cost_usd, litellm_cost),
                raw_usage=raw,
                **self._cache_fields(call, messages, kwargs, None if estimated else tokens.input_total),
            )
        )
        if empty is not None:
            raise EmptyReply(empty)
        reply = Reply(
            content=content,
            tool_calls=tool_calls,
            usage=usage,
            latency_s=latency,
            model=call.spec.model,
            raw_usage=raw,
        )
        if call.schema is not None:
            reply.parsed, reply.parse_error = parse_structured(content, call.schema)
        return reply

    def _estimate(
        self,
        spec: ModelSpec,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        content: str | None,
        tool_calls: list[ToolCall],
    ) -> Usage:
        """Tokens of a reply that came without usage, by litellm's ``token_counter``."""
        model = self._token_model(spec)
        prompt = litellm.token_counter(model=model, messages=messages, tools=tools or None)
        text = (content or "") + "".join(tc.name + json.dumps(tc.arguments) for tc in tool_calls)
        output = litellm.token_counter(model=model, text=text) if text else 0
        return Usage(input_uncached=int(prompt), output=int(output))

    def _cache_fields(
        self, call: Call, messages: list[dict[str, Any]], kwargs: dict[str, Any], prompt_total: int | None
    ) -> dict[str, Any]:
        """Where the call's cache breakpoints sat (:mod:`kit.model.prefixes`); nothing when it had none."""
        if "cache_control_injection_points" not in kwargs:
            return {}
        model, ttl = self._token_model(call.spec), call.spec.cache_ttl or DEFAULT_TTL
        return self._prefixes.describe(model, messages, kwargs.get("tools"), prompt_total, ttl)

    def _answered(self, waiting: int | None) -> None:
        if waiting is not None and self.recorder is not None:
            self.recorder.answered(waiting)

    def _record(self, record: CallRecord) -> None:
        if self.recorder is not None:
            self.recorder.call(record)


# --------------------------------------------------------------------------- helpers


def _litellm_cost(response: Any, model: str) -> float:
    """litellm's own cost of ``response``: the figure it computed during the call, else computed now."""
    cost = litellm_private.hidden_response_cost(response)
    if cost is None:
        cost = litellm.completion_cost(completion_response=response, model=model)
    return float(cost)


def _count_message(model: str, message: dict[str, Any]) -> int:
    return int(litellm.token_counter(model=model, messages=[message]))


def _count_text(model: str, text: str) -> int:
    return int(litellm.token_counter(model=model, text=text))


def _known(model: str) -> bool:
    try:
        litellm.get_model_info(model)
        return True
    except Exception:  # noqa: BLE001
        return False
