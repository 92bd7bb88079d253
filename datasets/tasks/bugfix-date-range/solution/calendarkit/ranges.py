"""Ranges of dates. Every period here is inclusive: start..end contains both start and end."""

from __future__ import annotations

from datetime import date, timedelta

ONE_DAY = timedelta(days=1)


def date_range(start: date, end: date, step: int = 1) -> list[date]:
    """Every ``step``-th date from ``start`` to ``end``, both inclusive."""
    if step < 1:
        raise ValueError("step must be at least 1")
    out = []
    day = start
    while day <= end:
        out.append(day)
        day += timedelta(days=step)
    return out


def chunk_range(start: date, end: date, days: int) -> list[tuple[date, date]]:
    """Split start..end (inclusive) into consecutive (first, last) chunks of at most ``days`` days."""
    if days < 1:
        raise ValueError("days must be at least 1")
    if end < start:
        raise ValueError("end is before start")
    chunks = []
    first = start
    while first <= end:
        last = min(first + timedelta(days=days - 1), end)
        chunks.append((first, last))
        first = last + ONE_DAY
    return chunks


def month_bounds(day: date) -> tuple[date, date]:
    """First and last day of the month that contains ``day``."""
    first = day.replace(day=1)
    if first.month == 12:
        next_first = first.replace(year=first.year + 1, month=1)
    else:
        next_first = first.replace(month=first.month + 1)
    return first, next_first - ONE_DAY
