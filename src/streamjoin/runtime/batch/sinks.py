"""Step 5 of a batch: each sink receives its queries' new pairs under ``<path>/batch=<id>/``,
overwritten when a batch is replayed."""

from __future__ import annotations

import threading
import typing as t
import weakref
from dataclasses import dataclass
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
    from streamjoin.plan.shared import SharedMember
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


@dataclass(frozen=True, eq=False)
class Direct:
    """A query's rows for the tasks that make them to write into its Parquet sink themselves
    (``JointWrite.java``): `rows`, an RDD's, as they are, or a shared join's rows through
    `plan`, its `member`'s condition and SELECT (a ``BatchInput``)."""

    name: str
    rows: DataFrame
    plan: t.Any = None
    member: SharedMember | None = None

    def frame(self) -> DataFrame:
        """The same rows in Spark SQL (for Spark's writer, where the tasks cannot write them)."""
        return self.rows if self.member is None else member_frame(self.rows, self.member)


def member_frame(rows: DataFrame, m: SharedMember) -> DataFrame:
    """Member `m`'s share of its shared join's `rows`, under its own column names."""
    mine = rows if m.predicate is None else rows.where(m.predicate)
    return mine.selectExpr(*(f"{c} AS `{a}`" for c, a in m.columns))


def write_outputs(
    ctx: BatchContext,
    frames: Mapping[str, Sequence[DataFrame]],
    joint: Sequence[SharedWrite] = (),
    direct: Sequence[Direct] = (),
) -> dict[str, int]:
    """Write each query's new pairs (`frames`: its parts, by query name) to its sink, the
    `joint` writes of shared joins' members, and the `direct` rows; returns the rows each query
    wrote."""
    return write_frames(ctx.plan.job, ctx.batch_id, ctx.parallelism, frames, joint, direct)


def write_frames(
    job: Job,
    batch_id: int,
    parallelism: int,
    frames: Mapping[str, Sequence[DataFrame]],
    joint: Sequence[SharedWrite] = (),
    direct: Sequence[Direct] = (),
) -> dict[str, int]:
    """`write_outputs` for batch `batch_id` of `job`, its sinks written by up to `parallelism`
    tasks each (also outside a stream's batch: ``--final``). Rows that the tasks making them
    can write (an RDD's, into a Parquet sink of their own) are written in one Spark job, all
    of them; every other sink is a Spark job of its own."""
    per_sink: dict[str, list[tuple[str, DataFrame]]] = {}
    sinks = job.outputs
    for name, parts in frames.items():
        if not parts:
            continue
        out = parts[0]
        for p in parts[1:]:
            out = out.unionAll(p)
        per_sink.setdefault(sinks[name], []).append((name, out))
    together = list(direct)
    writes: list[t.Callable[[], dict[str, int]]] = [write.run_counted for write in joint]
    printed: list[t.Callable[[], dict[str, int]]] = []  # (a console's rows print in order)
    for sink_name, outputs in per_sink.items():
        sink = job.sink(sink_name)
        name, df = outputs[0]
        alone = len(outputs) == 1 and len(frames[name]) == 1
        if alone and direct_sink(sink, df) and direct_rows(df):
            together.append(Direct(name, df))
            continue
        write = partial(_write_observed, sink, outputs, batch_id, parallelism)
        (printed if sink.format == "console" else writes).append(write)
    if together:
        writes.insert(0, partial(write_direct, job, together, batch_id, parallelism))
    rows: dict[str, int] = {}
    for print_rows in printed:
        rows |= print_rows()
    return rows | (writes[0]() if len(writes) == 1 else run_writes(writes))


def run_writes(writes: Sequence[t.Callable[[], dict[str, int]]]) -> dict[str, int]:
    """Run `writes` (each a Spark job whose driver work, planning and the file commit, leaves
    the cores idle: together, so that one's overhead overlaps another's); the rows each query
    wrote."""
    slots = threading.BoundedSemaphore(CONCURRENT_WRITES)
    running = [Background(write, slots) for write in writes]
    results = [w.wait() for w in running]  # all of them, even after a failure
    for error in filter(None, results):
        raise error
    rows: dict[str, int] = {}
    for write in running:
        rows |= write.result()
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


def direct_sink(sink: SinkDef, rows: DataFrame) -> bool:
    """Whether the tasks that make `rows` may write them into `sink` (`write_direct`): a
    Parquet sink with no option but the Parquet writer's own (not Spark's writer's, as
    maxRecordsPerFile), and a driver with the local jar."""
    options = [k for k, _ in sink.options if k != "path"]
    return (
        sink.format == "parquet"
        and all(k == "compression" or k.startswith("parquet.") for k in options)
        and _writer(rows) is not None
    )


def direct_rows(rows: DataFrame) -> bool:
    """Whether the tasks that make `rows` can write them (``JointWrite.takes``): an RDD's rows,
    and a session whose settings ask nothing of Spark's writer alone."""
    return bool(_writer(rows).takes(rows._jdf))


def write_direct(
    job: Job, outputs: Sequence[Direct], batch_id: int, parallelism: int
) -> dict[str, int]:
    """Write `outputs` (`direct_rows`) as batch `batch_id`'s rows of their queries' Parquet sinks
    from the tasks that make them (``JointWrite.java``): one job, and no plan of a write.
    Returns the rows written, by query. An output whose columns share a name goes to Spark's
    writer afterwards (which names them in its error)."""
    sinks = [job.sink(job.outputs[d.name]) for d in outputs]
    got = _writer(outputs[0].rows).parquet(
        [d.rows._jdf for d in outputs],
        [d.plan for d in outputs],
        [sink_batch_path(sink, batch_id) for sink in sinks],
        [{k: v for k, v in sink.options if k != "path"} for sink in sinks],
        batch_id,
    )
    rows: dict[str, int] = {}
    for d, sink, n in zip(outputs, sinks, str(got).split(","), strict=True):
        if int(n) >= 0:
            rows[d.name] = int(n)
        else:
            rows |= _write_observed(sink, [(d.name, d.frame())], batch_id, parallelism)
    return rows


_WRITERS: weakref.WeakKeyDictionary[SparkContext, t.Any] = weakref.WeakKeyDictionary()


def _writer(df: DataFrame) -> t.Any:
    """The JVM's `JointWrite` class, where the driver's JVM has streamjoin's jar
    (`runtime.jvm`; a cluster's executors have it too, as the index's), else None; looked up
    once, as is its method (`StaticMethods`)."""
    from streamjoin.runtime.batch.indexed import index_class

    sc = df.sparkSession.sparkContext
    if sc not in _WRITERS:
        spark, jvm, writer = df.sparkSession, sc._jvm, None
        if jvm is not None and index_class(spark) is not None:
            writer = StaticMethods(jvm.streamjoin.operator.JointWrite)
        _WRITERS[sc] = writer
    return _WRITERS[sc]
