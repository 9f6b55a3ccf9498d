"""When the delta rule's two halves run as one join (`adapt.joinpath.join_path`, over the rows
`runtime.batch.joins.side_rows` counts): while the pairs of old rows it meets and drops are no
more than the pairs the halves meet; shuffled when both sides are large. Which batches check for
skew (`adapt.joinpath.checks_skew`). No JVM; Spark's side (the one join's results against the
reference) is `tests/spark/test_joins_vs_reference` and, shuffled,
`tests/spark/test_sourced_state`."""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.adapt.joinpath import (
    SHUFFLE_ROWS,
    OneJoin,
    SideRows,
    checks_skew,
    join_path,
    skew_check_period,
)
from streamjoin.plan import StreamPlan, plan_job
from streamjoin.runtime.batch.joins import side_rows
from streamjoin.runtime.state.manifest import Manifest, StateUnit
from streamjoin.sql import parse_job

JOB = """
CREATE STREAM A (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (format = 'json', path = '/a');
CREATE STREAM B (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (format = 'json', path = '/b');
CREATE SINK w WITH (format = 'json', path = '/w');
INSERT INTO w SELECT a.k AS k FROM A a JOIN B b ON a.k = b.k
  AND b.ts BETWEEN a.ts - INTERVAL '10' SECOND AND a.ts + INTERVAL '10' SECOND;
"""
SECOND = 1_000_000


def _manifest(batches: int, rows: int = 100) -> Manifest:
    """State after `batches` batches of `rows` rows per stream, batch i covering [10i, 10i+10) s."""
    units = [
        StateUnit(s, i, rows, i * 10 * SECOND, (i * 10 + 10) * SECOND - 1)
        for i in range(batches)
        for s in "AB"
    ]
    return Manifest(batch=batches - 1, units=units)


def one_join(
    prev: Manifest,
    left: StreamPlan,
    l_lo: int | None,
    right: StreamPlan,
    r_lo: int | None,
    *,
    new: t.Mapping[str, int] | None = None,
) -> OneJoin | None:
    """The runtime's question: the rows each side holds in `prev`, then the rule."""
    return join_path(side_rows(prev, left, l_lo, new), side_rows(prev, right, r_lo, new))


def test_the_rule_weighs_the_old_pairs_dropped_against_the_halves_pairs() -> None:
    # 3·3 old pairs against 1·(3+1) + 3·1 = 7 for the halves: the halves.
    assert join_path(SideRows(3, 1), SideRows(3, 1)) is None
    assert join_path(SideRows(3, 1), SideRows(3, 1), always=True) == "auto"
    # A delta as large as the state: 2·2 <= 2·4 + 2·2.
    assert join_path(SideRows(2, 2), SideRows(2, 2)) == "auto"
    assert join_path(SideRows(0, 0), SideRows(0, 0)) == "auto"
    big = SHUFFLE_ROWS
    assert join_path(SideRows(0, big), SideRows(0, big + 1)) == "left"
    assert join_path(SideRows(0, big), SideRows(0, big - 1)) == "auto"
    assert join_path(SideRows(0, 2 * big), SideRows(0, big), shuffle_rows=big) == "right"


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


def test_a_state_of_a_batch_or_two_is_joined_in_one_and_a_deep_state_in_two_halves() -> None:
    plan = plan_job(parse_job(JOB, "<test>"))
    a, b = plan.stream("A"), plan.stream("B")
    # No bound (every unit can meet): the state's depth decides.
    assert one_join(_manifest(1), a, None, b, None)  # 1·1 <= 1·2 + 1·1
    assert one_join(_manifest(2), a, None, b, None)  # 2·2 <= 1·3 + 2·1
    assert not one_join(_manifest(3), a, None, b, None)  # 3·3 > 1·4 + 3·1
    assert not one_join(_manifest(10), a, None, b, None)
    # Bounds that leave only the last batch's unit of a deep state: one join again.
    bound = 90 * SECOND
    assert one_join(_manifest(10), a, bound, b, bound)
    # Nothing stored yet: nothing to drop.
    assert one_join(Manifest(), a, None, b, None) == "auto"


def test_the_one_join_shuffles_once_both_sides_reach_shuffle_rows_building_on_the_smaller() -> None:
    plan = plan_job(parse_job(JOB, "<test>"))
    a, b = plan.stream("A"), plan.stream("B")
    # Each side: one stored unit and the last batch's rows again as its delta.
    assert one_join(_manifest(1, SHUFFLE_ROWS // 2 - 1), a, None, b, None) == "auto"
    assert one_join(_manifest(1, SHUFFLE_ROWS // 2), a, None, b, None) == "right"
    # Only the units that can meet count: a bound past them leaves the last batch's.
    assert one_join(_manifest(2, SHUFFLE_ROWS // 2), a, 10 * SECOND, b, 10 * SECOND) == "right"
    assert one_join(_manifest(2, SHUFFLE_ROWS // 2), a, 20 * SECOND, b, 20 * SECOND) == "auto"
    # The hash tables go on the side with fewer rows: here the left, bounded to one unit.
    assert one_join(_manifest(2, SHUFFLE_ROWS // 2), a, 10 * SECOND, b, None) == "left"
    assert one_join(_manifest(2, SHUFFLE_ROWS // 2), a, None, b, 10 * SECOND) == "right"


def test_the_batchs_own_rows_when_known_stand_for_its_delta() -> None:
    plan = plan_job(parse_job(JOB, "<test>"))
    a, b = plan.stream("A"), plan.stream("B")
    # The first batch: nothing stored, so the last batch's rows are none; its files' footers
    # tell its own, which decide the join.
    assert one_join(Manifest(), a, None, b, None, new={"A": SHUFFLE_ROWS, "B": SHUFFLE_ROWS}) == (
        "right"
    )
    assert (
        one_join(Manifest(), a, None, b, None, new={"A": SHUFFLE_ROWS - 1, "B": SHUFFLE_ROWS})
        == "auto"
    )
    assert one_join(Manifest(), a, None, b, None, new={"A": 1, "B": 2}) == "auto"
    # A batch far smaller than the last: its own rows, not the last batch's, and the state
    # then outweighs them, so the halves.
    assert one_join(_manifest(2), a, None, b, None)
    assert not one_join(_manifest(2), a, None, b, None, new={"A": 1, "B": 1})
    # A stream the footers say nothing of falls back to its last batch.
    assert one_join(_manifest(2), a, None, b, None, new={"A": 1}) == one_join(
        _manifest(2), a, None, b, None, new={"A": 1, "B": 100}
    )
