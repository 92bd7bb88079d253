"""Date helpers for reports."""

from calendarkit.ranges import chunk_range, date_range, month_bounds

__all__ = ["chunk_range", "date_range", "month_bounds"]
