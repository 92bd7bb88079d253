"""Provider prompt-caching rules: minimum cacheable prompt sizes per model family, the lookback of a
cache lookup, and the cache lifetimes.

A top-level module (moved from ``kit.model.caching``, which still re-exports it) so the analysis layer's
cache simulator (:mod:`kit.analysis.cachesim`) reads the same table as the gateway and the fake servers.

A provider caches a prompt prefix only once it reaches a minimum size; below it the request
succeeds, bills every token at the plain input rate, and reports zero cache reads and writes.
The minimum depends on the model, which matters for tier economics: a short conversation on a
model with a large minimum never caches.

Sources (checked 2026-12-01): Anthropic's prompt-caching guide ("Cache limitations": 4,096 tokens
for Claude Opus 4.6 / 4.5 and Haiku 4.5; 2,048 for Haiku 3.5 / 3; 1,024 for Sonnet 4.5 / 4,
Opus 4.1 / 4 and Sonnet 3.7) and OpenAI's prompt-caching guide (1,024 tokens, automatic). Families
not listed fall back to 1,024, the most common figure; a profile cannot override it. Used to size
``kit models check``'s shared prefix (:mod:`kit.model.check`), by the fake Anthropic server of
``tests/support/fake_providers.py`` and by the cache simulator of the what-ifs.

Lookback: Anthropic looks a cache hit up at each breakpoint and at the block boundaries up to 20
blocks before it (:data:`LOOKBACK_BLOCKS`). Lifetime: an entry lives 5 minutes (the default) or 1 hour
(``ttl: "1h"``) after its last write or read (:data:`TTL_SECONDS`).
"""

from __future__ import annotations

DEFAULT_MIN_CACHEABLE = 1024
#: Anthropic checks for a hit at each breakpoint and up to this many blocks before it.
LOOKBACK_BLOCKS = 20
#: Cache lifetimes (seconds since the entry's last use), by the ``ttl`` value of ``cache_control``.
TTL_SECONDS: dict[str, int] = {"5m": 300, "1h": 3600}
DEFAULT_TTL = "5m"

# (substring of the model string, minimum tokens); the first match wins, so specific names first.
MIN_CACHEABLE: tuple[tuple[str, int], ...] = (
    ("opus-4-6", 4096),
    ("opus-4-5", 4096),
    ("haiku-4-5", 4096),
    ("3-5-haiku", 2048),
    ("haiku-3-5", 2048),
    ("3-haiku", 2048),
    ("haiku-3", 2048),
    ("sonnet-4-5", 1024),
    ("opus-4-1", 1024),
    ("opus-4", 1024),
    ("sonnet-4", 1024),
    ("3-7-sonnet", 1024),
    ("sonnet-3-7", 1024),
)


def min_cacheable_tokens(model: str) -> int:
    """The smallest prompt prefix ``model`` caches (tokens); 1,024 when the family is unknown."""
    name = model.lower().replace(".", "-")
    for needle, minimum in MIN_CACHEABLE:
        if needle in name:
            return minimum
    return DEFAULT_MIN_CACHEABLE
