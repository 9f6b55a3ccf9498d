"""The Python API: `Engine.run` on a streaming DataFrame standing in for one stream."""

from __future__ import annotations

import contextlib
import typing as t
from types import SimpleNamespace

import pytest

from streamjoin import parse_job
from streamjoin.errors import StreamJoinError
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.sources import read_stream, schema_ddl
from tests.e2e.files import write_batches

from .harness import read_sink
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


def test_run_once_with_a_dataframe_source(spark: SparkSession, tmp_path: Path) -> None:
    batches = make_batches(21, n_batches=4, rows_per_batch=10)
    write_batches(tmp_path / "in", batches)
    text = "\n".join(
        [
            stream_ddl("A", "/nowhere"),  # replaced by a DataFrame below
            stream_ddl("B", str(tmp_path / "in" / "B")).replace(
                "WITH (", "WITH (maxFilesPerTrigger = '1', "
            ),
            f"CREATE SINK o WITH (format = 'parquet', path = '{tmp_path / 'o'}');",
            "INSERT INTO o SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON a.x < b.x "
            "AND b.x < a.x + 1 AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '3' SECOND;",
        ]
    )
    job = parse_job(text)
    frame = (
        spark.readStream.schema(schema_ddl(job.stream("A")))
        .option("maxFilesPerTrigger", "1")
        .json(str(tmp_path / "in" / "A"))
    )
    summary = Engine(spark).run(
        job, checkpoint=str(tmp_path / "ckpt"), once=True, sources={"A": frame}, progress=False
    )
    expected = run_reference(job, batches)
    got = read_sink(spark, job, "o", ("aid", "bid"))
    assert normalize(got) == normalize(expected.outputs["q1"])
    assert summary.batches == len(batches)
    assert summary.out == {"q1": len(expected.outputs["q1"])}
    assert sum(summary.late.values()) == sum(len(v) for v in expected.late.values())
    assert "rows joined" in summary.render()


def test_only_an_interruption_counts_as_a_stop(spark: SparkSession, tmp_path: Path) -> None:
    """`interrupted` tells a query's error raised by `stop()` (an InterruptedException somewhere
    in its causes, as Spark reports it when a stop lands while a batch is being planned) from a
    real failure."""
    from pyspark.errors import PythonException, StreamingQueryException

    from streamjoin.runtime.engine import interrupted

    def fail(df: t.Any, batch_id: int) -> None:
        msg = f"batch {batch_id} failed"
        raise ValueError(msg)

    failing = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 10)
        .load()
        .writeStream.foreachBatch(fail)
        .option("checkpointLocation", str(tmp_path / "failing"))
        .start()
    )
    with contextlib.suppress(StreamingQueryException, PythonException):
        failing.awaitTermination(60)
    assert failing.exception() is not None
    assert not interrupted(failing)

    # Spark's report of a stop that interrupted a batch's planning, and real errors, built as
    # JVM exceptions: what `query._jsq.exception()` holds.
    jvm = spark.sparkContext._jvm
    assert jvm is not None

    def query_failed_with(error: t.Any) -> t.Any:
        option = jvm.scala.Option.apply(error)
        return SimpleNamespace(_jsq=SimpleNamespace(exception=lambda: option))

    stop = jvm.org.apache.spark.SparkException(
        "Exception thrown in awaitResult: ", jvm.java.lang.InterruptedException()
    )
    assert interrupted(query_failed_with(stop))
    assert interrupted(query_failed_with(jvm.java.lang.IllegalStateException("x", stop)))
    assert not interrupted(query_failed_with(jvm.java.lang.IllegalStateException("x")))


def test_a_batch_cancelled_by_a_timeout_is_no_failure(spark: SparkSession) -> None:
    """A run stopped at its timeout cancels the batch's Spark jobs: that batch's error is the
    stop's doing, not a failure; the same error without a stop, or another one, is raised."""
    import pytest
    from py4j.protocol import Py4JJavaError

    from streamjoin.errors import StreamJoinError
    from streamjoin.runtime.engine import raise_failure

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    cancelled = jvm.org.apache.spark.SparkException(
        "[SPARK_JOB_CANCELLED] Job 3 cancelled Query [id = x] was stopped SQLSTATE: XXKDA"
    )
    query = SimpleNamespace(exception=lambda: None, _jsq=None)

    def failed(error: t.Any) -> t.Any:
        err = Py4JJavaError("An error occurred while calling save.", error)
        return SimpleNamespace(error=err, session=spark, driver_heap="1.8 GiB")

    raise_failure(query, failed(cancelled), stopped=True)  # type: ignore[arg-type]
    with pytest.raises(StreamJoinError, match="a batch failed"):
        raise_failure(query, failed(cancelled))  # type: ignore[arg-type]
    other = jvm.java.lang.IllegalStateException("x")
    with pytest.raises(StreamJoinError, match="a batch failed"):
        raise_failure(query, failed(other), stopped=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("no_such_module.Source", "cannot be imported: No module named 'no_such_module'"),
        (
            "tests.e2e.pysource.rows",
            "is not a class of pyspark.sql.datasource.DataSource (package.module.Class)",
        ),
        (
            "tests.e2e.pysource.Missing",
            "is not a class of pyspark.sql.datasource.DataSource (package.module.Class)",
        ),
    ],
)
def test_a_python_stream_whose_source_is_no_data_source_is_refused(
    spark: SparkSession, source: str, said: str
) -> None:
    job = parse_job(f"CREATE STREAM s (id BIGINT) WITH (format = 'python', source = '{source}');")
    with pytest.raises(StreamJoinError) as err:
        read_stream(spark, job.stream("s"))
    assert str(err.value) == f"stream 's': source {source!r} {said}"
