"""Spark's micro-batch loop with the least an engine does in it (``spark-floor`` in
`benchmarks.engines`): the job's streams read and unified as our engine reads them, and each
batch's rows read once into Spark's ``noop`` sink. What a batch costs there is the floor under
any engine that runs inside Spark's loop: the file source's listing, planning the batch's input,
the offset and commit logs, the call into Python, and one job that reads the batch."""

from __future__ import annotations

import os
import typing as t

from benchmarks.engines_live import _await

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.model import Job

FLOOR = "spark-floor"
"""The engine's name in a benchmark's report."""


def _read_once(df: DataFrame, batch_id: int) -> None:
    """A batch's rows read and dropped (Spark counts them as the batch's input rows)."""
    df.write.format("noop").mode("overwrite").save()


def _run_floor(spark: SparkSession, job: Job, workdir: str, time_limit: float | None) -> bool:
    """Spark's loop over `job`'s streams to the end of their input (``availableNow``, as our
    engine runs a backlog), stopped after `time_limit` seconds (True if it was); Spark's
    checkpoint under `workdir`."""
    from streamjoin.plan import plan_job
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.sources import read_stream

    plan = plan_job(job)  # (the streams' order and tags; no query is analysed or run)
    frames = {sp.name: read_stream(spark, sp.stream) for sp in plan.streams}
    unified = Engine(spark).unified(plan, frames)
    query = (
        unified.writeStream.foreachBatch(_read_once)
        .option("checkpointLocation", os.path.join(workdir, "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    return _await([query], time_limit)
