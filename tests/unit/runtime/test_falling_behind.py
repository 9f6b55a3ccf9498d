"""An exact job that falls behind its trigger says so once, and again only after catching up;
under a zero trigger, batches that keep growing say it."""

from __future__ import annotations

import io

from streamjoin.runtime.batch.context import BatchReport
from streamjoin.runtime.progress import FallingBehind, trigger_seconds
from streamjoin.runtime.state.manifest import Manifest


def _report(seconds: float, rows: int = 0) -> BatchReport:
    return BatchReport(0, rows, 0, 0, {}, 0, None, seconds, Manifest())


def test_three_slow_batches_in_a_row_give_one_line() -> None:
    out = io.StringIO()
    behind = FallingBehind(1.0, out)
    for seconds in (1.5, 0.5, 1.2, 1.3, 1.4, 1.6, 2.0):
        behind(_report(seconds))
    text = out.getvalue()
    assert text.count("streamjoin: ") == 1
    assert "3 batches in a row took longer than the 1s trigger (the last 1.40s)" in text
    assert "overload = 'shed'" in text
    behind(_report(0.2))  # caught up; falling behind again warns again
    for _ in range(3):
        behind(_report(3.0))
    assert out.getvalue().count("streamjoin: ") == 2


def test_under_a_zero_trigger_batches_that_keep_growing_give_one_line() -> None:
    out = io.StringIO()
    behind = FallingBehind(0.0, out)
    # Short batches never count, however they vary; one that grew without more input neither.
    for seconds, rows in ((0.1, 100), (0.3, 300), (0.9, 900), (1.2, 900), (1.1, 800)):
        behind(_report(seconds, rows))
    assert out.getvalue() == ""
    # Longer than the one before with more input, three times: one line. A long batch that
    # did not grow breaks no streak; one within the floor ends it.
    for seconds, rows in ((1.3, 1_000), (1.6, 1_300), (1.5, 1_200), (2.0, 1_600), (2.6, 2_000)):
        behind(_report(seconds, rows))
    text = out.getvalue()
    assert text.count("streamjoin: ") == 1
    assert "3 batches in a row each took longer than the one before, with more input" in text
    assert "(the last 2.00s)" in text
    behind(_report(3.0, 2_500))  # (still behind: said once)
    behind(_report(0.4, 300))  # caught up
    for seconds, rows in ((1.1, 400), (1.2, 500), (1.3, 600), (1.4, 700)):
        behind(_report(seconds, rows))
    assert out.getvalue().count("streamjoin: ") == 2


def test_trigger_seconds_reads_sparks_syntax() -> None:
    assert trigger_seconds("1 second") == 1.0
    assert trigger_seconds("500 milliseconds") == 0.5
    assert trigger_seconds("2 minutes") == 120.0
    assert trigger_seconds("soon") is None
