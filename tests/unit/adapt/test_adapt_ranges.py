"""When a range query takes new bounds (`adapt.schemes.next_scheme`): while it has none, and
when its ranges' rows are uneven; an even split keeps the bounds it has, so that the join
operator's rows do not move for a sample's noise."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamjoin.adapt.schemes import RANGE_SPREAD, next_scheme
from streamjoin.adapt.schemestate import BatchCounts, SchemeState, UnitStats, initial_params
from streamjoin.plan import QueryPlan, plan_job
from streamjoin.sql import parse_job

JOB = "".join(
    f"CREATE STREAM {s} (id BIGINT, x DOUBLE, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) "
    f"WITH (format = 'json', path = '/in/{s}');"
    for s in "ab"
) + (
    "CREATE SINK o WITH (format = 'json', path = '/out');"
    "INSERT INTO o SELECT a.id AS i FROM a JOIN b ON abs(a.x - b.x) <= 0.5 AND "
    "b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND "
    "WITH (partitioning = 'range', units = 4);"
)


def _plan() -> QueryPlan:
    return plan_job(parse_job(JOB)).joins[0]


def _after(
    qp: QueryPlan, bounds: list[float], stored: tuple[int, ...], probing: tuple[int, ...]
) -> list[float]:
    state = SchemeState({**initial_params(qp, 4), "units": 4, "bounds": bounds})
    seen = BatchCounts(3, 100, 100, UnitStats(probing, stored), (1.0, 2.0, 3.0))
    return list(next_scheme(qp, state, seen).params["bounds"])


def test_a_query_without_bounds_takes_the_quantiles() -> None:
    assert _after(_plan(), [], (25, 25, 25, 25), (25, 25, 25, 25)) == [1.0, 2.0, 3.0]


def test_the_rows_each_range_holds_decide_before_the_rows_that_probe_it() -> None:
    """A band's row probes the ranges its band reaches, so the probing rows spread wider than
    the stored ones: the stored rows tell, where counted; the probing ones, where not."""
    even, hot = (25, 25, 25, 25), (10, 10, 70, 10)
    assert _after(_plan(), [5.0, 6.0, 7.0], hot, even) == [1.0, 2.0, 3.0]
    assert _after(_plan(), [5.0, 6.0, 7.0], even, hot) == [5.0, 6.0, 7.0]
    assert _after(_plan(), [5.0, 6.0, 7.0], (0, 0, 0, 0), hot) == [1.0, 2.0, 3.0]


@given(st.integers(0, 1000), st.integers(0, 1000))
def test_bounds_move_once_one_range_holds_over_its_share(top: int, rest: int) -> None:
    loads = (top, rest, rest, rest)
    got = _after(_plan(), [5.0, 6.0, 7.0], loads, loads)
    moved = top + 3 * rest > 0 and top > RANGE_SPREAD * (top + 3 * rest) / 4
    assert got == ([1.0, 2.0, 3.0] if moved else [5.0, 6.0, 7.0])
