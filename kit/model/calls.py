"""The fixed facts of one gateway call: where it goes, what litellm is sent, and the ``calls.jsonl``
row each of its attempts writes (see ``docs/records.md``, ``## calls.jsonl``).

Nothing here talks to litellm; :class:`kit.model.gateway.Gateway` resolves the :class:`Target` and
sends the options :func:`request_options` builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from kit.config import ModelSpec
from kit.records.schema import CallRecord
from kit.usage import Usage

#: Above this relative gap, the kit's cost and litellm's disagree (``cost_mismatch`` in calls.jsonl).
COST_TOLERANCE = 0.01
#: litellm's ``cache_control_injection_points``: the system prompt and the newest message.
CACHE_POINTS: list[dict[str, Any]] = [
    {"location": "message", "role": "system"},
    {"location": "message", "index": -1},
]


@dataclass
class Target:
    """Where a tier's calls really go."""

    model: str  # as passed to litellm
    kwargs: dict[str, Any]
    known_to_litellm: bool


@dataclass
class Call:
    """The fixed facts of one gateway call (shared by its attempts)."""

    role: str
    tier: str
    spec: ModelSpec
    target: Target
    schema: type[BaseModel] | None
    conversation: str | None
    action_mode: str | None

    def record(
        self, attempt: int, started_at: str, latency: float, *, usage: Usage | None = None, **fields: Any
    ) -> CallRecord:
        """The ``calls.jsonl`` row of one attempt (the recorder fills in the run id)."""
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


def request_options(
    spec: ModelSpec,
    target: Target,
    *,
    tools: list[dict[str, Any]] | None,
    schema: type[BaseModel] | None,
    json_schema: dict[str, Any] | None,
    max_tokens: int | None,
) -> dict[str, Any]:
    """The keyword arguments of ``litellm.completion`` (besides model and messages) for one call."""
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
    if wants_cache_breakpoints(spec):
        points = [dict(p) for p in CACHE_POINTS]
        if spec.cache_ttl is not None:  # litellm copies `control` onto the marked block as cache_control
            for p in points:
                p["control"] = {"type": "ephemeral", "ttl": spec.cache_ttl}
        kwargs["cache_control_injection_points"] = points
    return kwargs


def wants_cache_breakpoints(spec: ModelSpec) -> bool:
    """The tier's ``cache_breakpoints`` when set, else on for Claude models."""
    if spec.cache_breakpoints is not None:
        return spec.cache_breakpoints
    m = spec.model.lower()
    return "claude" in m or m.startswith("anthropic/")


def disagrees(ours: float, theirs: float) -> bool:
    """The two costs differ by more than :data:`COST_TOLERANCE` of the larger."""
    scale = max(abs(ours), abs(theirs))
    return scale > 0 and abs(ours - theirs) / scale > COST_TOLERANCE
