from datetime import date

import pytest

from calendarkit import chunk_range, date_range, month_bounds


def test_date_range_is_inclusive():
    assert date_range(date(2024, 1, 1), date(2024, 1, 3)) == [
        date(2024, 1, 1),
        date(2024, 1, 2),
        date(2024, 1, 3),
    ]


def test_date_range_step():
    assert date_range(date(2024, 1, 1), date(2024, 1, 7), step=3) == [
        date(2024, 1, 1),
        date(2024, 1, 4),
        date(2024, 1, 7),
    ]


def test_date_range_rejects_bad_step():
    with pytest.raises(ValueError):
        date_range(date(2024, 1, 1), date(2024, 1, 2), step=0)


def test_chunk_range_splits_a_period():
    assert chunk_range(date(2024, 1, 1), date(2024, 1, 12), 5) == [
        (date(2024, 1, 1), date(2024, 1, 5)),
        (date(2024, 1, 6), date(2024, 1, 10)),
        (date(2024, 1, 11), date(2024, 1, 12)),
    ]


def test_month_bounds():
    assert month_bounds(date(2024, 2, 10)) == (date(2024, 2, 1), date(2024, 2, 29))
    assert month_bounds(date(2023, 12, 31)) == (date(2023, 12, 1), date(2023, 12, 31))
