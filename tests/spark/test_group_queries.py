"""Queries over windowed groups of single streams on Spark against the reference: one stream's
groups (Spark's window() and Flink's TUMBLE/HOP), two streams' groups joined on their window
(Nexmark q8's shape), and a stream's rows joined with groups (Nexmark q7's shape), each emitted
in the batch the reference says, across a restart that replays a batch, and a final run; and
each read from files in the engine's loop, where a buffer's rows of a batch are made in the
batch's tasks by a plan made once, late and malformed rows left out."""

from __future__ import annotations

import typing as t
from datetime import datetime, timedelta

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from streamjoin.plan import plan_job
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch.heldgroups import HeldGroups
from streamjoin.runtime.engine import Engine
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches

from .harness import read_sink, replay_and_check
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
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


@pytest.mark.parametrize("shape", [one_stream, window_join, rows_join])
def test_group_queries_over_files_make_each_batchs_rows_by_a_plan_made_once(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    shape: t.Callable[[], st.SearchStrategy[tuple[str, list[str]]]],
) -> None:
    @settings(max_examples=1, deadline=None, phases=NO_SHRINK)
    @given(seed=st.integers(0, 10_000), query=shape(), final=st.booleans())
    def check(seed: int, query: tuple[str, list[str]], final: bool) -> None:
        _run_files(spark, tmp_path_factory.mktemp("files"), seed, query, final)

    check()


def _run_files(
    spark: SparkSession, tmp: t.Any, seed: int, query: tuple[str, list[str]], final: bool
) -> None:
    """`query` over files in the engine's loop: rows of A 1 µs behind batch 4's watermark (late,
    its window still open) and at it (on time), a malformed line of A in batch 2 that has a
    time and a value, and no file of B in the last batch: neither the late row nor the
    malformed one may reach a buffer. Every batch of files makes its buffers' rows in its
    tasks, by one plan per buffer, reading only its stream's files; two streams' groups are
    joined at each close by a plan made at the first."""
    batches = make_batches(seed, n_batches=6, rows_per_batch=10, keys=3)
    batches[5]["B"] = []  # (B has no file in the last batch: a plan of B's rows reads none)
    insert, columns = query
    streams = [
        stream_ddl(s, str(tmp / "in" / s)).replace("WITH (", "WITH (maxFilesPerTrigger = '1', ")
        for s in "AB"
    ]
    sink = f"CREATE SINK g WITH (format = 'parquet', path = '{tmp / 'g'}');"
    job = parse_job("\n".join([*streams, sink, insert]))
    micros = run_reference(job, batches).watermarks[3]  # (the watermark batch 4 starts with)
    assert micros is not None
    mark = datetime(1970, 1, 1) + timedelta(microseconds=micros)
    for i, at in ((10**6, mark - timedelta(microseconds=1)), (10**6 + 1, mark)):
        batches[4]["A"].append({"id": i, "k": 1, "x": 1e6, "s": f"edge{i}", "ts": at})
    when = t.cast("t.Any", batches[2]["A"][0]["ts"]).isoformat()
    bad = f'{{"id": "x", "k": 1, "x": 1e6, "s": "bad", "ts": "{when}"}}'  # (an id not a number)
    write_batches(tmp / "in", batches, extra_lines={(2, "A"): [bad]})
    (tmp / "in" / "B" / "part-00005.json").unlink()
    made: list[tuple[int, bool]] = []
    plans: list[str] = []
    outputs: list[bool] = []
    planned_rows, plan_rows, output = (
        HeldGroups.planned_rows,
        HeldGroups._plan_rows,
        HeldGroups.output,
    )

    def spy_rows(self: HeldGroups, ctx: t.Any, gq: t.Any, i: int) -> t.Any:
        rows = planned_rows(self, ctx, gq, i)
        made.append((ctx.batch_id, rows is not None))
        return rows

    def spy_plan(self: HeldGroups, ctx: t.Any, gq: t.Any, i: int) -> t.Any:
        plans.append(gq.inputs[i].name)
        return plan_rows(self, ctx, gq, i)

    def spy_output(self: HeldGroups, spark: SparkSession, gq: t.Any) -> t.Any:
        rows = output(self, spark, gq)
        outputs.append(rows is not None)
        return rows

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pruned = jvm.streamjoin.operator.BatchStreams.pruned
    before = pruned()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(HeldGroups, "planned_rows", spy_rows)
        patch.setattr(HeldGroups, "_plan_rows", spy_plan)
        patch.setattr(HeldGroups, "output", spy_output)
        Engine(spark).run(job, checkpoint=str(tmp / "ckpt"), once=True, progress=False, final=final)
    if len(plan_job(job).streams) > 1:  # (a buffer of one stream's rows reads only its files)
        assert pruned() > before
    expected = run_reference(job, batches, final=final)
    assert [r["id"] for r in expected.late["A"] if r["id"] in (10**6, 10**6 + 1)] == [10**6]
    assert expected.outputs["q1"]
    rows = zip(expected.outputs["q1"], expected.arrivals["q1"], strict=True)
    got = read_sink(spark, job, "g", [*columns, "batch"])
    assert normalize(got) == normalize([(*r, b) for r, b in rows])
    assert {b for b, _ in made} >= set(range(len(batches)))
    assert all(ok for b, ok in made if b < len(batches))
    assert plans and sorted(plans) == sorted(set(plans))  # (once per buffer)
    (gq,) = plan_job(job).group_queries
    if len(gq.inputs) == 2 and gq.query.rows is None:  # (two streams' tumbling groups joined)
        assert outputs and all(outputs)  # (each close runs the join planned at the first)


def test_spark_checks_a_group_query_before_the_stream_starts(spark: SparkSession) -> None:
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


def test_a_plan_run_at_every_close_is_one_that_gives_the_same_rows_each_run(
    spark: SparkSession,
) -> None:
    """A close's groups, or two closes' join, are planned once and run again only where the
    plan gives the same rows of the same input at every run (``GroupRows.runsAlike``): no
    current time (a constant once optimised), no random value, no subquery (run once a plan)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    alike = jvm.streamjoin.operator.GroupRows.runsAlike
    rows = spark.range(4).selectExpr("id", "id * 2 AS x")
    rows.createOrReplaceTempView("sj_alike")
    assert alike(spark.sql("SELECT id, max(x) AS m FROM sj_alike GROUP BY id")._jdf)
    for select in (
        "SELECT id, current_timestamp() AS t FROM sj_alike",
        "SELECT id, rand() AS r FROM sj_alike",
        "SELECT id FROM sj_alike WHERE x > (SELECT avg(x) FROM sj_alike)",
    ):
        assert not alike(spark.sql(select)._jdf), select
    spark.catalog.dropTempView("sj_alike")
