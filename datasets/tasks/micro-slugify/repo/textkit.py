"""Tiny text helpers."""


def word_count(text: str) -> int:
    """Number of whitespace-separated words in ``text``."""
    return len(text.split())


def slugify(text: str) -> str:
    """URL slug of ``text``: lowercase ASCII letters and digits joined by single hyphens."""
    raise NotImplementedError("slugify is not implemented yet")
