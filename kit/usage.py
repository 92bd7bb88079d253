"""The one usage value type, provider-payload normalisation and pricing.

Token accounting convention (the whole kit relies on it):

* ``input_uncached`` -- prompt tokens billed at the plain input price,
* ``cache_read``     -- prompt tokens served from the provider's prompt cache,
* ``cache_write``    -- prompt tokens written to the cache (Anthropic-style explicit caching);
  ``cache_write_1h`` is the part of them written with the 1-hour lifetime (*included* in
  ``cache_write``, priced at the sheet's ``cache_write_1h``; the rest at ``cache_write``, the 5-minute
  price),
* ``output``         -- completion tokens (``reasoning`` is the part of them spent thinking; it is
  *included* in ``output`` and only reported separately).

The three input buckets are disjoint: total prompt tokens = uncached + read + write.
How litellm 1.110.2 reports each provider was established from recorded raw payloads run through
litellm itself (tests/model/test_gateway.py, on the recorded payloads in tests/fixtures/payloads); see :func:`normalise`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

PER_MILLION = 1_000_000


class Usage(BaseModel):
    """Tokens and cost of one or more model calls. Adds with ``+``; ``sum()`` works too."""

    model_config = ConfigDict(frozen=True)

    input_uncached: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0
    cost_usd: float = 0.0
    cache_write_1h: int = 0  # of cache_write: written with the 1-hour lifetime

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_uncached=self.input_uncached + other.input_uncached,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            output=self.output + other.output,
            reasoning=self.reasoning + other.reasoning,
            cost_usd=self.cost_usd + other.cost_usd,
            cache_write_1h=self.cache_write_1h + other.cache_write_1h,
        )

    def __radd__(self, other: Any) -> Usage:  # lets sum([...]) start from 0
        if other == 0:
            return self
        return self.__add__(other)

    @property
    def input_total(self) -> int:
        return self.input_uncached + self.cache_read + self.cache_write

    @property
    def total_tokens(self) -> int:
        return self.input_total + self.output

    @property
    def cache_hit_ratio(self) -> float:
        """Share of prompt tokens served from cache (0 when there were none)."""
        return self.cache_read / self.input_total if self.input_total else 0.0


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def normalise(raw: dict[str, Any] | Any) -> Usage:
    """Turn a litellm ``usage`` payload (as a dict) into a token-only :class:`Usage`.

    Shapes handled (as litellm 1.110.2 exposes them, verified on recorded payloads):

    * OpenAI / llama.cpp / any OpenAI-compatible server: ``prompt_tokens`` *includes* the
      cached part, given in ``prompt_tokens_details.cached_tokens``.
    * Anthropic (and Claude on Bedrock/Vertex): litellm folds ``cache_read_input_tokens`` and
      ``cache_creation_input_tokens`` *into* ``prompt_tokens`` and keeps both fields on the usage
      object; ``prompt_tokens_details.cached_tokens`` repeats the read count (do not add it twice).
    * DeepSeek: ``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens``; ``prompt_tokens`` is
      their sum.

    Anthropic's split of the writes by lifetime (``cache_creation.ephemeral_1h_input_tokens``) is
    carried by litellm in ``prompt_tokens_details.cache_creation_token_details``; the 1-hour part
    becomes ``cache_write_1h``.
    """
    prompt = _int(_get(raw, "prompt_tokens"))
    output = _int(_get(raw, "completion_tokens"))
    details = _get(raw, "prompt_tokens_details") or {}
    out_details = _get(raw, "completion_tokens_details") or {}

    anthropic_read = _get(raw, "cache_read_input_tokens")
    anthropic_write = _get(raw, "cache_creation_input_tokens")
    deepseek_hit = _get(raw, "prompt_cache_hit_tokens")

    if anthropic_read is not None or anthropic_write is not None:
        read = _int(anthropic_read) or _int(_get(details, "cached_tokens"))
        write = _int(anthropic_write) or _int(_get(details, "cache_creation_tokens"))
    elif deepseek_hit is not None:
        read, write = _int(deepseek_hit), 0
    else:
        read = _int(_get(details, "cached_tokens"))
        write = _int(_get(details, "cache_creation_tokens"))

    uncached = max(prompt - read - write, 0)
    reasoning = _int(_get(out_details, "reasoning_tokens"))
    lifetimes = _get(details, "cache_creation_token_details") or _get(raw, "cache_creation") or {}
    write_1h = min(_int(_get(lifetimes, "ephemeral_1h_input_tokens")), write)
    return Usage(
        input_uncached=uncached,
        cache_read=read,
        cache_write=write,
        output=output,
        reasoning=reasoning,
        cache_write_1h=write_1h,
    )


class ModelPrice(BaseModel):
    """USD per one million tokens. Cache write is its own price: it is never billed at the read rate.

    ``cache_write`` is the 5-minute cache write, ``cache_write_1h`` the 1-hour one. A sheet that does
    not give ``cache_write_1h`` gets 2x ``input`` -- Anthropic's published rule (1-hour writes cost
    twice the base input price), so older sheets keep loading; providers without a 1-hour cache never
    bill a 1-hour write, so the derived figure is never used for them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    cache_write: float = Field(
        ge=0, description="USD per 1M prompt tokens written to the cache (5-minute lifetime)."
    )
    cache_write_1h: float = Field(
        ge=0,
        description="USD per 1M prompt tokens written to the cache with the 1-hour lifetime (`cache_ttl: 1h`).",
    )

    @model_validator(mode="before")
    @classmethod
    def _derive_1h(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("cache_write_1h") is None and "input" in data:
            try:
                return {**data, "cache_write_1h": 2 * float(data["input"])}
            except (TypeError, ValueError):
                return data  # the field validation says what is wrong with `input`
        return data


def price(usage: Usage, sheet: ModelPrice) -> float:
    """Cost in USD of ``usage`` under ``sheet`` (each token bucket at its own rate)."""
    return (
        usage.input_uncached * sheet.input
        + usage.cache_read * sheet.cache_read
        + (usage.cache_write - usage.cache_write_1h) * sheet.cache_write
        + usage.cache_write_1h * sheet.cache_write_1h
        + usage.output * sheet.output
    ) / PER_MILLION


def priced(usage: Usage, sheet: ModelPrice) -> Usage:
    """A copy of ``usage`` with ``cost_usd`` computed from ``sheet``."""
    return usage.model_copy(update={"cost_usd": price(usage, sheet)})
