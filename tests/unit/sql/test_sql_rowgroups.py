"""Groups per row of a keyed input: ``PRIMARY KEY (...) NOT ENFORCED`` in a stream's DDL, and a
GROUP BY or PARTITION BY that holds it, closed by the column that bounds the join (Nexmark q4's
``b.dateTime BETWEEN a.dateTime AND a.expires``) or by the row's event time."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError, UnsupportedError
from streamjoin.model import Aggregation, EventWindow, TopN
from streamjoin.model.aggregate import POINT_US
from streamjoin.plan.classify import classify_predicate
from streamjoin.plan.explain import explain_plan
from streamjoin.plan.parts import ColumnBound
from streamjoin.plan.physical import plan_job, window_lag
from streamjoin.sql import parse_job

STREAMS = """
CREATE STREAM auction (id BIGINT, category BIGINT, dateTime TIMESTAMP, expires TIMESTAMP,
  note STRING, WATERMARK FOR dateTime AS dateTime - INTERVAL '2' SECOND,
  PRIMARY KEY (id) NOT ENFORCED) WITH (format = 'json', path = '/a');
CREATE STREAM bid (auction BIGINT, price BIGINT, dateTime TIMESTAMP,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '2' SECOND) WITH (format = 'json', path = '/b');
CREATE SINK out WITH (format = 'parquet', path = '/o');
"""
Q4 = (
    "INSERT INTO out SELECT MAX(B.price) AS final, A.category AS category FROM auction A, bid B "
    "WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires{more} "
    "GROUP BY A.id, A.category;"
)
POINT = (POINT_US, POINT_US)


def _error(sql: str) -> JobError:
    with pytest.raises(JobError) as info:
        plan_job(parse_job(STREAMS + sql, source="job.sql"))
    return info.value


def test_a_primary_key_is_declared_not_enforced() -> None:
    job = parse_job(STREAMS + Q4.format(more=""))
    assert [s.key for s in job.streams] == [("id",), ()]
    for ddl, message in (
        ("PRIMARY KEY (id)", "NOT ENFORCED after the key"),
        ("PRIMARY KEY (nope) NOT ENFORCED", "PRIMARY KEY column 'nope': no such column"),
        ("PRIMARY KEY (id, ID) NOT ENFORCED", "names column 'ID' twice"),
        ("PRIMARY KEY (id) NOT ENFORCED, PRIMARY KEY (id) NOT ENFORCED", "PRIMARY KEY already"),
    ):
        with pytest.raises(JobError, match=message):
            parse_job(f"CREATE STREAM s (id BIGINT, {ddl}) WITH (format = 'json', path = '/s');")


def test_groups_by_an_auction_close_when_the_watermark_passes_its_expires() -> None:
    job = parse_job(STREAMS + Q4.format(more=""))
    q = job.queries[0]
    assert q.aggregation == Aggregation(EventWindow("A.expires", *POINT), ("A.id", "A.category"))
    assert window_lag(job, q) == 0
    (aggregate,) = plan_job(job).aggregates
    assert aggregate.lag_us == 0 and aggregate.window.time == "A.expires"


def test_the_lag_takes_the_bound_offset_and_how_far_a_bid_may_trail_its_auction() -> None:
    # b.ts <= a.expires + 3 s, and a bid from 1 s before its auction: an auction's expires is
    # at least W - 3 s - 1 s in a result still to come.
    more = " AND B.dateTime <= A.expires + INTERVAL '3' SECOND"
    text = Q4.format(more=more).replace(
        "BETWEEN A.dateTime", "BETWEEN A.dateTime - INTERVAL '1' SECOND"
    )
    job = parse_job(STREAMS + text)
    assert window_lag(job, job.queries[0]) == 0 + 1_000_000  # (the tighter bound: + 0)
    text = Q4.format(more="").replace("AND A.expires", "AND A.expires + INTERVAL '3' SECOND")
    job = parse_job(STREAMS + text)
    assert window_lag(job, job.queries[0]) == 3_000_000


def test_without_a_bounding_column_the_rows_event_time_closes_them() -> None:
    text = Q4.format(more="").replace("AND A.expires", "AND A.dateTime + INTERVAL '10' SECOND")
    job = parse_job(STREAMS + text)
    q = job.queries[0]
    assert q.aggregation is not None and q.aggregation.window == EventWindow("A.`dateTime`", *POINT)
    assert window_lag(job, q) == 10_000_000


def test_a_top_n_per_auction() -> None:
    job = parse_job(
        STREAMS + "INSERT INTO out SELECT id, price FROM (SELECT A.id AS id, B.price AS price, "
        "ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC) AS rn FROM auction A, bid B "
        "WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires) WHERE rn <= 1;"
    )
    assert job.queries[0].topn == TopN(
        EventWindow("A.expires", *POINT), ("A.id",), ("B.price DESC NULLS LAST",), 1
    )


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (  # (the key is not held: groups by category span auctions)
            Q4.format(more="").replace("GROUP BY A.id, A.category", "GROUP BY A.category"),
            "GROUP BY has no window",
        ),
        (  # (a bid of any age may pair with a new auction: no group is ever complete)
            Q4.format(more="").replace("BETWEEN A.dateTime AND A.expires", "<= A.expires"),
            "would never close a window",
        ),
        (
            Q4.format(more=" AND B.dateTime <= A.dateTime + INTERVAL '10' SECOND").replace(
                "FROM auction A, bid B WHERE", "FROM auction A LEFT JOIN bid B ON"
            ),
            "need a two-way inner join",
        ),
    ],
)
def test_refused_groups_per_row(sql: str, message: str) -> None:
    err = _error(sql)
    assert message in str(err)
    assert isinstance(err, UnsupportedError) or "never close" in str(err)


def test_a_column_bound_from_either_side_and_offset() -> None:
    parts = classify_predicate(
        "a.k = b.k AND b.ts BETWEEN a.ts AND a.e AND a.ts <= b.f + INTERVAL '2' SECOND "
        "AND b.ts <= a.ts + INTERVAL '9' SECOND",
        "a",
        "b",
        "ts",
        "ts",
    )
    assert parts.bounds == (ColumnBound(0, "a.e", 0), ColumnBound(1, "b.f", 2_000_000))
    assert parts.window is not None and (parts.window.lo_us, parts.window.hi_us) == (0, 9_000_000)


def test_explain_says_when_an_auction_leaves_the_index() -> None:
    text = explain_plan(plan_job(parse_job(STREAMS + Q4.format(more=""))))
    assert (
        "expiry:        A's rows leave the join's index once the watermark passes A.expires" in text
    )
    assert "GROUP BY window(A.expires) each instant" in text
