"""The scripted model: a litellm custom provider (``scripted/<name>``) that replays responses.

For tests and for validating the pipeline -- never a benchmark result. A script is a list, a
generator or a callable; each item it yields may be

* a ``str``                      -> assistant text;
* a ``dict``                     -> ``{"content", "tool_calls": [{"name", "arguments"}], "usage",
  "latency_s"}`` (any subset);
* a pydantic model instance      -> its JSON as the content (structured output);
* a :class:`ScriptedReply`       -> all of the above, explicitly;
* an ``Exception`` instance      -> raised as the provider error (e.g. ``litellm.RateLimitError``).

A callable receives a :class:`Request` (messages, tools, response schema, and the gateway's call
context: role, tier, run, task, workspace, action mode) and returns one of the above.

Usage is settable per reply (``prompt_tokens``, ``completion_tokens``, ``cached_tokens``,
``cache_write_tokens``). When not set, tokens are estimated at 4 characters per token and the part
of the prompt shared with the previous request of the same conversation is reported as cache read,
the way a provider's prefix cache would.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Any

from pydantic import BaseModel

from kit.errors import ModelError
from kit.model.script_io import Request, ScriptedReply

__all__ = [
    "CALL_CONTEXT",
    "Request",
    "ScriptedReply",
    "Script",
    "complete",
    "get_script",
    "register",
    "to_reply",
]

# Set by the gateway around each call so that policies can see who is calling.
CALL_CONTEXT: ContextVar[dict[str, Any] | None] = ContextVar("orchbench_call_context", default=None)


Source = Iterable[Any] | Callable[[Request], Any]


class Script:
    """A thread-safe source of replies plus the prefix-cache simulation state."""

    def __init__(self, source: Source) -> None:
        self._callable = source if callable(source) and not isinstance(source, Iterable) else None
        self._iter: Iterator[Any] | None = None if self._callable else iter(source)  # type: ignore[arg-type]
        self._lock = threading.Lock()
        self._count = itertools.count()
        self._previous: dict[str, str] = {}
        self.requests: list[Request] = []

    def next(self, request: Request) -> Any:
        if self._callable is not None:
            return self._callable(request)
        with self._lock:
            try:
                return next(self._iter)  # type: ignore[arg-type]
            except StopIteration:
                raise ModelError(
                    f"scripted model ran out of replies after {request.index} calls",
                    "give the script more replies, or a callable policy",
                ) from None

    def cached_prefix_tokens(self, conversation: str, prompt_text: str) -> int:
        with self._lock:
            previous = self._previous.get(conversation, "")
            self._previous[conversation] = prompt_text
        lo, hi = 0, min(len(previous), len(prompt_text))
        while lo < hi:  # longest shared prefix by bisection (slice compares run in C)
            mid = (lo + hi + 1) // 2
            if previous[:mid] == prompt_text[:mid]:
                lo = mid
            else:
                hi = mid - 1
        shared = lo
        return shared // 4


_scripts: dict[str, Script] = {}
_registry_lock = threading.Lock()


def clear_registry() -> None:
    """Forget every registered script (the tests reset it between tests)."""
    with _registry_lock:
        _scripts.clear()


def register(source: Source, name: str | None = None) -> str:
    """Register a script; returns the litellm model string ``scripted/<name>``."""
    name = name or f"s{uuid.uuid4().hex[:10]}"
    with _registry_lock:
        _scripts[name] = Script(source)
    return f"scripted/{name}"


def get_script(model: str) -> Script:
    name = model.split("/", 1)[-1]
    with _registry_lock:
        script = _scripts.get(name)
    if script is None:
        from kit.model import oracle, policies  # built-in named policies (oracle, done, oracle-all)

        factories = {**policies.POLICIES, oracle.NAME: oracle.Oracle}
        factory = factories.get(name)
        if factory is None:
            raise ModelError(
                f"no scripted model named {name!r}",
                f"register one with kit.model.scripted.register(), or use one of: "
                f"{', '.join(sorted(factories))}",
            )
        with _registry_lock:
            script = _scripts.setdefault(name, Script(factory()))
    return script


def to_reply(item: Any) -> ScriptedReply:
    if isinstance(item, ScriptedReply):
        return item
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, str):
        return ScriptedReply(content=item)
    if isinstance(item, BaseModel):
        return ScriptedReply(content=item.model_dump_json())
    if isinstance(item, dict):
        return ScriptedReply(
            content=item.get("content"),
            tool_calls=list(item.get("tool_calls") or []),
            usage=item.get("usage"),
            latency_s=float(item.get("latency_s", 0.0)),
        )
    raise ModelError(f"scripted model: cannot turn {type(item).__name__} into a reply")


def complete(model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any]) -> dict[str, Any]:
    """Produce an OpenAI-shaped response dict for one request (used by the litellm handler)."""
    script = get_script(model)
    context = dict(CALL_CONTEXT.get() or {})
    request = Request(
        messages=messages,
        tools=optional_params.get("tools"),
        response_format=optional_params.get("response_format"),
        context=context,
        index=next(script._count),
    )
    script.requests.append(request)
    reply = to_reply(script.next(request))
    if reply.latency_s:
        time.sleep(reply.latency_s)

    prompt_text = json.dumps(messages, sort_keys=True, default=str)
    if optional_params.get("tools"):
        prompt_text = json.dumps(optional_params["tools"], sort_keys=True) + prompt_text
    out_text = (reply.content or "") + json.dumps(reply.tool_calls, default=str)
    usage = dict(reply.usage or {})
    prompt_tokens = usage.get("prompt_tokens", max(1, len(prompt_text) // 4))
    completion_tokens = usage.get("completion_tokens", max(1, len(out_text) // 4))
    # the prompt is remembered even when the reply sets its cached tokens: the next call shares it
    shared = script.cached_prefix_tokens(context.get("conversation", "default"), prompt_text)
    cached = usage["cached_tokens"] if "cached_tokens" in usage else min(shared, prompt_tokens)
    cache_write = usage.get("cache_write_tokens", 0)

    tool_calls = [
        {
            "id": tc.get("id") or f"call_{uuid.uuid4().hex[:8]}",
            "type": "function",
            "function": {
                "name": tc["name"],
                "arguments": tc["arguments"]
                if isinstance(tc.get("arguments"), str)
                else json.dumps(tc.get("arguments") or {}),
            },
        }
        for tc in reply.tool_calls
    ]
    usage_payload: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    if cache_write:
        usage_payload["prompt_tokens_details"]["cache_creation_tokens"] = cache_write
    return {
        "content": reply.content,
        "tool_calls": tool_calls,
        "usage": usage_payload,
    }


def __getattr__(name: str) -> object:  # names renamed in the layout move, for one release (kit.aliases)
    from kit import aliases

    return aliases.renamed(__name__, name)
