"""Spark's micro-batch loop alone (``spark-floor`` in `benchmarks.engines`): the job's streams
read and unified as our engine reads them, each batch handed to a foreachBatch that does
nothing. What that costs a batch is the floor under any engine that runs inside Spark's loop:
planning the batch's input, the offset and commit logs, and the call into Python."""

from __future__ import annotations

import os
import typing as t

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.model import Job

FLOOR = "spark-floor"
"""The engine's name in a benchmark's report."""


def _nothing(df: DataFrame, batch_id: int) -> None:
    """A batch taken and left alone."""


def _run_floor(spark: SparkSession, job: Job, workdir: str) -> None:
    """Spark's loop over `job`'s streams to the end of their input (``availableNow``, as our
    engine runs a backlog); Spark's checkpoint under `workdir`."""
    from streamjoin.plan import plan_job
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.sources import read_stream

    plan = plan_job(job)  # (the streams' order and tags; no query is analysed or run)
    frames = {sp.name: read_stream(spark, sp.stream) for sp in plan.streams}
    unified = Engine(spark).unified(plan, frames)
    query = (
        unified.writeStream.foreachBatch(_nothing)
        .option("checkpointLocation", os.path.join(workdir, "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def input_rows(spark: SparkSession, job: Job) -> int:
    """The rows of `job`'s streams' files (counted after the run, outside its time)."""
    from streamjoin.runtime.sources import reader_options, schema_ddl

    total = 0
    for s in job.streams:
        reader = spark.read.format(s.format).options(**reader_options(s)).schema(schema_ddl(s))
        total += reader.load(s.option("path")).count()
    return total
