"""Tiny text helpers."""

import re

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def word_count(text: str) -> int:
    """Number of whitespace-separated words in ``text``."""
    return len(text.split())


def slugify(text: str) -> str:
    """URL slug of ``text``: lowercase ASCII letters and digits joined by single hyphens."""
    return _SEPARATORS.sub("-", text.lower()).strip("-")
