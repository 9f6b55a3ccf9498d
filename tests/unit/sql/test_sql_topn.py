"""Top-N queries: ``ROW_NUMBER() OVER (PARTITION BY window(...), ... ORDER BY ...) <= N``."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError
from streamjoin.model import EventWindow, Query, SelectItem, TopN
from streamjoin.sql import parse_job
from tests.reference_cases import PRELUDE

INNER = (
    "SELECT b.id AS bid, a.id AS aid, a.price AS p, ROW_NUMBER() OVER (PARTITION BY {part} "
    "ORDER BY a.price DESC, a.id) AS rn FROM bids b JOIN asks a ON b.name = 'x' "
    "AND a.ts BETWEEN b.ts AND b.ts + INTERVAL '5' SECOND"
)


def _parse(outer: str, part: str = "b.id, window(b.ts, '10 seconds')") -> Query:
    inner = INNER.format(part=part)
    return parse_job(PRELUDE + f"INSERT INTO matches {outer.format(inner=inner)}").queries[0]


def test_the_first_rows_per_window_and_key() -> None:
    q = _parse("SELECT aid, p AS price FROM ({inner}) WHERE rn <= 2")
    assert q.topn == TopN(
        EventWindow("b.ts", 10_000_000, 10_000_000),
        ("b.id",),
        ("a.price DESC NULLS LAST", "a.id ASC NULLS FIRST"),
        2,
    )
    assert q.select == (SelectItem("a.id", "aid"), SelectItem("a.price", "price"))


def test_partitioning_by_an_event_time_is_a_window_of_an_instant() -> None:
    q = _parse("SELECT bid FROM ({inner}) WHERE rn = 1", part="b.id, b.ts")
    assert q.topn is not None
    assert q.topn.window == EventWindow("b.ts", 1, 1)
    assert q.topn.limit == 1
    q = _parse("SELECT bid FROM ({inner}) WHERE rn < 4", part="b.ts")
    assert q.topn is not None
    assert q.topn.limit == 3 and q.topn.keys == ()


@pytest.mark.parametrize(
    ("outer", "part", "message"),
    [
        ("SELECT bid FROM ({inner}) WHERE rn <= 2", "b.id", "partitions by one event-time window"),
        ("SELECT bid FROM ({inner}) WHERE rn >= 2", "b.ts", "WHERE rn <= N, N >= 1"),
        ("SELECT bid FROM ({inner}) WHERE rn <= 0", "b.ts", "WHERE rn <= N, N >= 1"),
        ("SELECT rn FROM ({inner}) WHERE rn <= 2", "b.ts", "selecting the rank is not supported"),
        ("SELECT b.id FROM ({inner}) WHERE rn <= 2", "b.ts", "select a column of the subquery"),
        ("SELECT bid FROM ({inner}) WHERE rn <= 2", "b.price", "partitions by one event-time"),
    ],
)
def test_refused_top_n(outer: str, part: str, message: str) -> None:
    with pytest.raises(JobError, match=message):
        _parse(outer, part)


def test_other_window_functions_and_subqueries() -> None:
    with pytest.raises(JobError, match="only ROW_NUMBER"):
        _parse(
            "SELECT bid FROM ({inner}) WHERE rn <= 2".replace(
                "{inner}", INNER.replace("ROW_NUMBER()", "RANK()").format(part="b.ts")
            )
        )
    with pytest.raises(JobError, match="supported only as a top-N"):
        parse_job(
            PRELUDE + "INSERT INTO matches SELECT bid FROM (SELECT b.id AS bid FROM bids b "
            "JOIN asks a ON a.id = b.id)"
        )
