"""Moved to :mod:`kit.caching_rules` (a top-level module, so the analysis layer reads the same table);
this name stays importable."""

from kit.caching_rules import DEFAULT_MIN_CACHEABLE, MIN_CACHEABLE, min_cacheable_tokens

__all__ = ["DEFAULT_MIN_CACHEABLE", "MIN_CACHEABLE", "min_cacheable_tokens"]
