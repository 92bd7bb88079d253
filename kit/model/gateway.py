"""The gateway: the only module that imports litellm.

One call = role + tier + messages + either tools (native tool calls) or a response schema (a
pydantic model, sent as a JSON-schema ``response_format``). It returns the text, the tool calls or
the parsed object, and a :class:`~kit.usage.Usage`, and appends one line per attempt to the run's
``calls.jsonl`` as it happens. Cost comes from the profile's price sheet; where litellm knows the
model, litellm's own figure is recorded beside it and a disagreement over 1 % is flagged.

Choices made here:

* **One retry policy, the kit's** (:class:`~kit.config.RetryPolicy`): litellm is called with
  ``max_retries=0`` so the provider SDKs never retry behind the kit's back; every attempt is a
  row in ``calls.jsonl``; a transient failure waits for the provider's ``retry-after-ms`` /
  ``Retry-After`` (litellm's header parser), else an exponential backoff; 529 "overloaded" counts
  as transient like 429.
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
* **Offline**: litellm's remote fetches (model cost map, other catalogs) are switched off before
  it is imported (``LITELLM_LOCAL_MODEL_COST_MAP``, ``LITELLM_OFFLINE_MODE``): prices and model
  facts come from the pinned package, the same online and offline.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

# Before litellm is imported: never fetch the cost map or any other catalog over the network.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "true"

import litellm  # noqa: E402
import openai  # noqa: E402
from litellm import CustomLLM  # noqa: E402
from litellm._internal_context import internal_sub_call  # noqa: E402 - see _quiet_logging
from litellm.types.utils import ModelResponse  # noqa: E402
from pydantic import BaseModel, ValidationError  # noqa: E402

from kit.config import ActionMode, ModelSpec, PriceSheet, Profile, RetryPolicy, Tier  # noqa: E402
from kit.errors import ConfigError, MissingKeyError, ModelError  # noqa: E402
from kit.model import scripted
from kit.model.actions import strip_fence  # noqa: E402
from kit.records.recorder import RunRecorder
from kit.records.schema import CallRecord, utc_now  # noqa: E402
from kit.secrets import Redactor  # noqa: E402
from kit.usage import Usage, normalise, priced  # noqa: E402

litellm.suppress_debug_info = True
litellm.drop_params = True  # e.g. temperature on models that refuse it

TRANSIENT = (
    litellm.RateLimitError,
    litellm.InternalServerError,
    litellm.ServiceUnavailableError,
    litellm.APIConnectionError,
    litellm.Timeout,
    litellm.BadGatewayError,
)
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 529})  # plus every 5xx
COST_TOLERANCE = 0.01
# litellm's cache_control_injection_points: the system prompt and the newest message.
CACHE_POINTS: list[dict[str, Any]] = [
    {"location": "message", "role": "system"},
    {"location": "message", "index": -1},
]
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


litellm.custom_provider_map = [p for p in litellm.custom_provider_map if p.get("provider") != "scripted"] + [
    {"provider": "scripted", "custom_handler": _ScriptedHandler()}
]
litellm.utils.custom_llm_setup()


# --------------------------------------------------------------------------- results


class EmptyReply(Exception):
    """A 200 reply with nothing in it (no choices, or no text and no tool call)."""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    error: str | None = None  # arguments were not a JSON object


@dataclass
class Reply:
    content: str | None
    tool_calls: list[ToolCall]
    usage: Usage
    latency_s: float
    model: str
    parsed: BaseModel | None = None
    parse_error: str | None = None
    raw_usage: dict[str, Any] = field(default_factory=dict)

    @property
    def message(self) -> dict[str, Any]:
        """The assistant message to append to a conversation (OpenAI shape)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": json.dumps(tc.arguments)},
                }
                for tc in self.tool_calls
            ]
        return msg


@dataclass
class _Call:
    """The fixed facts of one gateway call (shared by its attempts)."""

    role: str
    tier: str
    spec: ModelSpec
    target: _Target
    schema: type[BaseModel] | None
    conversation: str | None
    action_mode: str | None

    def record(
        self, attempt: int, started_at: str, latency: float, *, usage: Usage | None = None, **fields: Any
    ) -> CallRecord:
        tokens = usage.model_dump() if usage is not None else {}
        return CallRecord(
            run_id="",
            role=self.role,
            tier=self.tier,
            model=self.spec.model,
            attempt=attempt,
            latency_s=latency,
            started_at=started_at,
            action_mode=self.action_mode,
            conversation=self.conversation,
            **tokens,
            **fields,
        )


@dataclass
class _Target:
    """Where a tier's calls really go."""

    model: str  # as passed to litellm
    kwargs: dict[str, Any]
    known_to_litellm: bool


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
        self._targets: dict[str, _Target] = {}
        self.redact = Redactor.for_profile(profile)  # a provider error may echo the key

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

    def _target(self, spec: ModelSpec) -> _Target:
        if spec.model in self._targets:
            return self._targets[spec.model]
        kwargs: dict[str, Any] = dict(spec.extra)
        if spec.api_base:
            kwargs["api_base"] = spec.api_base
        if spec.model.startswith(EMBEDDED_PREFIX):
            from kit.model.embedded import ensure_server

            server = ensure_server()
            target = _Target(
                f"openai/{server.alias}", {**kwargs, "api_base": server.api_base, "api_key": "local"}, False
            )
        elif spec.model.startswith(SCRIPTED_PREFIX):
            target = _Target(spec.model, kwargs, False)
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
            target = _Target(spec.model, kwargs, spec.model in litellm.model_cost or _known(spec.model))
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
        kwargs: dict[str, Any] = dict(target.kwargs)
        kwargs["timeout"] = spec.timeout_s
        kwargs["max_retries"] = 0  # the kit's retry loop is the only one: every attempt recorded
        kwargs["max_tokens"] = max_tokens or spec.max_output_tokens
        if spec.temperature is not None:
            kwargs["temperature"] = spec.temperature
        if tools:
            kwargs["tools"] = tools
        if schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
            }
        elif json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "action", "schema": json_schema},
            }
        if _wants_cache_breakpoints(spec):
            kwargs["cache_control_injection_points"] = [dict(p) for p in CACHE_POINTS]

        call = _Call(role, tier, spec, target, schema, conversation, action_mode)
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

    def _call_with_retries(
        self, call: _Call, messages: list[dict[str, Any]], kwargs: dict[str, Any]
    ) -> Reply:
        attempts = self.retry.max_retries + 1
        for attempt in range(1, attempts + 1):
            started_at = utc_now()
            t0 = time.monotonic()
            failure: Exception
            try:
                with _quiet_logging():
                    response = litellm.completion(model=call.target.model, messages=messages, **kwargs)
            except Exception as exc:  # noqa: BLE001 - every failure is recorded, then classified
                latency = time.monotonic() - t0
                self._record(
                    call.record(attempt, started_at, latency, ok=False, error=self.redact(_describe(exc)))
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
            raise self.redact.error(_model_error(failure, call.spec, attempt, transient)) from failure
        raise AssertionError("unreachable")  # pragma: no cover

    def _finish(
        self,
        call: _Call,
        response: Any,
        messages: list[dict[str, Any]],
        kwargs: dict[str, Any],
        attempt: int,
        latency: float,
        started_at: str,
    ) -> Reply:
        raw = _usage_dict(response)
        choice = response.choices[0] if response.choices else None
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None) if message is not None else None
        tool_calls = [_tool_call(tc) for tc in (getattr(message, "tool_calls", None) or [])]
        estimated = not (_int(raw.get("prompt_tokens")) or _int(raw.get("completion_tokens")))
        if estimated:
            tokens = self._estimate(call.spec, messages, kwargs.get("tools"), content, tool_calls)
        else:
            tokens = normalise(raw)
        usage = priced(tokens, self.price_sheet.get(call.spec.price_key))
        empty = _emptiness(response, content, tool_calls)
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
                cost_mismatch=litellm_cost is not None and _disagrees(usage.cost_usd, litellm_cost),
                raw_usage=raw,
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

    def _record(self, record: CallRecord) -> None:
        if self.recorder is not None:
            self.recorder.call(record)


# --------------------------------------------------------------------------- helpers


def parse_structured(content: str | None, schema: type[BaseModel]) -> tuple[BaseModel | None, str | None]:
    """Validate a model's JSON answer against ``schema``; tolerate a fenced ```json block."""
    text = strip_fence(content)
    try:
        return schema.model_validate_json(text), None
    except ValidationError as e:
        return None, _short(e, 600)


def _wants_cache_breakpoints(spec: ModelSpec) -> bool:
    if spec.cache_breakpoints is not None:
        return spec.cache_breakpoints
    m = spec.model.lower()
    return "claude" in m or m.startswith("anthropic/")


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt: rate limits, overload (529), 5xx, timeouts, resets, empty replies."""
    if isinstance(exc, (*TRANSIENT, EmptyReply)):
        return True
    if isinstance(exc, litellm.AuthenticationError | litellm.BadRequestError | ModelError):
        return False
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in TRANSIENT_STATUS or status >= 500)


def retry_delay(exc: BaseException, attempt: int, policy: RetryPolicy) -> float:
    """Seconds to wait before the next attempt: the provider's ``retry-after-ms`` or
    ``Retry-After`` (seconds or an HTTP date, parsed by litellm), else exponential backoff; never
    more than ``policy.max_backoff_s``."""
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    wait: float | None = None
    if headers is not None:
        try:
            wait = float(headers.get("retry-after-ms") or "") / 1000
        except ValueError:
            wait = None
        if wait is None and headers.get("retry-after"):
            seconds = litellm.utils._get_retry_after_from_exception_header(headers)
            wait = float(seconds) if seconds is not None and seconds >= 0 else None
    if wait is None or wait < 0:
        wait = policy.backoff_s * 2 ** (attempt - 1)
    return min(wait, policy.max_backoff_s)


def _emptiness(response: Any, content: str | None, tool_calls: list[ToolCall]) -> str | None:
    """Why a 200 reply is unusable, or None when it has text or a tool call."""
    if not getattr(response, "choices", None):
        return "the reply had no choices"
    if not tool_calls and not (content or "").strip():
        return "the reply had no text and no tool call"
    return None


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    code = f" [{status}]" if isinstance(status, int) else ""
    return f"{type(exc).__name__}{code}: {_short(exc)}"


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _quiet_logging() -> contextlib.AbstractContextManager[None]:
    """Skip litellm's success logging (a background thread that recomputes the cost and builds a
    logging payload per call) when no litellm callback is configured: the kit records every call
    itself. The pinned litellm only submits that work when the call is not marked internal."""
    if litellm.callbacks or litellm.success_callback or litellm._async_success_callback:
        return contextlib.nullcontext()
    return internal_sub_call()


def _litellm_cost(response: Any, model: str) -> float:
    """litellm's own cost of ``response``: the figure it computed during the call (hidden params),
    else computed now."""
    cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
    if cost is None:
        cost = litellm.completion_cost(completion_response=response, model=model)
    return float(cost)


def _known(model: str) -> bool:
    try:
        litellm.get_model_info(model)
        return True
    except Exception:  # noqa: BLE001
        return False


def _usage_dict(response: Any) -> dict[str, Any]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return {}
    data = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
    return {k: v for k, v in data.items() if v is not None}


def _tool_call(tc: Any) -> ToolCall:
    fn = getattr(tc, "function", None) or tc.get("function", {})
    name = getattr(fn, "name", None) or (fn.get("name") if isinstance(fn, dict) else "") or ""
    raw_args = getattr(fn, "arguments", None) if not isinstance(fn, dict) else fn.get("arguments")
    tc_id = (
        getattr(tc, "id", None) or (tc.get("id") if isinstance(tc, dict) else None) or uuid.uuid4().hex[:8]
    )
    try:
        args = json.loads(raw_args) if isinstance(raw_args, str) and raw_args.strip() else (raw_args or {})
        if not isinstance(args, dict):
            return ToolCall(tc_id, name, {}, error="arguments must be a JSON object")
        return ToolCall(tc_id, name, args)
    except json.JSONDecodeError as e:
        return ToolCall(tc_id, name, {}, error=f"arguments are not valid JSON: {e}")


def _disagrees(ours: float, theirs: float) -> bool:
    scale = max(abs(ours), abs(theirs))
    return scale > 0 and abs(ours - theirs) / scale > COST_TOLERANCE


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _model_error(exc: BaseException, spec: ModelSpec, attempts: int, transient: bool) -> ModelError:
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, litellm.AuthenticationError):
        return MissingKeyError(
            f"{spec.model}: the provider rejected the API key ({_short(exc, 160)})",
            f"check {spec.api_key_env or 'the provider key'} or pick --profile local",
        )
    if transient:
        return ModelError(
            f"{spec.model}: gave up after {attempts} attempts: {_describe(exc)[:240]}",
            "the provider is failing or rate-limiting; rerun later -- finished runs are kept and skipped",
        )
    return ModelError(
        f"{spec.model}: {type(exc).__name__}: {_short(exc, 300)}",
        "check the model string and options in the profile",
    )
