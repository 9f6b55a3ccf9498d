"""A batch's rows of every Parquet sink written in one job by the tasks that make them
(``JointWrite.java``): a shared join's members each through its own condition and SELECT, in one
pass over the join's rows; sinks it cannot write (another format, Spark's writer's own settings)
go through Spark's writer, and every result is the reference's."""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.plan import plan_job
from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job

from .harness import run_batches, settings_set
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from streamjoin.model import Job

W = "b.ts BETWEEN a.ts - INTERVAL '{0}' SECOND AND a.ts + INTERVAL '{0}' SECOND"
AB = "FROM A a JOIN B b ON"
INSERTS = [
    f"INSERT INTO s0 SELECT a.id AS i, b.id AS j {AB} a.k = b.k AND {W.format(3)};",
    f"INSERT INTO s1 SELECT a.id AS i, b.id AS j {AB} a.k = b.k AND a.x > 5 AND {W.format(2)};",
    f"INSERT INTO s2 SELECT b.id AS i, a.id AS j {AB} b.k = a.k AND a.x < b.x AND {W.format(4)};",
    # (Apart: no key in common with the others.)
    f"INSERT INTO s3 SELECT a.id AS i, b.id AS j {AB} a.s = b.s AND {W.format(2)};",
]


def _job(tmp_path: Path, formats: t.Sequence[str]) -> Job:
    sinks = [
        f"CREATE SINK s{n} WITH (format = '{f}', path = '{tmp_path / f's{n}'}');"
        for n, f in enumerate(formats)
    ]
    return parse_job("\n".join([stream_ddl("A"), stream_ddl("B"), *sinks, *INSERTS]))


def _jobs_run(spark: SparkSession, since: int) -> list[str]:
    """The call sites of the Spark jobs that started after job `since`."""
    store = spark.sparkContext._jsc.sc().statusStore()
    seq = store.jobsList(None)
    jobs = [seq.apply(i) for i in range(seq.size())]
    return [str(j.name()) for j in jobs if j.jobId() > since]


def _last_job(spark: SparkSession) -> int:
    store = spark.sparkContext._jsc.sc().statusStore()
    seq = store.jobsList(None)
    return max((seq.apply(i).jobId() for i in range(seq.size())), default=-1)


def _run_and_check(spark: SparkSession, job: Job, tmp_path: Path, seed: int) -> list[str]:
    plan = plan_job(job)
    assert [[m.name for m in g.members] for g in plan.shared] == [["q1", "q2", "q3"]]
    batches = make_batches(seed, n_batches=4, rows_per_batch=12, keys=3)
    since = _last_job(spark)
    run_batches(spark, job, batches, tmp_path / "ckpt")
    ran = _jobs_run(spark, since)
    expected = run_reference(job, batches).outputs
    for q in job.queries:
        sink = job.sink(q.sink)
        got = spark.read.format(sink.format).load(sink.option("path")).select("i", "j")
        rows = [(r["i"], r["j"]) for r in got.collect()]
        assert normalize(rows) == normalize(expected[q.name]), q.name
    assert sum(len(expected[q.name]) for q in job.queries) > 0
    return ran


def test_every_parquet_sink_is_written_by_the_tasks_that_make_its_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    job = _job(tmp_path, ["parquet"] * 4)
    ran = _run_and_check(spark, job, tmp_path, 3)
    # (No write through Spark's writer, and the shared join's rows are not counted apart.)
    assert not [name for name in ran if name.startswith(("save at", "count at"))], ran


def test_a_member_in_another_format_takes_its_whole_join_to_sparks_writer(
    spark: SparkSession, tmp_path: Path
) -> None:
    job = _job(tmp_path, ["parquet", "json", "parquet", "parquet"])
    ran = _run_and_check(spark, job, tmp_path, 11)
    assert [name for name in ran if name.startswith("save at")], ran


def test_sparks_own_settings_leave_every_sink_to_its_writer(
    spark: SparkSession, tmp_path: Path
) -> None:
    job = _job(tmp_path, ["parquet"] * 4)
    with settings_set(spark, {"spark.sql.files.maxRecordsPerFile": "2"}):
        ran = _run_and_check(spark, job, tmp_path, 5)
    assert [name for name in ran if name.startswith("save at")], ran
    files = list((tmp_path / "s1").glob("batch=*/*.parquet"))
    assert files and all(len(spark.read.parquet(str(f)).collect()) <= 2 for f in files)


def test_members_planned_over_different_placeholders_are_each_written_exactly(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Members planned in different batches (a served job's query added later) read rows
    # through placeholders of their own: their conditions cannot be made together, each
    # keeps its predicate. Here every member gets a placeholder of its own.
    from pyspark.sql import DataFrame

    from streamjoin.runtime.batch import sharedsinks

    plan_member = sharedsinks._member_plan

    def apart(ctx: t.Any, m: t.Any, view: str) -> t.Any:
        jvm = ctx.spark.sparkContext._jvm
        none = jvm.streamjoin.operator.BatchInput.placeholder(ctx.spark.table(view)._jdf)
        own = ctx.scratch.view(DataFrame(none, ctx.spark), f"_sj_own_{len(ctx.scratch.views)}")
        return plan_member(ctx, m, own)

    monkeypatch.setattr(sharedsinks, "_member_plan", apart)
    job = _job(tmp_path, ["parquet"] * 4)
    ran = _run_and_check(spark, job, tmp_path, 7)
    assert not [name for name in ran if name.startswith(("save at", "count at"))], ran
