"""Where a call's cache breakpoints sit in its prompt, for the records (``calls.jsonl``: ``cache_ttl``,
``cache_breakpoints``, ``cache_prefix_hashes``, ``cache_lookback``) and the analysis's cache simulator
(:mod:`kit.analysis.cachesim`).

The gateway places breakpoints on the system prompt and the newest message
(:data:`kit.model.calls.CACHE_POINTS`). For each call this module gives

* the prompt-token position of each breakpoint (tokens from the start of the prompt up to and
  including the marked message; the tool list comes first, as Anthropic orders a prompt),
* a hash of the prefix up to each breakpoint (tools + messages, canonical JSON, chained), so a
  changed prefix -- a trimmed tool output, another system prompt or tool list -- is seen,
* every message boundary a cache lookup can match: the breakpoints and the boundaries up to
  :data:`~kit.caching_rules.LOOKBACK_BLOCKS` blocks before each, as ``[tokens, hash]``.

Token positions are litellm ``token_counter`` estimates per message (the counter is passed in: only
the gateway imports litellm), then scaled so the whole prompt equals the provider's own prompt count
(uncached + cache read + cache write) -- the last breakpoint, the newest message, is therefore
exact, and earlier ones are the estimate's share of the exact total. Blocks are counted as Anthropic
counts them: one per tool, one per system, user or tool message, and for an assistant message one
for its text (if any) plus one per tool call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from kit.caching_rules import LOOKBACK_BLOCKS

HASH_CHARS = 16
_MAX_REMEMBERED = 20_000


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def blocks_of(message: dict[str, Any]) -> int:
    """How many content blocks ``message`` becomes in an Anthropic request."""
    if message.get("role") != "assistant":
        return 1
    calls = len(message.get("tool_calls") or [])
    return max(1, calls + (1 if str(message.get("content") or "").strip() else 0))


def marked_messages(messages: list[dict[str, Any]]) -> list[int]:
    """Indexes of the messages the gateway's breakpoints mark: the system prompt(s) and the newest."""
    marked = [i for i, m in enumerate(messages) if m.get("role") == "system"]
    if messages and len(messages) - 1 not in marked:
        marked.append(len(messages) - 1)
    return marked


class PrefixCounter:
    """Counts tokens per message (remembering each message's count by its hash, so a growing
    conversation is not recounted from the start on every call) and describes a call's prefixes."""

    def __init__(
        self, count_message: Callable[[str, dict[str, Any]], int], count_text: Callable[[str, str], int]
    ):
        self._message = count_message
        self._text = count_text
        self._seen: dict[tuple[str, str], int] = {}

    def _count(self, model: str, key: str, fn: Callable[[], int], fallback: str) -> int:
        if (model, key) not in self._seen:
            if len(self._seen) > _MAX_REMEMBERED:
                self._seen.clear()
            try:
                self._seen[(model, key)] = int(fn())
            except Exception:  # noqa: BLE001 - a counter failure must not fail the call: chars/4
                self._seen[(model, key)] = max(1, len(fallback) // 4)
        return self._seen[(model, key)]

    def describe(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        prompt_total: int | None,
        ttl: str,
    ) -> dict[str, Any]:
        """The record fields of one call whose breakpoints the gateway placed."""
        h = hashlib.sha256(_canon(tools or []).encode())
        tools_text = _canon(tools) if tools else ""
        est = (
            self._count(model, h.hexdigest(), lambda: self._text(model, tools_text), tools_text)
            if tools
            else 0
        )
        blocks = len(tools or [])
        points: list[tuple[int, float, str]] = []  # (blocks so far, estimated tokens, hash) per boundary
        for msg in messages:
            text = _canon(msg)
            digest = hashlib.sha256(text.encode()).hexdigest()
            est += self._count(model, digest, lambda m=msg: self._message(model, m), text)
            blocks += blocks_of(msg)
            h = h.copy()
            h.update(digest.encode())
            points.append((blocks, est, h.hexdigest()[:HASH_CHARS]))
        scale = prompt_total / est if prompt_total and est else 1.0
        position = [round(p[1] * scale) for p in points]
        if prompt_total and points:
            position[-1] = prompt_total
        marked = marked_messages(messages)
        window = sorted(
            {j for k in marked for j in range(k + 1) if points[k][0] - points[j][0] < LOOKBACK_BLOCKS}
        )
        return {
            "cache_ttl": ttl,
            "cache_breakpoints": [position[k] for k in marked],
            "cache_prefix_hashes": [points[k][2] for k in marked],
            "cache_lookback": [[position[j], points[j][2]] for j in window],
        }
