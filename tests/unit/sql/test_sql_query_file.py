"""A query file added to a served job: one CREATE SINK (optional) and one INSERT INTO, over the
running job's streams; mistakes at their line and column in the query file."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError
from streamjoin.sql import parse_job, parse_query_file

JOB = parse_job(
    "CREATE STREAM A (k BIGINT, ts TIMESTAMP) WITH (format = 'json', path = '/a');\n"
    "CREATE STREAM B (k BIGINT, ts TIMESTAMP) WITH (format = 'json', path = '/b');\n"
    "CREATE SINK old WITH (format = 'json', path = '/old');\n"
)
SINK = "CREATE SINK s1 WITH (format = 'parquet', path = '/o');\n"
INSERT = "INSERT INTO s1 SELECT a.k AS k FROM A a JOIN B b ON a.k = b.k"


def test_the_query_is_named_after_its_sink() -> None:
    sink, query = parse_query_file(SINK + INSERT, JOB)
    assert sink is not None and sink.name == "s1"
    assert (query.name, query.sink, query.line) == ("s1", "s1", 2)
    job = JOB.with_query(query, sink)
    assert [q.name for q in job.queries] == ["s1"] and job.sink("s1") == sink
    assert job.without_query("s1").queries == ()


def test_an_insert_into_a_declared_sink_needs_no_create() -> None:
    sink, query = parse_query_file(INSERT.replace("s1", "old"), JOB)
    assert sink is None and query.name == "old"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("", 1, "expected an INSERT INTO statement"),
        (SINK, 1, "expected an INSERT INTO statement"),
        (f"{SINK}{INSERT};\n{INSERT}", 3, "holds one INSERT INTO"),
        (f"{SINK}{SINK}{INSERT}", 2, "declares one sink"),
        ("CREATE STREAM C (k BIGINT) WITH (format = 'json', path = '/c');", 1, "declare streams"),
        (SINK.replace("s1", "old") + INSERT.replace("s1", "old"), 1, "sink 'old' is defined twice"),
        (SINK + INSERT.replace("JOIN B", "JOIN C"), 2, "unknown stream 'C'"),
        (SINK + INSERT.replace("a.k AS", "a.z AS"), 2, "unknown column"),
    ],
)
def test_mistakes_point_into_the_query_file(text: str, line: int, message: str) -> None:
    with pytest.raises(JobError) as caught:
        parse_query_file(text, JOB, "add.sql")
    assert caught.value.line == line and caught.value.source == "add.sql"
    assert message in caught.value.message
