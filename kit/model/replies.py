"""What a gateway call returns, and how a provider's response is read into it.

:class:`Reply` is the answer an agent gets back from :meth:`kit.model.gateway.Gateway.call`: the
text, the tool calls (:class:`ToolCall`), the parsed structured answer, and the priced
:class:`~kit.usage.Usage`. The helpers here read a litellm response object without importing litellm
(attribute access only), so they also accept a plain dict-shaped tool call.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from kit.model.actions import load_json, strip_fence
from kit.model.retry import short
from kit.records.schema import encodable
from kit.usage import Usage


@dataclass
class ToolCall:
    """One native tool call of a reply; ``error`` says why its arguments could not be read."""

    id: str
    name: str
    arguments: dict[str, Any]
    error: str | None = None  # arguments were not a JSON object


@dataclass
class Reply:
    """One successful model call, as the gateway returns it."""

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


def parse_structured(content: str | None, schema: type[BaseModel]) -> tuple[BaseModel | None, str | None]:
    """Validate a model's JSON answer against ``schema``; tolerate a fenced ```json block."""
    text = strip_fence(content)
    try:
        return schema.model_validate_json(text), None
    except ValidationError as e:
        return None, short(e, 600)


def emptiness(response: Any, content: str | None, tool_calls: list[ToolCall]) -> str | None:
    """Why a 200 reply is unusable, or None when it has text or a tool call."""
    if not getattr(response, "choices", None):
        return "the reply had no choices"
    if not tool_calls and not (content or "").strip():
        return "the reply had no text and no tool call"
    return None


def as_int(value: Any) -> int:
    """``value`` as an int; 0 when it is missing or not a number."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def usage_dict(response: Any) -> dict[str, Any]:
    """The response's usage block as a dict, without ``None`` fields (``{}`` when there is none)."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return {}
    data = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
    return {k: v for k, v in data.items() if v is not None}


def tool_call(tc: Any) -> ToolCall:
    """One tool call of a response (object or dict) as a :class:`ToolCall`."""
    fn = getattr(tc, "function", None) or tc.get("function", {})
    name = encodable(getattr(fn, "name", None) or (fn.get("name") if isinstance(fn, dict) else "") or "")
    raw_args = getattr(fn, "arguments", None) if not isinstance(fn, dict) else fn.get("arguments")
    tc_id = (
        getattr(tc, "id", None) or (tc.get("id") if isinstance(tc, dict) else None) or uuid.uuid4().hex[:8]
    )
    try:
        args = load_json(raw_args) if isinstance(raw_args, str) and raw_args.strip() else (raw_args or {})
        if not isinstance(args, dict):
            return ToolCall(tc_id, name, {}, error="arguments must be a JSON object")
        return ToolCall(tc_id, name, args)
    except ValueError as e:
        return ToolCall(tc_id, name, {}, error=f"arguments are not valid JSON: {e}")
