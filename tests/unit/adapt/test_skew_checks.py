"""Which batches check for skew (`adapt.skewcheck`): every interval from batch 1, spaced by the
trigger's time on short triggers. No JVM."""

from __future__ import annotations

import pytest

from streamjoin.adapt.skewcheck import checks_skew, skew_check_period


@pytest.mark.parametrize("every", [1, 2, 3, 5, 7])
def test_skew_is_checked_every_interval_from_batch_1(every: int) -> None:
    checked = [b for b in range(40) if checks_skew(b, every)]
    assert checked == (list(range(1, 40, every)) if every > 1 else list(range(40)))


def test_skew_checks_are_spaced_by_the_triggers_time_on_short_triggers() -> None:
    # A backlog run (no trigger), or the time part off: the batch count alone.
    assert skew_check_period(5, 20, None) == 5
    assert skew_check_period(5, 0, 1.0) == 5
    # Triggers of a second: a check every 20 batches; of 10 s: the batch count is longer.
    assert skew_check_period(5, 20, 1.0) == 20
    assert skew_check_period(5, 20, 0.3) == 67
    assert skew_check_period(5, 20, 10.0) == 5
    assert skew_check_period(1, 20, 20.0) == 1
