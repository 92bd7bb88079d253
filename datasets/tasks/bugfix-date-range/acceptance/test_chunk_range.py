from datetime import date, timedelta

import pytest

from calendarkit.ranges import chunk_range


def _days(chunks):
    out = []
    for first, last in chunks:
        assert first <= last, f"inverted chunk {(first, last)}"
        day = first
        while day <= last:
            out.append(day)
            day += timedelta(days=1)
    return out


@pytest.mark.severity("critical")
def test_reported_bug_last_day_is_not_lost():
    assert chunk_range(date(2024, 1, 1), date(2024, 1, 11), 5) == [
        (date(2024, 1, 1), date(2024, 1, 5)),
        (date(2024, 1, 6), date(2024, 1, 10)),
        (date(2024, 1, 11), date(2024, 1, 11)),
    ]


@pytest.mark.severity("critical")
def test_one_day_period_gives_one_chunk():
    day = date(2024, 3, 15)
    assert chunk_range(day, day, 7) == [(day, day)]


@pytest.mark.severity("major")
@pytest.mark.baseline_pass
def test_exact_multiple_has_no_extra_chunk():
    # the naive fix (one more chunk) adds an inverted (Jan 11, Jan 10) chunk here
    assert chunk_range(date(2024, 1, 1), date(2024, 1, 10), 5) == [
        (date(2024, 1, 1), date(2024, 1, 5)),
        (date(2024, 1, 6), date(2024, 1, 10)),
    ]


@pytest.mark.severity("major")
def test_every_day_covered_exactly_once():
    start = date(2024, 2, 20)
    for length in range(1, 40):
        end = start + timedelta(days=length - 1)
        for days in range(1, 9):
            chunks = chunk_range(start, end, days)
            assert _days(chunks) == [start + timedelta(days=i) for i in range(length)], (length, days)
            assert all((last - first).days + 1 == days for first, last in chunks[:-1])


@pytest.mark.severity("minor")
def test_rejects_non_positive_chunk_size():
    with pytest.raises(ValueError):
        chunk_range(date(2024, 1, 1), date(2024, 1, 10), 0)


@pytest.mark.severity("minor")
def test_rejects_end_before_start():
    with pytest.raises(ValueError):
        chunk_range(date(2024, 1, 10), date(2024, 1, 1), 3)
