"""Two-way equi and band joins on executor-memory indexes (`runtime.batch.indexed`, the join
operator): the same rows as the reference over disordered batches with late
rows and NULL keys, after a restart that rebuilds the indexes from the manifest's units, and
when a batch runs twice in one processor (its first attempt's rows taken back), with each
batch's delta shuffled to the partitions' tasks or probed in one task."""

from __future__ import annotations

import re
import typing as t
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame

from streamjoin.errors import StreamJoinWarning
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch import indexed as indexed_module
from streamjoin.runtime.batch import indexplans as indexplans_module
from streamjoin.runtime.batch.indexed import index_class
from streamjoin.runtime.batch.indexplans import ProbePlans
from streamjoin.runtime.batch.processor import BatchProcessor
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.state.statejob import StateJob
from streamjoin.sql import parse_job

from .harness import read_sink, run_batches
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

    from streamjoin.model import Job

    from .harness import Batches

W3 = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND"
QUERIES = {
    "equi_window": ("A a JOIN B b", f"a.k = b.k AND {W3}"),
    "equi_residual": ("A a JOIN B b", f"a.k = b.k AND abs(a.x - b.x) <= 4.5 AND {W3}"),
    "one_sided": ("A a JOIN B b", "a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL 2 SECONDS"),
    "full_history": ("A a JOIN B b", "a.k = b.k AND a.s <> b.s"),
    "two_keys_coerced": (
        "A a JOIN B b",
        f"a.k = b.k AND a.id % 3 = CAST(b.id % 3 AS INT) AND {W3}",
    ),
    "self_join": ("A a JOIN A b", f"a.k = b.k AND a.id < b.id AND {W3}"),
    "band_window": ("A a JOIN B b", f"abs(a.x - b.x) <= 1.5 AND {W3}"),
    "theta_window": ("A a JOIN B b", f"a.x < b.x AND b.x < a.x + 2.0 AND {W3}"),
    "band_history": ("A a JOIN B b", "b.x BETWEEN a.x - 0.5 AND a.x + 0.5 AND a.s <> b.s"),
    "theta_history": ("A a JOIN B b", "a.x * b.x > 20.0 AND a.s <> b.s"),
    "or_window": ("A a FULL JOIN B b", f"(a.k = b.k OR a.id = b.id) AND {W3}"),
    "or_history": ("A a JOIN B b", "(a.k = b.k OR a.s = b.s) AND a.x < b.x"),
    "band_with_key": ("A a JOIN B b", f"a.k = b.k AND abs(a.x - b.x) <= 1.5 AND {W3}"),
    "left_outer": ("A a LEFT JOIN B b", f"a.k = b.k AND {W3}"),
    # (Outer joins whose rows have several copies, which share their matched marks; an outer
    # join's pairs are the inner join's.)
    "time_buckets": ("A a LEFT JOIN B b", f"a.k = b.k AND {W3} WITH (time_buckets = 'true')"),
    "matrix_or": (
        "A a FULL JOIN B b",
        f"(a.k = b.k OR a.id = b.id) AND {W3} WITH (partitioning = 'matrix', units = 4)",
    ),
    "biclique_band": (
        "A a RIGHT JOIN B b",
        f"abs(a.x - b.x) <= 1.5 AND {W3} WITH (partitioning = 'biclique', units = 3)",
    ),
}
PROBED_IN_ONE_TASK = {
    # (Each shape of probe once between the two modes whose delta is one task; an outer join
    # in both, its rows without a partner decided in that task.)
    "one-task": (
        "equi_window", "one_sided", "self_join", "band_history", "theta_window",
        "or_history", "band_with_key", "biclique_band", "left_outer",
    ),
    "batch-rows": (
        "equi_residual", "two_keys_coerced", "full_history", "band_window", "theta_history",
        "or_window", "time_buckets", "matrix_or", "left_outer",
    ),
}  # fmt: skip
"""The queries whose delta is probed in one task: the shuffled probe runs them all."""
SELECT = "a.id AS aid, b.id AS bid, a.x + b.x AS xs"
COLUMNS = ("aid", "bid", "xs")


@pytest.fixture
def indexed(spark: SparkSession) -> Iterator[None]:
    if index_class(spark) is None:
        pytest.skip("streamjoin's jar is not on the session's class path")
    yield


def _job(tmp_path: Path, queries: t.Mapping[str, tuple[str, str]]) -> Job:
    parts = [stream_ddl("A"), stream_ddl("B")]
    for name in queries:
        parts.append(f"CREATE SINK {name} WITH (format = 'parquet', path = '{tmp_path / name}');")
    for name, (from_, on) in queries.items():
        parts.append(f"INSERT INTO {name} SELECT {SELECT} FROM {from_} ON {on};")
    return parse_job("\n".join(parts))


def _feed(
    spark: SparkSession, processor: BatchProcessor, job: Job, batches: Batches, first: int = 0
) -> None:
    run_batches(spark, job, batches, Path("/unused"), first_batch=first, processor=processor)


def _check(spark: SparkSession, job: Job, batches: Batches) -> None:
    expected = run_reference(job, batches)
    for i, q in enumerate(job.queries):
        name = q.sink
        got = read_sink(spark, job, name, COLUMNS)
        want = expected.outputs[f"q{i + 1}"]
        assert normalize(got) == normalize(want), f"{name}: {len(got)} rows, want {len(want)}"


class ProbeTasks(t.NamedTuple):
    queries: t.Mapping[str, tuple[str, str]]
    """The queries run in this mode."""
    planned: list[str] | None
    """The queries whose probe planned their batch's statistics first (None: not recorded)."""


@pytest.fixture(params=["shuffled", "one-task", "batch-rows"])
def probe_tasks(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ProbeTasks]:
    """Each batch's delta shuffled by key to the partitions' tasks, all of it in one task
    (`indexed.one_task` and `two_way_one_task`: a small delta whose files' footers count it), or
    in one task made from the rows Spark planned for the batch, as foreachBatch hands them over
    (`BatchInput`)."""
    mode = request.param
    one = mode != "shuffled"
    names = PROBED_IN_ONE_TASK.get(mode, tuple(QUERIES))
    queries = {name: QUERIES[name] for name in names}
    monkeypatch.setattr(indexed_module, "two_way_one_task", lambda *_: one)
    monkeypatch.setattr(indexed_module, "one_task", lambda *_: one)
    if mode != "batch-rows":
        yield ProbeTasks(queries, None)
        return
    _as_planned(monkeypatch)
    made: list[bool] = []
    batch_input = indexed_module.IndexedJoins.batch_input

    def kept(self: indexed_module.IndexedJoins, ctx: t.Any, qp: t.Any) -> t.Any:
        found = batch_input(self, ctx, qp)
        # (An OR's copy of a row for each table is a projection of the batch's rows; a
        # scheme's places, a band's runs or time buckets are arrays the task makes copies of.)
        made.append(found is not None)
        return found

    monkeypatch.setattr(indexed_module.IndexedJoins, "batch_input", kept)
    yield ProbeTasks(queries, _statistics_first(monkeypatch))
    assert made and all(made), made  # (every other probe read the batch's own rows)


def _statistics_first(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each batch's statistics known before its probes, as a batch's footers tell them, so
    that an outer join's probe decides its rows without a partner in its own task
    (`IndexedJoins.leaving`); the queries whose probe planned them, returned."""
    start = StateJob.start
    planned: list[str] = []

    def known_first(self: StateJob, streaming: t.Any, ctx: t.Any, *, counted: bool) -> t.Any:
        known, statistics = start(self, streaming, ctx, counted=counted)
        stats = statistics() if known is None else known
        return stats, lambda: stats

    alone = ProbePlans.alone

    def recorded(self: ProbePlans, ctx: t.Any, op: t.Any, rows: t.Any) -> t.Any:
        made = alone(self, ctx, op, rows)
        if made is not None:
            planned.append(op.query.name)
        return made

    monkeypatch.setattr(StateJob, "start", known_first)
    monkeypatch.setattr(ProbePlans, "alone", recorded)
    return planned


def _as_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hand the processor each batch as foreachBatch does: rows Spark has planned (an RDD)."""
    unified = Engine.unified

    def planned(self: Engine, plan: t.Any, frames: t.Any) -> DataFrame:
        df = unified(self, plan, frames)
        jdf, session = df._jdf, df.sparkSession
        rdd = jdf.queryExecution().toRdd()
        return DataFrame(
            session._jsparkSession.internalCreateDataFrame(rdd, jdf.schema(), False), session
        )

    monkeypatch.setattr(Engine, "unified", planned)


def test_indexed_joins_equal_the_reference_through_a_restart_and_a_batch_run_twice(
    spark: SparkSession, tmp_path: Path, indexed: None, probe_tasks: ProbeTasks
) -> None:
    job = _job(tmp_path, probe_tasks.queries)
    # (Three batches: two to build the indexes, the second run twice, and after the restart a
    # third, with late rows, run twice too; every query has results in each batch of them.)
    batches = make_batches(3, n_batches=3, rows_per_batch=14, keys=4)
    # Rows without an event time are malformed: joined by no query, with a key that meets.
    for i, stream in ((1, "A"), (2, "B")):
        batches[i][stream].append({"id": 10**6 + i, "k": 1, "x": 0.5, "s": "p", "ts": None})
    checkpoint = str(tmp_path / "ckpt")
    processor = Engine(spark).processor(job, checkpoint)
    try:
        _feed(spark, processor, job, batches[:2])
        # Every query ran on its index, which holds the live rows.
        built = processor.indexed.built()
        assert set(built) == {qp.query.name for qp in processor.plan.joins}
        assert all(at == 1 for at in built.values())
        # Batch 1 again in the same processor: the index takes its rows back first.
        _feed(spark, processor, job, batches[1:2], first=1)
    finally:
        processor.close()
    # A new processor (a restart) builds the indexes from the manifest's units; its last batch
    # runs twice too.
    processor = Engine(spark).processor(job, checkpoint)
    try:
        _feed(spark, processor, job, batches[2:], first=2)
        _feed(spark, processor, job, batches[2:], first=2)
    finally:
        processor.close()
    _check(spark, job, batches)
    # (Its statistics known first, the outer join's probe decided its rows without a partner.)
    left_outer = f"q{list(probe_tasks.queries).index('left_outer') + 1}"
    assert probe_tasks.planned is None or left_outer in probe_tasks.planned, probe_tasks


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000),
    keys=st.sampled_from([1, 2, 50]),
    rows=st.integers(0, 9),
    disorder=st.sampled_from([0.0, 3.0]),
    query=st.sampled_from(["equi_window", "band_window", "theta_window", "theta_history"]),
)
def test_indexed_equi_and_band_joins_match_the_reference_on_generated_streams(
    spark: SparkSession,
    tmp_path_factory: t.Any,
    indexed: None,
    seed: int,
    keys: int,
    rows: int,
    disorder: float,
    query: str,
) -> None:
    tmp_path = tmp_path_factory.mktemp("indexed")
    job = _job(tmp_path, {query: QUERIES[query]})
    batches = make_batches(
        seed, n_batches=4, rows_per_batch=rows, keys=keys, disorder_s=disorder, late_per_batch=1
    )
    processor = Engine(spark).processor(job, str(tmp_path / "ckpt"))
    try:
        _feed(spark, processor, job, batches)
        assert processor.indexed.built() or not any(batches)
    finally:
        processor.close()
    _check(spark, job, batches)


def test_a_state_over_its_memory_budget_spills_and_stays_exact(
    spark: SparkSession, tmp_path: Path, indexed: None
) -> None:
    # Every shape, with a budget of a few bytes a partition: after each batch every row but the
    # newest few is on disk, read back by the probes, the outer joins' decisions, a batch run
    # again (its rows taken back, some spilled) and the windows' expiry.
    job = _job(tmp_path, QUERIES)
    batches = make_batches(11, n_batches=5, rows_per_batch=14, keys=4, late_per_batch=1)
    spark.conf.set("streamjoin.state.memory", "4k")
    processor = Engine(spark).processor(job, str(tmp_path / "ckpt"))
    spilled: list[dict[str, int]] = []
    try:
        for i, batch in enumerate(batches):
            _feed(spark, processor, job, [batch], first=i)
            spilled.append(processor.indexed.spilled(spark))
            if i == 2:
                _feed(spark, processor, job, [batch], first=i)
    finally:
        processor.close()
        spark.conf.unset("streamjoin.state.memory")
    names = {qp.query.name for qp in processor.plan.joins}
    assert all(set(s) == names for s in spilled[1:]), spilled
    assert all(any(s[q] for s in spilled) for q in names), spilled
    _check(spark, job, batches)


def test_the_memory_budget_is_the_jvms_not_each_partitions_even_share(
    spark: SparkSession, tmp_path: Path, indexed: None
) -> None:
    # One join keeps its whole history, seven keep a batch or so: the history's partitions hold
    # several times an even share of the budget (a sixteenth), yet all together stay below it.
    # Nothing spills; at a quarter of that budget, the history's rows do, and stay exact.
    queries = {"history": ("A a JOIN B b", "a.k = b.k AND a.s <> b.s")} | {
        f"brief{i}": (
            "A a JOIN B b",
            f"a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL {i} MILLISECONDS",
        )
        for i in range(7)
    }
    batches = make_batches(12, n_batches=8, rows_per_batch=80, keys=4, late_per_batch=1)
    spilled: dict[str, list[dict[str, int]]] = {}
    for budget in ("760k", "190k"):
        work = tmp_path / budget
        job = _job(work, queries)
        spark.conf.set("streamjoin.state.memory", budget)
        spark.conf.set("streamjoin.share", "false")  # (each query its own join: 16 partitions)
        processor = Engine(spark).processor(job, str(work / "ckpt"))
        try:
            spilled[budget] = []
            for i, batch in enumerate(batches):
                _feed(spark, processor, job, [batch], first=i)
                spilled[budget].append(processor.indexed.spilled(spark))
        finally:
            processor.close()
            spark.conf.unset("streamjoin.state.memory")
            spark.conf.unset("streamjoin.share")
        _check(spark, job, batches)
    assert not any(n for s in spilled["760k"] for n in s.values()), spilled["760k"]
    history = next(q.name for q in job.queries if q.sink == "history")
    assert spilled["190k"][-1][history] > 0, spilled["190k"]


def test_two_indexed_joins_written_to_one_sink_keep_each_key_in_its_partition(
    spark: SparkSession, tmp_path: Path, indexed: None, probe_tasks: ProbeTasks
) -> None:
    # One sink's write is a union of both queries' pairs, coalesced: its tasks are numbered
    # unlike the probes' shuffle partitions, and batches that leave a partition empty make it
    # worse. Every row must still meet its key's partition.
    out = tmp_path / "both"
    ddl = [stream_ddl("A"), stream_ddl("B")]
    ddl.append(f"CREATE SINK both WITH (format = 'parquet', path = '{out}');")
    for name in ("equi_window", "self_join"):
        from_, on = QUERIES[name]
        ddl.append(f"INSERT INTO both SELECT {SELECT}, '{name}' AS q FROM {from_} ON {on};")
    job = parse_job("\n".join(ddl))
    generated = make_batches(11, n_batches=6, rows_per_batch=16, keys=6, late_per_batch=0)
    batches = []
    for i, batch in enumerate(generated):
        keep = {i % 6} if i % 3 else set(range(6))
        batches.append({s: [r for r in rows if r["k"] in keep] for s, rows in batch.items()})
    processor = Engine(spark).processor(job, str(tmp_path / "ckpt"))
    try:
        _feed(spark, processor, job, batches)
        assert len(processor.indexed.built()) == 2
    finally:
        processor.close()
    expected = run_reference(job, batches)
    got = read_sink(spark, job, "both", (*COLUMNS, "q"))
    want = [*expected.outputs["q1"], *expected.outputs["q2"]]
    assert normalize(got) == normalize(want), f"{len(got)} rows, want {len(want)}"


@pytest.mark.parametrize("where", ["key", "select"])
def test_the_current_time_is_planned_every_batch(
    spark: SparkSession,
    tmp_path: Path,
    indexed: None,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    # The current time is a constant of one batch's plan: a probe's input or output planned
    # once for the query would keep the first batch's. (In the key it adds 0: the pairs are
    # the plain join's.)
    now = "CAST(0 * unix_seconds(current_timestamp()) AS BIGINT)"
    key = f"a.k = b.k + {now}" if where == "key" else "a.k = b.k"
    stamp = ", current_timestamp() AS at" if where == "select" else ""
    out = tmp_path / "timed"
    text = [stream_ddl("A"), stream_ddl("B")]
    text.append(f"CREATE SINK timed WITH (format = 'parquet', path = '{out}');")
    text.append(f"INSERT INTO timed SELECT {SELECT}{stamp} FROM A a JOIN B b ON {key} AND {W3};")
    job = parse_job("\n".join(text))
    monkeypatch.setattr(indexed_module, "two_way_one_task", lambda *_: True)
    monkeypatch.setattr(indexed_module, "one_task", lambda *_: True)
    _as_planned(monkeypatch)
    batches = make_batches(5, n_batches=4, rows_per_batch=12, keys=4)
    processor = Engine(spark).processor(job, str(tmp_path / "ckpt"))
    try:
        _feed(spark, processor, job, batches)
        built = processor.indexed.built()
        assert set(built) == {qp.query.name for qp in processor.plan.joins}  # (on its index)
        [planned] = processor.indexed.plans._inputs.values()
        if where == "key":
            assert planned is False  # (its input is planned every batch)
        else:
            assert planned[0] is not None and planned[1] is None  # (its output is)
    finally:
        processor.close()
    plain = _job(tmp_path, {"timed": ("A a JOIN B b", f"a.k = b.k AND {W3}")})
    want = run_reference(plain, batches).outputs["q1"]
    assert normalize(read_sink(spark, job, "timed", COLUMNS)) == normalize(want)
    assert want


@pytest.mark.parametrize("refusal", ["analysis", "java"])
def test_a_probe_input_whose_plan_raises_warns_and_is_planned_every_batch(
    spark: SparkSession,
    tmp_path: Path,
    indexed: None,
    monkeypatch: pytest.MonkeyPatch,
    refusal: str,
) -> None:
    # A plan made once that Spark refuses is a fast path not taken: the batch plans its input
    # itself, exact, and says so with Spark's reason (an analysis error's, or a Java error's
    # own message, not py4j's line naming the call).
    monkeypatch.setattr(indexed_module, "two_way_one_task", lambda *_: True)
    monkeypatch.setattr(indexed_module, "one_task", lambda *_: True)
    _as_planned(monkeypatch)
    reason = "no_such_column" if refusal == "analysis" else 'For input string: "no_such_number"'

    def refused(ctx: t.Any, sides: t.Any, streams: t.Any = None) -> t.Any:
        if refusal == "analysis":
            return ctx.spark.sql("SELECT no_such_column FROM VALUES (1) AS v(c)")
        return ctx.spark.sparkContext._jvm.java.lang.Integer.parseInt("no_such_number")

    monkeypatch.setattr(indexplans_module, "batch_input", refused)
    job = _job(tmp_path, {"refused": QUERIES["equi_window"]})
    batches = make_batches(6, n_batches=4, rows_per_batch=12, keys=4)
    processor = Engine(spark).processor(job, str(tmp_path / "ckpt"))
    try:
        with pytest.warns(StreamJoinWarning, match=re.escape(reason)) as caught:
            _feed(spark, processor, job, batches)
        said = [str(w.message) for w in caught if w.category is StreamJoinWarning]
        # (Once: a plan refused is not tried again.)
        assert len(said) == 1 and said[0].startswith("query q1: its probe's input is planned")
        assert list(processor.indexed.plans._inputs.values()) == [False]
    finally:
        processor.close()
    _check(spark, job, batches)


@pytest.mark.parametrize(
    ("one", "join"),
    [(True, "JOIN"), (False, "JOIN"), (True, "FULL JOIN"), (False, "FULL JOIN")],
    ids=["one-task", "shuffled", "one-task-full", "shuffled-full"],
)
def test_a_band_join_without_a_key_spreads_its_rows_over_the_partitions(
    spark: SparkSession,
    tmp_path: Path,
    indexed: None,
    monkeypatch: pytest.MonkeyPatch,
    one: bool,
    join: str,
) -> None:
    # Each row is stored in the partition of its run of buckets and probes in each partition
    # its band reaches: a large delta is probed in as many tasks, with no limit. An outer
    # join's row decides in its stored copy, marked by a partner its other copies found.
    monkeypatch.setattr(indexed_module, "two_way_one_task", lambda *_: one)
    monkeypatch.setattr(indexed_module, "one_task", lambda *_: one)
    # (A band of 0.3 over values in [0, 10]: runs of 2.4, four of them.)
    job = _job(tmp_path, {"band": (f"A a {join} B b", f"abs(a.x - b.x) <= 0.3 AND {W3}")})
    batches = make_batches(9, n_batches=3, rows_per_batch=30, keys=3)
    processor = Engine(spark).processor(job, str(tmp_path / "ckpt"))
    try:
        _feed(spark, processor, job, batches)
        (key,) = processor.indexed.builds  # (the index's name: the query's key)
        parts = int(spark.conf.get("spark.sql.shuffle.partitions") or "4")
        name = f"{processor.indexed._prefix}/{key}"
        cls = index_class(spark)
        assert cls is not None
        sizes = [int(n) for n in str(cls.sizes(name, parts)).split(",")]
    finally:
        processor.close()
    assert sum(n > 0 for n in sizes) > 1, sizes
    _check(spark, job, batches)
