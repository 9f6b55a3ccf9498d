"""``GROUP BY window(...)`` queries: what the parser makes of them, and what it refuses."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError, UnsupportedError
from streamjoin.model import Aggregation, EventWindow
from streamjoin.sql import parse_job
from tests.reference_cases import PRELUDE

JOIN = "FROM bids b JOIN asks a ON b.id = a.id\n"


def _error(sql: str) -> JobError:
    with pytest.raises(JobError) as info:
        parse_job(PRELUDE + sql, source="job.sql")
    return info.value


def test_a_windowed_aggregation_over_a_join() -> None:
    job = parse_job(
        PRELUDE + "INSERT INTO matches SELECT window.start AS ws, window.end AS we, "
        "name AS name, count(*) AS n, avg(a.price) AS p, count(DISTINCT a.id) AS d\n"
        + JOIN
        + "GROUP BY window(a.ts, '10 seconds', INTERVAL '5' SECOND), b.name HAVING max(a.price) > 1"
    )
    q = job.queries[0]
    assert q.aggregation == Aggregation(
        EventWindow("a.ts", 10_000_000, 5_000_000), ("b.name",), "MAX(a.price) > 1"
    )
    assert [s.sql for s in q.select] == [
        "window.start",
        "window.end",
        "b.name",
        "COUNT(*)",
        "AVG(a.price)",
        "COUNT(DISTINCT a.id)",
    ]
    assert q.predicate == "b.id = a.id"


def test_a_tumbling_window_by_default_and_a_signature_of_its_own() -> None:
    text = "INSERT INTO matches SELECT count(*) AS n\n" + JOIN
    one = parse_job(PRELUDE + text + "GROUP BY window(b.ts, '1 minute')").queries[0]
    two = parse_job(PRELUDE + text + "GROUP BY window(b.ts, '2 minutes')").queries[0]
    assert one.aggregation is not None and one.aggregation.window.tumbling
    assert one.aggregation.window.size_us == 60_000_000
    assert one.signature != two.signature


@pytest.mark.parametrize(
    ("group", "text", "message"),
    [
        ("GROUP BY b.id", "b.id", "GROUP BY has no window"),
        (
            "GROUP BY window(b.ts, '1 second'), window(a.ts, '1 second')",
            "window(a.ts, '1 second')",
            "GROUP BY has two windows",
        ),
        ("GROUP BY window(b.id, '1 second')", "b.id", "its event time is 'ts'"),
        ("GROUP BY window(b.ts, '10 parsecs')", "'10 parsecs'", "durations such as"),
        ("GROUP BY window(b.ts, '1 second', '2 seconds')", "window", "would skip rows"),
        ("GROUP BY window(b.ts)", "window(b.ts)", "an event time, a size"),
    ],
)
def test_refused_windows(group: str, text: str, message: str) -> None:
    err = _error("INSERT INTO matches SELECT count(*) AS n\n" + JOIN + group)
    assert err.line == 8
    assert err.text.startswith(text)
    assert message in err.message


def test_a_column_neither_grouped_nor_aggregated() -> None:
    err = _error(
        "INSERT INTO matches SELECT b.price AS p, count(*) AS n\n"
        + JOIN
        + "GROUP BY window(b.ts, '1 second'), b.name"
    )
    assert (err.line, err.text) == (6, "b.price")
    assert "neither grouped nor aggregated" in err.message
    err = _error(
        "INSERT INTO matches SELECT count(*) AS n\n"
        + JOIN
        + "GROUP BY window(b.ts, '1 second') HAVING a.price > 1"
    )
    assert err.text == "a.price"
    assert err.message.startswith("HAVING")


def test_other_aggregates_and_window_columns() -> None:
    err = _error(
        "INSERT INTO matches SELECT stddev(b.price) AS s\n"
        + JOIN
        + "GROUP BY window(b.ts, '1 second')"
    )
    assert isinstance(err, UnsupportedError)
    assert "use count, sum, avg, min, max" in err.message
    err = _error(
        "INSERT INTO matches SELECT window.middle AS m, count(*) AS n\n"
        + JOIN
        + "GROUP BY window(b.ts, '1 second')"
    )
    assert "a window has a start and an end" in err.message
    err = _error("INSERT INTO matches SELECT b.id AS i\n" + JOIN + "HAVING b.id > 1")
    assert "HAVING needs a GROUP BY" in err.message


def test_distinct_only_in_a_count_of_one_expression() -> None:
    for call in ("sum(DISTINCT a.price)", "count(DISTINCT a.id, a.price)"):
        err = _error(
            f"INSERT INTO matches SELECT {call} AS x\n" + JOIN + "GROUP BY window(b.ts, '1 second')"
        )
        assert isinstance(err, UnsupportedError)
        assert "count(DISTINCT x), of one expression" in err.message
