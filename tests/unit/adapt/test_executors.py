"""`adapt.executors`: the executor count follows the batches' load, and no batch in a
stabilization period (after the start, after each change) moves it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.adapt.executors import ExecutorScaling

# (busy seconds, interval seconds) of one batch
batches = st.lists(
    st.tuples(st.floats(0.0, 5.0), st.floats(0.01, 5.0)),
    max_size=60,
)


@given(batches, st.floats(0.0, 20.0))
def test_no_change_comes_from_a_batch_in_a_stabilization_period(
    observed: list[tuple[float, float]], period: float
) -> None:
    scaling = ExecutorScaling(1, 4, stabilization=period)
    since_change = 0.0  # (seconds from the start or the last change to the batch's end)
    counted = 0  # (batches since the period ended)
    for batch, (busy, interval) in enumerate(observed):
        started = since_change  # (the batch began where the one before ended)
        since_change += interval
        before = scaling.executors
        step = scaling.observe(batch, busy, interval)
        if step is not None:
            # The batch began after the period, as did the confirmations before it.
            assert started >= period
            assert counted >= scaling.confirmations - 1
            assert step != before and 1 <= step <= 4
            assert scaling.executors == step
            since_change, counted = 0.0, 0
        elif started >= period:
            counted += 1


def test_a_slow_start_scales_nothing_and_load_after_it_does() -> None:
    scaling = ExecutorScaling(1, 2, stabilization=30.0)
    # The first 30 s: batches back to back (a JVM warming up), no change.
    assert [scaling.observe(b, 6.0, 6.0) for b in range(5)] == [None] * 5
    # Then three back-to-back batches: the second executor.
    assert [scaling.observe(b, 2.0, 2.0) for b in range(5, 8)] == [None, None, 2]
    # Quiet batches right after the change do not give it back before the period is over.
    assert [scaling.observe(b, 0.1, 2.0) for b in range(8, 23)] == [None] * 15
    assert [scaling.observe(b, 0.1, 2.0) for b in range(23, 26)] == [None, None, 1]


def test_a_negative_period_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="stabilization period must be >= 0 s, got -1"):
        ExecutorScaling(1, 2, stabilization=-1.0)


@given(
    st.floats(0.5, 4.0), st.floats(0.0, 30.0), st.lists(st.integers(0, 40), min_size=1, max_size=3)
)
def test_a_scale_in_waits_for_a_drain_no_longer_than_its_bound(
    interval: float, wait: float, drains: list[int]
) -> None:
    # Each round: scale out to two executors, then idle batches while the change's index
    # drains for so many batches; the bound starts again with each round.
    scaling = ExecutorScaling(1, 2, stabilization=0.0, drain_wait=wait)
    batch = 0
    for draining_batches in drains:
        while scaling.executors < 2:
            scaling.observe(batch, interval, interval)
            batch += 1
        first, when = batch, None
        for batch in range(first, first + draining_batches + 10):
            draining = batch < first + draining_batches
            if scaling.observe(batch, 0.0, interval, draining=draining) is not None:
                when = batch
                break
        batch += 1
        # The idle batches that wait: those of the drain whose seconds stay within the bound.
        waits, waited = 0, 0.0
        while waits < draining_batches and waited + interval <= wait:
            waits, waited = waits + 1, waited + interval
        # Then three idle batches that count, the third scaling in.
        assert when == first + waits + scaling.confirmations - 1
        assert scaling.executors == 1


def test_a_negative_drain_wait_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="wait for a drain must be >= 0 s, got -1"):
        ExecutorScaling(1, 2, drain_wait=-1.0)
