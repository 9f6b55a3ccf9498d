"""Step 5 of a batch: each sink receives its queries' new pairs under ``<path>/batch=<id>/``,
overwritten when a batch is replayed."""

from __future__ import annotations

import threading
import typing as t
import weakref
from functools import partial

from pyspark.sql import Observation
from pyspark.sql import functions as F

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.jvm.statics import StaticMethods
from streamjoin.runtime.threads import Background, metrics

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark import SparkContext
    from pyspark.sql import DataFrame

    from streamjoin.model import Job, SinkDef
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.sharedsinks import SharedWrite

SINK_FORMATS = ("json", "parquet", "csv", "console")


def sink_batch_path(sink: SinkDef, batch_id: int) -> str:
    """``<path>/batch=<id>``: readers see a ``batch`` column telling which batch produced a row."""
    path = sink.option("path")
    if not path:
        msg = f"sink {sink.name!r} (format {sink.format!r}) needs a path option"
        raise StreamJoinError(msg)
    return f"{path.rstrip('/')}/batch={batch_id}"


def write_sink(sink: SinkDef, df: DataFrame, batch_id: int) -> None:
    """Write `df` as batch `batch_id`'s output of `sink` (idempotent: the batch's dir is
    replaced)."""
    if sink.format == "console":
        rows = df.collect()
        print(f"-- {sink.name}, batch {batch_id}: {len(rows)} rows")
        for row in rows:
            print("  " + ", ".join(f"{k}={v}" for k, v in row.asDict().items()))
        return
    if sink.format not in SINK_FORMATS:
        msg = f"sink {sink.name!r}: unsupported format {sink.format!r}"
        raise StreamJoinError(msg)
    options = {k: v for k, v in sink.options if k != "path"}
    if sink.format == "csv":
        options.setdefault("header", "true")
    df.write.mode("overwrite").format(sink.format).options(**options).save(
        sink_batch_path(sink, batch_id)
    )


CONCURRENT_WRITES = 8
"""Sink writes run at once. Unbounded, a job of 100 sinks queued so many Spark jobs on the
cores that broadcasts waited past Spark's 300 s timeout and the batch failed."""


def write_outputs(
    ctx: BatchContext,
    frames: Mapping[str, Sequence[DataFrame]],
    joint: Sequence[SharedWrite] = (),
) -> dict[str, int]:
    """Write each query's new pairs (`frames`: its parts, by query name) to its sink, every sink
    as one Spark job, and the `joint` writes of shared joins' members; returns the rows each
    query wrote."""
    return write_frames(ctx.plan.job, ctx.batch_id, ctx.parallelism, frames, joint)


def write_frames(
    job: Job,
    batch_id: int,
    parallelism: int,
    frames: Mapping[str, Sequence[DataFrame]],
    joint: Sequence[SharedWrite] = (),
) -> dict[str, int]:
    """`write_outputs` for batch `batch_id` of `job`, its sinks written by up to `parallelism`
    tasks each (also outside a stream's batch: ``--final``)."""
    per_sink: dict[str, list[tuple[str, DataFrame]]] = {}
    sinks = job.outputs
    for name, parts in frames.items():
        if not parts:
            continue
        out = parts[0]
        for p in parts[1:]:
            out = out.unionAll(p)
        per_sink.setdefault(sinks[name], []).append((name, out))
    slots = threading.BoundedSemaphore(CONCURRENT_WRITES)
    writes = [Background(write.run, slots) for write in joint]
    rows: dict[str, int] = {}
    counting: list[Background] = []
    for sink_name, outputs in per_sink.items():
        sink = job.sink(sink_name)
        if len(outputs) == 1 and _direct(sink, frames[outputs[0][0]]):
            write = partial(write_rdd, sink, outputs[0], batch_id, parallelism)
        else:
            write = partial(_write_observed, sink, outputs, batch_id, parallelism)
        if len(per_sink) + len(joint) == 1 or sink.format == "console":  # (console: in order)
            rows |= write()
        else:
            # Each sink is its own Spark job whose driver work (planning, the file commit)
            # leaves the cores idle: run them together so one's overhead overlaps another's.
            counting.append(Background(write, slots))
    results = [w.wait() for w in [*writes, *counting]]  # all of them, even after a failure
    for error in filter(None, results):
        raise error
    for running in counting:
        rows |= running.result()
    for shared in joint:
        rows |= shared.rows()
    return rows


def _write_observed(
    sink: SinkDef, outputs: Sequence[tuple[str, DataFrame]], batch_id: int, parallelism: int
) -> dict[str, int]:
    """Write `outputs` (query name, its pairs) to `sink` in one Spark job; the rows of each."""
    observed = []
    for name, df in outputs:
        obs = Observation(f"sj_{name}_{batch_id}")
        observed.append((name, df.observe(obs, F.count(F.lit(1)).alias("rows")), obs))
    sink_df = observed[0][1]
    for _, df, _ in observed[1:]:
        sink_df = sink_df.unionByName(df)
    # A live batch's pairs come from a union of a few cached slices per stream, each its own
    # partitions: as many tasks as cores write them, not a task (and a file) each.
    write_sink(sink, sink_df.coalesce(parallelism), batch_id)
    return {name: int(metrics(obs).get("rows", 0)) for name, _, obs in observed}


def _direct(sink: SinkDef, parts: Sequence[DataFrame]) -> bool:
    """Whether `write_rdd` writes a query's `parts` alone in `sink`: one frame (an index's
    probe makes its rows, `runtime.batch.indexed`), a Parquet sink with no option but the
    Parquet writer's own (not Spark's writer's, as maxRecordsPerFile), and a driver with the
    local jar."""
    options = [k for k, _ in sink.options if k != "path"]
    return (
        len(parts) == 1
        and sink.format == "parquet"
        and all(k == "compression" or k.startswith("parquet.") for k in options)
        and _writer(parts[0]) is not None
    )


def write_rdd(
    sink: SinkDef, output: tuple[str, DataFrame], batch_id: int, parallelism: int
) -> dict[str, int]:
    """Write a query's pairs (`output`: its name, and its pairs, rows of an RDD) as batch
    `batch_id`'s output of Parquet sink `sink` from the tasks that make them
    (``BatchWrite.java``): one job and no plan of a write. Returns the rows written, by query;
    pairs that are not an RDD's rows, or that the session's settings give to Spark's writer, go
    through it, by up to `parallelism` tasks (`write_sink`)."""
    name, df = output
    options = {k: v for k, v in sink.options if k != "path"}
    path = sink_batch_path(sink, batch_id)
    written = int(_writer(df).parquet(df._jdf, path, batch_id, options))
    if written >= 0:
        return {name: written}
    return _write_observed(sink, [output], batch_id, parallelism)


_WRITERS: weakref.WeakKeyDictionary[SparkContext, t.Any] = weakref.WeakKeyDictionary()


def _writer(df: DataFrame) -> t.Any:
    """The JVM's `BatchWrite` class, where the driver's JVM has streamjoin's jar
    (`runtime.jvm`; a cluster's executors have it too, as the index's), else None; looked up
    once, as is its method (`StaticMethods`)."""
    from streamjoin.runtime.batch.indexed import index_class

    sc = df.sparkSession.sparkContext
    if sc not in _WRITERS:
        spark, jvm, writer = df.sparkSession, sc._jvm, None
        if jvm is not None and index_class(spark) is not None:
            writer = StaticMethods(jvm.streamjoin.operator.BatchWrite)
        _WRITERS[sc] = writer
    return _WRITERS[sc]
