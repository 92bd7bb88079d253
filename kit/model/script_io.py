"""What a scripted model is asked and what it answers: the values :mod:`kit.model.scripted` passes to a
script and the built-in policies of :mod:`kit.model.policies` read.

A module of its own so that the policies and the scripted provider both import it, and neither
imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ScriptedReply:
    """One answer of a scripted model, explicitly (a script may also yield a str, dict or model)."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] | None = None
    latency_s: float = 0.0


@dataclass
class Request:
    """One request to a scripted model, as a callable script or policy receives it."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    response_format: dict[str, Any] | None
    context: dict[str, Any]
    index: int  # 0-based number of this request within the script

    @property
    def role(self) -> str:
        """The calling agent's role, from the gateway's call context."""
        return self.context.get("role", "")

    @property
    def first_user(self) -> str:
        """The text of the conversation's first user message (its brief or task)."""
        return next((_text(m.get("content")) for m in self.messages if m.get("role") == "user"), "")

    @property
    def last_user(self) -> str:
        """The text of the newest user or tool message."""
        for m in reversed(self.messages):
            if m.get("role") in ("user", "tool"):
                return _text(m.get("content"))
        return ""


def text_of(content: Any) -> str:
    """A message's text: a string as is, content blocks' texts joined."""
    return _text(content)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(_text(b.get("text")) if isinstance(b, dict) else str(b) for b in content)
    return str(content)
