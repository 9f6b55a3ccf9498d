"""Step 5 of a batch: each sink receives its queries' new pairs under ``<path>/batch=<id>/``,
overwritten when a batch is replayed."""

from __future__ import annotations

import threading
import typing as t
from functools import partial

from pyspark.sql import Observation
from pyspark.sql import functions as F

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.threads import Background, metrics

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

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
    per_sink: dict[str, list[tuple[str, DataFrame, Observation]]] = {}
    sinks = job.outputs
    for name, parts in frames.items():
        if not parts:
            continue
        out = parts[0]
        for p in parts[1:]:
            out = out.unionAll(p)
        obs = Observation(f"sj_{name}_{batch_id}")
        out = out.observe(obs, F.count(F.lit(1)).alias("rows"))
        per_sink.setdefault(sinks[name], []).append((name, out, obs))
    slots = threading.BoundedSemaphore(CONCURRENT_WRITES)
    writes = [Background(write.run, slots) for write in joint]
    for sink_name, outputs in per_sink.items():
        sink_df = outputs[0][1]
        for _, df, _ in outputs[1:]:
            sink_df = sink_df.unionByName(df)
        sink = job.sink(sink_name)
        # A live batch's pairs come from a union of a few cached slices per stream, each its
        # own partitions: as many tasks as cores write them, not a task (and a file) each.
        sink_df = sink_df.coalesce(parallelism)
        if len(per_sink) + len(joint) == 1 or sink.format == "console":  # (console: in order)
            write_sink(sink, sink_df, batch_id)
        else:
            # Each sink is its own Spark job whose driver work (planning, the file commit)
            # leaves the cores idle: run them together so one's overhead overlaps another's.
            writes.append(Background(partial(write_sink, sink, sink_df, batch_id), slots))
    results = [w.wait() for w in writes]  # all of them, even after a failure
    for error in filter(None, results):
        raise error
    rows = {
        name: int(metrics(obs).get("rows", 0))
        for outputs in per_sink.values()
        for name, _, obs in outputs
    }
    for write in joint:
        rows |= write.rows()
    return rows
