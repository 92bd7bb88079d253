"""Errors raised by tablekit."""

from __future__ import annotations

from collections.abc import Iterable


class TableError(Exception):
    """Base class of every tablekit error."""


class UnknownColumnError(TableError, KeyError):
    """A column name that the table does not have."""

    def __init__(self, name: str, known: Iterable[str] = ()) -> None:
        self.name = name
        self.known = list(known)
        super().__init__(name)

    def __str__(self) -> str:
        known = ", ".join(self.known) or "(none)"
        return f"unknown column {self.name!r}; known columns: {known}"


class DuplicateColumnError(TableError):
    """Two columns with the same name."""
