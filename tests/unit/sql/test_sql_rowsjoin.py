"""A stream's rows joined with one stream's groups (Nexmark q7's shape): the bounds its
condition puts on a row's event time against the groups' window, the lag and retention they
give, and each refusal named where it is written."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError, UnsupportedError
from streamjoin.model import StreamRows
from streamjoin.plan import plan_job
from streamjoin.plan.groups import RowsPlan
from streamjoin.sql import parse_job
from tests.reference_cases import PRELUDE

SECOND = 1_000_000
GROUPS = (
    "(SELECT max(price) AS top, window_{bound} AS w\n"
    " FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))\n"
    " GROUP BY window_start, window_end) g\n"
)


def _sql(where: str, bound: str = "end", stream: str = "bids b") -> str:
    return (
        f"INSERT INTO matches SELECT b.id, b.price, g.w FROM {stream} JOIN\n"
        + GROUPS.format(bound=bound)
        + f"ON b.price = g.top WHERE {where}"
    )


def _plan(sql: str) -> RowsPlan:
    plan = plan_job(parse_job(PRELUDE + sql, source="job.sql"))
    (gp,) = plan.group_queries
    assert gp.rows is not None
    return gp.rows


def test_q7s_condition_bounds_a_row_by_its_window() -> None:
    sql = _sql("b.ts BETWEEN g.w - INTERVAL '10' SECOND AND g.w")
    job = parse_job(PRELUDE + sql, source="job.sql")
    (query,) = job.group_queries
    assert query.rows == StreamRows("b", "bids", "ts")
    assert [g.name for g in query.inputs] == ["g"]
    rows = _plan(sql)
    assert (rows.lo_us, rows.hi_us) == (-10 * SECOND, 0)
    # (A row at the window's end pairs with it: the window waits one microsecond more.)
    assert rows.lag_us == 1
    assert rows.retain_us == 10 * SECOND + 1
    plan = plan_job(job)
    (sp,) = plan.streams
    assert sp.retain_us == rows.retain_us  # (the stream keeps the rows, not a buffer)
    assert plan.group_queries[0].inputs[0].lag_us == 1
    assert "bids keeps its rows for 10s behind the watermark" in plan.explain()


@pytest.mark.parametrize(
    ("where", "bound", "lo", "hi"),
    [
        # (window_start: the end is start + 10 s.)
        ("b.ts >= g.w AND b.ts < g.w + INTERVAL '10' SECOND", "start", -10, 0),
        ("b.ts BETWEEN g.w - INTERVAL '2' SECOND AND g.w + INTERVAL '3' SECOND", "end", -2, 3),
        ("g.w <= b.ts + INTERVAL '4' SECOND AND b.ts <= g.w - INTERVAL '1' SECOND", "end", -4, -1),
    ],
)
def test_bounds_are_read_from_either_window_column(
    where: str, bound: str, lo: int, hi: int
) -> None:
    rows = _plan(_sql(where, bound))
    assert (rows.lo_us, rows.hi_us) == (lo * SECOND, hi * SECOND)
    assert rows.lag_us == max(0, hi * SECOND + 1)
    assert rows.retain_us == rows.lag_us - lo * SECOND


@pytest.mark.parametrize(
    "where",
    [
        "b.ts >= g.w - INTERVAL '10' SECOND",  # (no upper bound: a row waits for every window)
        "b.ts <= g.w",  # (no lower bound: a group pairs with rows of any age)
        "b.price > 1",
    ],
)
def test_a_row_unbounded_by_the_window_is_refused_at_the_condition(where: str) -> None:
    with pytest.raises(UnsupportedError) as info:
        parse_job(PRELUDE + _sql(where), source="job.sql")
    err = info.value
    assert "must bound b.ts on both sides by the window of 'g'" in err.message
    assert err.line == 6 + 4  # (the ON condition's line)


def test_a_stream_without_an_event_time_cannot_join_groups() -> None:
    plain = "CREATE STREAM plain (id BIGINT, price DOUBLE) WITH (format = 'json', path = 'p');"
    prelude = PRELUDE + plain + "\n"
    sql = _sql("b.price > 1", stream="plain b")
    with pytest.raises(JobError) as info:
        parse_job(prelude + sql, source="job.sql")
    assert "stream 'plain' joins groups by its event time, and declares none" in (
        info.value.message
    )


TUMBLE = "TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)"
HOP = "HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND)"


@pytest.mark.parametrize(
    ("rows", "window", "broadcast"),
    [
        ("bids", TUMBLE, True),
        ("bids", HOP, False),  # (sliding windows: up to size / slide groups a row)
        ("asks", TUMBLE, False),  # (another stream's groups: no bound by its rows)
    ],
)
def test_the_groups_are_broadcast_where_they_are_at_most_one_a_row(
    rows: str, window: str, broadcast: bool
) -> None:
    groups = GROUPS.replace(TUMBLE, window).format(bound="end")
    sql = (
        f"INSERT INTO matches SELECT r.id, r.price, g.w FROM {rows} r JOIN\n{groups}"
        "ON r.price = g.top WHERE r.ts BETWEEN g.w - INTERVAL '10' SECOND AND g.w"
    )
    (gp,) = plan_job(parse_job(PRELUDE + sql, source="job.sql")).group_queries
    text = gp.output_sql(("groups_view",), "rows_view")
    assert ("/*+ BROADCAST(`g`) */" in text) is broadcast
