"""The watermark as the progress line and the summary print it, at the ends of the event-time
range (a row at 0001-01-01 less the delay is before Python's first year)."""

from __future__ import annotations

from streamjoin.runtime.batch.intake import EVENT_TIME_RANGE
from streamjoin.runtime.progress import format_watermark


def test_the_watermark_prints_at_both_ends_of_the_range() -> None:
    low, high = EVENT_TIME_RANGE
    assert format_watermark(low) == "0001-01-01 00:00:00.000"
    assert format_watermark(high) == "9999-12-31 23:59:59.999"
    assert format_watermark(low - 2_000_000) == f"{low - 2_000_000} µs since 1970"
    assert format_watermark(None) == "-"
