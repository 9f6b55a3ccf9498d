"""INSERT INTO ... SELECT ... FROM a JOIN b ON ...: the queries a job file defines."""

from __future__ import annotations

from streamjoin.model import (
    Column,
    Job,
    JoinSide,
    Query,
    SelectItem,
    SinkDef,
    SqlType,
    StreamDef,
    Watermark,
)
from streamjoin.sql import parse_job

DESIGN_JOB = """\
CREATE STREAM bids (id BIGINT, price DOUBLE, ts TIMESTAMP,
                    WATERMARK FOR ts AS ts - INTERVAL '3' SECOND)
  WITH (format = 'json', path = 'data/bids');
CREATE STREAM asks (id BIGINT, price DOUBLE, ts TIMESTAMP,
                    WATERMARK FOR ts AS ts - INTERVAL '3' SECOND)
  WITH (format = 'json', path = 'data/asks');
CREATE SINK matches WITH (format = 'json', path = 'out/matches');
INSERT INTO matches
SELECT b.id AS bid, a.id AS aid
FROM bids b JOIN asks a
  ON abs(b.price - a.price) <= 0.5
 AND a.ts BETWEEN b.ts - INTERVAL '10' SECOND AND b.ts + INTERVAL '10' SECOND;
"""

PRELUDE = """\
CREATE STREAM bids (id BIGINT, price DOUBLE, name STRING, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (format = 'json', path = 'in/bids');
CREATE STREAM asks (id BIGINT, Price DOUBLE, ok BOOLEAN, ts TIMESTAMP, qty DECIMAL(10,2),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (format = 'json', path = 'in/asks');
CREATE SINK matches WITH (format = 'json', path = 'out/matches');
"""


def _query(sql: str) -> Query:
    job = parse_job(PRELUDE + sql)
    assert len(job.queries) == 1
    return job.queries[0]


def test_design_example_parses_into_the_exact_model() -> None:
    columns = (
        Column("id", SqlType("BIGINT")),
        Column("price", SqlType("DOUBLE")),
        Column("ts", SqlType("TIMESTAMP")),
    )
    expected = Job(
        streams=(
            StreamDef(
                "bids", columns, "json", (("path", "data/bids"),), Watermark("ts", 3_000_000), 1
            ),
            StreamDef(
                "asks", columns, "json", (("path", "data/asks"),), Watermark("ts", 3_000_000), 4
            ),
        ),
        sinks=(SinkDef("matches", "json", (("path", "out/matches"),), line=7),),
        queries=(
            Query(
                name="q1",
                sink="matches",
                left=JoinSide("bids", "b"),
                right=JoinSide("asks", "a"),
                predicate=(
                    "ABS(b.price - a.price) <= 0.5 AND a.ts BETWEEN b.ts - INTERVAL '10' SECOND "
                    "AND b.ts + INTERVAL '10' SECOND"
                ),
                select=(SelectItem("b.id", "bid"), SelectItem("a.id", "aid")),
                line=8,
            ),
        ),
    )
    job = parse_job(DESIGN_JOB, source="design.sql")
    assert job == expected
    assert job.source == "design.sql"


def test_several_inserts_are_named_in_order() -> None:
    job = parse_job(
        PRELUDE
        + "INSERT INTO matches SELECT b.id AS x FROM bids b JOIN asks a ON b.id = a.id;\n"
        + "CREATE SINK other WITH (format = 'console');\n"
        + "INSERT INTO other SELECT a.id AS y FROM asks a JOIN bids b ON a.id < b.id"
    )
    assert [(q.name, q.sink, q.line) for q in job.queries] == [
        ("q1", "matches", 6),
        ("q2", "other", 8),
    ]
    assert job.queries[1].left == JoinSide("asks", "a")
    assert job.queries[1].predicate == "a.id < b.id"


def test_insert_may_precede_the_declarations() -> None:
    job = parse_job(
        "INSERT INTO o SELECT l.id AS id FROM l JOIN r ON l.id = r.id;\n"
        "CREATE STREAM l (id BIGINT) WITH (format = 'rate');\n"
        "CREATE STREAM r (id BIGINT) WITH (format = 'rate');\n"
        "CREATE SINK o WITH (format = 'console')"
    )
    assert job.queries[0].line == 1
    assert job.queries[0].predicate == "l.id = r.id"


def test_where_is_merged_into_the_predicate() -> None:
    q = _query(
        "INSERT INTO matches SELECT b.id AS id FROM bids b INNER JOIN asks a\n"
        "ON b.id = a.id AND b.price > 1\n"
        "WHERE a.ok OR b.name = 'x'"
    )
    assert q.predicate == "b.id = a.id AND b.price > 1 AND (a.ok OR b.name = 'x')"


def test_on_keeps_its_own_parentheses_when_alone() -> None:
    q = _query("INSERT INTO matches SELECT b.id AS id FROM bids b JOIN asks a ON (b.id = a.id)")
    assert q.predicate == "(b.id = a.id)"


def test_unqualified_columns_resolve_to_their_only_side() -> None:
    q = _query(
        "INSERT INTO matches SELECT name, ok AS flag, QTY FROM bids b JOIN asks a\n"
        "ON name = 'x' AND ok AND b.price = a.price"
    )
    assert q.select == (
        SelectItem("b.name", "name"),
        SelectItem("a.ok", "flag"),
        SelectItem("a.qty", "qty"),
    )
    assert q.predicate == "b.name = 'x' AND a.ok AND b.price = a.Price"


def test_column_names_match_case_insensitively_and_keep_the_declared_spelling() -> None:
    q = _query(
        "INSERT INTO MATCHES SELECT B.ID AS Id, a.PRICE FROM BIDS B JOIN Asks A ON b.Id = A.iD"
    )
    assert q.sink == "matches"
    assert q.left == JoinSide("bids", "B")
    assert q.right == JoinSide("asks", "A")
    assert q.select == (SelectItem("B.id", "Id"), SelectItem("A.Price", "Price"))
    assert q.predicate == "B.id = A.id"


def test_aliases_default_to_stream_names() -> None:
    q = _query(
        "INSERT INTO matches SELECT bids.id AS bid FROM bids JOIN asks AS a ON bids.id = a.id"
    )
    assert q.left == JoinSide("bids", "bids")
    assert q.right == JoinSide("asks", "a")
    assert q.predicate == "bids.id = a.id"


def test_self_join_with_aliases() -> None:
    q = _query(
        "INSERT INTO matches SELECT x.id AS first, y.id AS second\n"
        "FROM bids AS x JOIN bids AS y ON x.name = y.name AND x.id < y.id"
    )
    assert q.left == JoinSide("bids", "x")
    assert q.right == JoinSide("bids", "y")
    assert q.predicate == "x.name = y.name AND x.id < y.id"


def test_expressions_are_rendered_as_qualified_spark_sql() -> None:
    q = _query(
        "INSERT INTO matches SELECT\n"
        "  b.price * 2 AS doubled,  -- a comment is dropped\n"
        "  CASE WHEN ok THEN upper(name) ELSE 'none' END AS label,\n"
        "  CAST(qty AS STRING) AS q,\n"
        "  coalesce(b.price, a.price, 0) AS p\n"
        "FROM bids b JOIN asks a ON b.id = a.id AND b.ts >= a.ts - INTERVAL 1 MINUTE\n"
        "WHERE a.qty IS NOT NULL AND b.name IN ('x', 'y')"
    )
    assert q.select == (
        SelectItem("b.price * 2", "doubled"),
        SelectItem("CASE WHEN a.ok THEN UPPER(b.name) ELSE 'none' END", "label"),
        SelectItem("CAST(a.qty AS STRING)", "q"),
        SelectItem("COALESCE(b.price, a.Price, 0)", "p"),
    )
    assert q.predicate == (
        "b.id = a.id AND b.ts >= a.ts - INTERVAL '1' MINUTE AND NOT a.qty IS NULL "
        "AND b.name IN ('x', 'y')"
    )


def test_keyword_and_quoted_column_names_are_quoted_in_the_output() -> None:
    job = parse_job(
        "CREATE STREAM r (timestamp TIMESTAMP, `my col` BIGINT, date STRING)"
        " WITH (format = 'rate');\n"
        "CREATE STREAM s (ts TIMESTAMP) WITH (format = 'rate');\n"
        "CREATE SINK o WITH (format = 'console');\n"
        "INSERT INTO o SELECT r.timestamp AS t, `my col`, date FROM r JOIN s ON r.timestamp = s.ts"
    )
    q = job.queries[0]
    assert q.select == (
        SelectItem("r.`timestamp`", "t"),
        SelectItem("r.`my col`", "my col"),
        SelectItem("r.`date`", "date"),
    )
    assert q.predicate == "r.`timestamp` = s.ts"


def test_timestamp_compared_with_string_literal_is_allowed() -> None:
    q = _query(
        "INSERT INTO matches SELECT b.id AS id FROM bids b JOIN asks a\n"
        "ON b.id = a.id AND b.ts > '2024-01-01 00:00:00' AND a.ts < TIMESTAMP '2030-01-01'"
    )
    assert "b.ts > '2024-01-01 00:00:00'" in q.predicate


def test_multi_way_join_keeps_every_input_and_every_on() -> None:
    q = _query(
        "INSERT INTO matches SELECT b.id AS bid, a.id AS aid, c.id AS cid\n"
        "FROM bids b JOIN asks a ON b.id = a.id\n"
        "JOIN bids c ON c.price = a.price AND c.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND\n"
        "WHERE b.name = 'x';"
    )
    assert q.sides == (JoinSide("bids", "b"), JoinSide("asks", "a"), JoinSide("bids", "c"))
    assert q.multiway and q.further == (JoinSide("bids", "c"),)
    assert q.predicate == (
        "b.id = a.id AND c.price = a.Price AND "
        "c.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND AND b.name = 'x'"
    )
