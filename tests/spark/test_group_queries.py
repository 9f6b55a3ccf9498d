"""Queries over windowed groups of single streams on Spark against the reference: one stream's
groups (Spark's window() and Flink's TUMBLE/HOP), two streams' groups joined on their window
(Nexmark q8's shape), and a stream's rows joined with groups (Nexmark q7's shape), each emitted
in the batch the reference says, across a restart that replays a batch, and a final run."""

from __future__ import annotations

import typing as t

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from streamjoin.runtime.engine import Engine
from streamjoin.sql import parse_job

from .harness import replay_and_check
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    import pytest
    from pyspark.sql import SparkSession

SIZES = st.sampled_from([2, 3, 5])
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)
"""Each example runs Spark batches: a failure is reported as found, not shrunk for minutes."""


@st.composite
def one_stream(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A GROUP BY over stream A alone, written either way: its INSERT and output columns."""
    size = draw(SIZES)
    slide = draw(st.sampled_from([size, 1]))
    where = draw(st.sampled_from(["", " WHERE x > 3"]))
    having = draw(st.sampled_from(["", " HAVING count(*) > 1"]))
    aggregates = "count(*) AS n, sum(x) AS sx, max(s) AS ms, count(DISTINCT k) AS dk"
    form = draw(st.sampled_from(["hop", "window", "distinct"]))
    if form == "distinct":  # each window's distinct values
        tumble = f"TUMBLE(TABLE A, DESCRIPTOR(ts), INTERVAL '{size}' SECOND)"
        sql = f"INSERT INTO g SELECT DISTINCT window_start, k, s FROM TABLE({tumble}){where};"
        return sql, ["window_start", "k", "s"]
    if form == "hop":
        hop = f"HOP(TABLE A, DESCRIPTOR(ts), INTERVAL '{slide}' SECOND, INTERVAL '{size}' SECOND)"
        sql = (
            f"INSERT INTO g SELECT window_start, window_end AS we, k, {aggregates} "
            f"FROM TABLE({hop}){where} GROUP BY window_start, window_end, k{having};"
        )
        return sql, ["window_start", "we", "k", "n", "sx", "ms", "dk"]
    sql = (
        f"INSERT INTO g SELECT window.start AS ws, k, {aggregates} FROM A{where} "
        f"GROUP BY window(ts, '{size} seconds', '{slide} seconds'), k{having};"
    )
    return sql, ["ws", "k", "n", "sx", "ms", "dk"]


@st.composite
def window_join(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Two streams' groups per tumbling window joined on the window and a key (q8's shape)."""
    size = draw(SIZES)
    on = draw(st.sampled_from(["a.k = b.k", "a.n >= b.n"]))
    bound = draw(st.sampled_from(["start", "end"]))

    def side(stream: str, alias: str) -> str:
        tumble = f"TUMBLE(TABLE {stream}, DESCRIPTOR(ts), INTERVAL '{size}' SECOND)"
        return (
            f"(SELECT k, count(*) AS n, window_{bound} AS w FROM TABLE({tumble}) "
            f"GROUP BY k, window_start, window_end) {alias}"
        )

    sql = (
        f"INSERT INTO g SELECT a.k AS ka, b.k AS kb, a.n AS na, b.n AS nb, a.w AS w "
        f"FROM {side('A', 'a')} JOIN {side('B', 'b')} ON {on} AND a.w = b.w;"
    )
    return sql, ["ka", "kb", "na", "nb", "w"]


@st.composite
def rows_join(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A stream's rows joined with A's groups per tumbling window (q7's shape): the rows whose
    x is their window's highest, or above its key's mean, within bounds of the window."""
    size = draw(SIZES)
    stream = draw(st.sampled_from(["A", "B"]))
    bound = draw(st.sampled_from(["start", "end"]))
    keyed = draw(st.booleans())
    # (Bounds of r.ts around the window's column: its own window, or wider, or shifted.)
    lo, hi = {
        "start": draw(st.sampled_from([(0, size), (-1, size + 1), (1, size)])),
        "end": draw(st.sampled_from([(-size, 0), (-size - 1, 1), (-size, -1)])),
    }[bound]

    def at(off: int) -> str:
        sign = "+" if off >= 0 else "-"
        return f"g.w {sign} INTERVAL '{abs(off)}' SECOND"

    tumble = f"TUMBLE(TABLE A, DESCRIPTOR(ts), INTERVAL '{size}' SECOND)"
    keys = "k, " if keyed else ""
    groups = (
        f"(SELECT {keys}max(x) AS hx, avg(x) AS ax, window_{bound} AS w FROM TABLE({tumble}) "
        f"GROUP BY {keys}window_start, window_end) g"
    )
    on = "r.k = g.k AND r.x >= g.ax" if keyed else "r.x = g.hx"
    sql = (
        f"INSERT INTO g SELECT r.id AS id, r.x AS x, g.w AS w FROM {stream} r JOIN {groups} "
        f"ON {on} WHERE r.ts BETWEEN {at(lo)} AND {at(hi)};"
    )
    return sql, ["id", "x", "w"]


def _run(
    spark: SparkSession,
    tmp: t.Any,
    seed: int,
    query: tuple[str, list[str]],
    final: bool,
) -> None:
    insert, columns = query
    sink = f"CREATE SINK g WITH (format = 'parquet', path = '{tmp / 'g'}');"
    job = parse_job("\n".join([stream_ddl("A"), stream_ddl("B"), sink, insert]))
    assert job.group_queries and not job.queries
    Engine(spark).validate(job)  # (what a run checks first: Spark analyses the query's SQL)
    batches = make_batches(seed, n_batches=5, rows_per_batch=10, keys=3)
    replay_and_check(spark, job, batches, tmp / "ckpt", columns, final=final)


@settings(max_examples=1, deadline=None, phases=NO_SHRINK)
@given(seed=st.integers(0, 10_000), query=one_stream(), final=st.booleans())
def test_one_streams_groups_match_the_reference(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    query: tuple[str, list[str]],
    final: bool,
) -> None:
    _run(spark, tmp_path_factory.mktemp("one"), seed, query, final)


@settings(max_examples=1, deadline=None, phases=NO_SHRINK)
@given(seed=st.integers(0, 10_000), query=window_join(), final=st.booleans())
def test_two_streams_groups_joined_on_their_window_match_the_reference(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    query: tuple[str, list[str]],
    final: bool,
) -> None:
    _run(spark, tmp_path_factory.mktemp("join"), seed, query, final)


@settings(max_examples=1, deadline=None, phases=NO_SHRINK)
@given(seed=st.integers(0, 10_000), query=rows_join(), final=st.booleans())
def test_a_streams_rows_joined_with_groups_match_the_reference(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    query: tuple[str, list[str]],
    final: bool,
) -> None:
    _run(spark, tmp_path_factory.mktemp("rows"), seed, query, final)


def test_spark_checks_a_group_query_before_the_stream_starts(spark: SparkSession) -> None:
    import pytest

    from streamjoin.errors import JobError

    sink = "CREATE SINK g WITH (format = 'parquet', path = '/unused');"
    insert = (
        "INSERT INTO g SELECT window_start, no_such_function(k) AS n "
        "FROM TABLE(TUMBLE(TABLE A, DESCRIPTOR(ts), INTERVAL '2' SECOND)) "
        "GROUP BY window_start, window_end, k;"
    )
    job = parse_job("\n".join([stream_ddl("A"), sink, insert]))
    with pytest.raises(JobError, match="Spark rejects query q1") as info:
        Engine(spark).validate(job)
    assert info.value.text == "INSERT INTO g"
