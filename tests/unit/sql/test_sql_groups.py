"""Queries over windowed groups of single streams, Flink's window functions, and rollups: what
they parse into, and each mistake named where it is written."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError, UnsupportedError
from streamjoin.model import EventWindow
from streamjoin.model.aggregate import POINT_US
from streamjoin.sql import parse_job
from tests.reference_cases import PRELUDE

SECOND = 1_000_000


def _job(sql: str):  # type: ignore[no-untyped-def]
    return parse_job(PRELUDE + sql, source="job.sql")


def _error(sql: str) -> JobError:
    with pytest.raises(JobError) as info:
        _job(sql)
    return info.value


def test_tumble_and_window_read_alike() -> None:
    tumble = _job(
        "INSERT INTO matches SELECT window_start, count(*) AS n\n"
        "FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))\n"
        "GROUP BY window_start, window_end"
    ).group_queries[0]
    spark = _job(
        "INSERT INTO matches SELECT window.start AS window_start, count(*) AS n FROM bids\n"
        "GROUP BY window(ts, '10 seconds')"
    ).group_queries[0]
    assert tumble.inputs[0].aggregation == spark.inputs[0].aggregation
    assert [i.alias for i in tumble.select] == ["window_start", "n"]  # Flink's column name


def test_hop_gives_its_slide_first() -> None:
    (group,) = (
        _job(
            "INSERT INTO matches SELECT window_end AS we, max(price) AS top\n"
            "FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts),\n"
            "  INTERVAL '5' SECOND, INTERVAL '20' SECOND))\n"
            "WHERE price > 1 GROUP BY window_start, window_end"
        )
        .group_queries[0]
        .inputs
    )
    assert group.aggregation.window == EventWindow("bids.ts", 20 * SECOND, 5 * SECOND)
    assert group.where == "bids.price > 1"


def test_tvf_mistakes_are_named_at_the_call() -> None:
    err = _error(
        "INSERT INTO matches SELECT count(*) AS n\n"
        "FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
    )
    assert isinstance(err, UnsupportedError)
    assert (err.line, err.col) == (7, 6) and "GROUP BY window_start, window_end" in err.message
    err = _error(
        "INSERT INTO matches SELECT count(*) AS n\n"
        "FROM TABLE(CUMULATE(TABLE bids, DESCRIPTOR(ts),\n"
        "  INTERVAL '1' SECOND, INTERVAL '4' SECOND))\n"
        "GROUP BY window_start, window_end"
    )
    assert (
        isinstance(err, UnsupportedError) and "CUMULATE is not a windowing function" in err.message
    )
    err = _error(
        "INSERT INTO matches SELECT count(*) AS n\n"
        "FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(price), INTERVAL '10' SECOND))\n"
        "GROUP BY window_start, window_end"
    )
    assert "its event time is 'ts'" in err.message and err.line == 7


GROUPS = (
    "(SELECT id, count(*) AS n, window_start AS ws FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), "
    "INTERVAL '{a}' SECOND)) GROUP BY id, window_start, window_end) b\n"
    "JOIN (SELECT id, count(*) AS n, window_start AS ws FROM TABLE(TUMBLE(TABLE asks, "
    "DESCRIPTOR(ts), INTERVAL '{b}' SECOND)) GROUP BY id, window_start, window_end) a\n"
)


def test_a_join_of_groups_matches_their_windows() -> None:
    sql = "INSERT INTO matches SELECT b.id, a.n AS an\nFROM " + GROUPS.format(a=5, b=5)
    query = _job(sql + "ON b.id = a.id AND b.ws = a.ws").group_queries[0]
    assert [g.name for g in query.inputs] == ["b", "a"]
    assert query.on == "b.id = a.id AND b.ws = a.ws"
    err = _error(sql + "ON b.id = a.id")
    assert isinstance(err, UnsupportedError) and "must match their windows" in err.message
    err = _error(
        "INSERT INTO matches SELECT b.id\nFROM " + GROUPS.format(a=5, b=10) + "ON b.ws = a.ws"
    )
    assert "windows differ" in err.message
    err = _error(sql + "ON b.ws = a.ws AND b.price > 1")
    assert err.message.startswith(
        "unknown column 'b.price' (columns of b: id, n, ws; a: id, n, ws)"
    )


def test_rollup_over_a_grouped_join() -> None:
    inner = (
        "(SELECT b.id AS id, max(a.price) AS top FROM bids b JOIN asks a ON b.id = a.id\n"
        " AND a.ts BETWEEN b.ts AND b.ts + INTERVAL '5' SECOND GROUP BY b.id, b.ts) q"
    )
    query = _job(
        f"INSERT INTO matches SELECT q.id, avg(top) AS mean FROM {inner}\nGROUP BY q.id"
    ).queries[0]
    assert query.aggregation is not None
    assert query.aggregation.window == EventWindow("b.ts", POINT_US, POINT_US)  # per instant
    assert query.rollup is not None and query.rollup.keys == ("q.id",)
    assert [(i.sql, i.alias) for i in query.output] == [("q.id", "id"), ("AVG(q.top)", "mean")]
    err = _error(
        f"INSERT INTO matches SELECT count(DISTINCT q.top) AS n FROM {inner}\nGROUP BY q.id"
    )
    assert isinstance(err, UnsupportedError) and "count(DISTINCT)" in err.message
    err = _error(f"INSERT INTO matches SELECT q.price AS p FROM {inner}\nGROUP BY q.id")
    assert err.message.startswith("unknown column 'q.price' (columns of q: id, top)")
    err = _error(f"INSERT INTO matches SELECT q.top AS t FROM {inner}\nGROUP BY q.id")
    assert "neither grouped nor aggregated" in err.message


def test_a_quoted_stream_in_a_window_function_keeps_every_offset() -> None:
    tumble = "TABLE(TUMBLE(TABLE `bids`, DESCRIPTOR(`ts`), INTERVAL '{s}' SECOND))"
    sql = (
        "INSERT INTO matches SELECT b.n AS n FROM\n"
        f"(SELECT count(*) AS n, window_start AS w FROM {tumble.format(s=5)} "
        "GROUP BY window_start, window_end) b JOIN\n"
        "(SELECT count(*) AS n, window_start AS w FROM "
        f"{tumble.format(s=5).replace('bids', 'asks')} "
        "GROUP BY window_start, window_end) a ON b.w = a.w"
    )
    query = _job(sql).group_queries[0]
    assert [g.stream for g in query.inputs] == ["bids", "asks"]
    assert all(g.aggregation.window.size_us == 5 * SECOND for g in query.inputs)


def test_rows_are_filtered_before_they_have_a_window() -> None:
    err = _error(
        "INSERT INTO matches SELECT count(*) AS n\n"
        "FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))\n"
        "WHERE window_start > TIMESTAMP '2024-01-01' GROUP BY window_start, window_end"
    )
    assert (err.line, err.text) == (8, "window_start") and "unknown column" in err.message


def test_a_join_of_groups_joins_rows_as_they_are() -> None:
    err = _error(
        "INSERT INTO matches SELECT count(*) AS c\nFROM "
        + GROUPS.format(a=5, b=5)
        + "ON b.ws = a.ws"
    )
    assert isinstance(err, UnsupportedError) and err.text == "count(*)"


@pytest.mark.parametrize(
    ("items", "where"),
    [
        ("stddev(q.top) AS s", "stddev(q.top)"),
        ("max(count(q.top)) AS m", "max(count(q.top))"),
        ("avg(q.top) AS a", "avg(q.top) > 1"),
    ],
)
def test_a_rollup_refuses_what_it_cannot_update(items: str, where: str) -> None:
    inner = (
        "(SELECT b.id AS id, max(a.price) AS top FROM bids b JOIN asks a ON b.id = a.id\n"
        " AND a.ts BETWEEN b.ts AND b.ts + INTERVAL '5' SECOND GROUP BY b.id, b.ts) q"
    )
    having = " HAVING avg(q.top) > 1" if items.startswith("avg") else ""
    err = _error(f"INSERT INTO matches SELECT {items} FROM {inner}\nGROUP BY q.id{having}")
    assert isinstance(err, UnsupportedError)
    assert err.text.startswith(where)


def test_a_comma_join_needs_its_where() -> None:
    err = _error("INSERT INTO matches SELECT b.id AS i\nFROM bids b, asks a")
    assert isinstance(err, UnsupportedError) and (err.line, err.text) == (7, ",")
