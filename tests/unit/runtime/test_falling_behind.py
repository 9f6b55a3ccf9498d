"""An exact job that falls behind its trigger says so once, and again only after catching up."""

from __future__ import annotations

import io

from streamjoin.runtime.batch.context import BatchReport
from streamjoin.runtime.progress import FallingBehind, trigger_seconds
from streamjoin.runtime.state.manifest import Manifest


def _report(seconds: float) -> BatchReport:
    return BatchReport(0, 0, 0, 0, {}, 0, None, seconds, Manifest())


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


def test_trigger_seconds_reads_sparks_syntax() -> None:
    assert trigger_seconds("1 second") == 1.0
    assert trigger_seconds("500 milliseconds") == 0.5
    assert trigger_seconds("2 minutes") == 120.0
    assert trigger_seconds("soon") is None
