"""Drive a job batch by batch through the engine and read back what it wrote."""

from __future__ import annotations

import contextlib
import os
import time
import typing as t
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.listener import StreamingQueryListener
from pyspark.sql.types import _parse_datatype_string

from streamjoin.runtime.engine import Engine
from streamjoin.runtime.sources import schema_ddl

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from streamjoin.model import Job, StreamDef
    from streamjoin.runtime.batch.processor import BatchProcessor, BatchReport
    from streamjoin.runtime.progress import Summary

Row = Mapping[str, object]
Batches = Sequence[Mapping[str, Sequence[Row]]]


def run_batches(
    spark: SparkSession,
    job: Job,
    batches: Batches,
    checkpoint: Path,
    *,
    first_batch: int = 0,
    processor: BatchProcessor | None = None,
) -> list[BatchReport]:
    """Feed `batches` (stream → rows) to the job's batch processor, one micro-batch each: a new
    processor, closed at the end, or `processor` (left open: batches after these keep what it
    holds in memory)."""
    engine = Engine(spark)
    own = processor is None
    processor = processor or engine.processor(job, str(checkpoint))
    reports = []
    try:
        for i, batch in enumerate(batches):
            frames = {}
            for name, rows in batch.items():
                frames[name] = local_frame(spark, job.stream(name), rows)
            if frames:
                reports.append(
                    processor.process(engine.unified(processor.plan, frames), first_batch + i)
                )
    finally:
        if own:
            processor.close()
    return reports


def local_frame(spark: SparkSession, stream: StreamDef, rows: Sequence[Row]) -> DataFrame:
    """`rows` as a DataFrame of `stream`'s columns in one partition (as a small file gives)
    that Spark reads without Python workers: built through Arrow (a frame of a Python list is
    unpickled by Python workers at each read, about 50 ms a task)."""
    schema = t.cast("StructType", _parse_datatype_string(schema_ddl(stream)))
    names = [f.name for f in schema.fields]
    arrow = to_arrow_schema(schema, timezone="UTC")
    table = pa.Table.from_pylist([{c: r.get(c) for c in names} for r in rows], schema=arrow)
    return spark.createDataFrame(table, schema=schema).coalesce(1)


def read_sink(
    spark: SparkSession, job: Job, sink: str, columns: Sequence[str]
) -> list[tuple[object, ...]]:
    """All rows a parquet sink holds, as tuples in `columns` order (empty if nothing was
    written)."""
    path = job.sink(sink).option("path")
    assert path is not None
    # (A query of a shared join without results in a batch leaves an empty batch directory.)
    if not Path(path).exists() or not any(Path(path).glob("batch=*/*.parquet")):
        return []
    df = spark.read.parquet(path)
    return [tuple(r[c] for c in columns) for r in df.select(*columns).collect()]


class InputRows(StreamingQueryListener):
    """Spark's count of each batch's input rows, in all and per source (`numInputRows`), and
    the figures the engine published in its progress (`observedMetrics`), by batch id."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[int, list[int]]] = {}
        self.observed: dict[int, dict[str, t.Any]] = {}

    def onQueryStarted(self, event: t.Any) -> None:  # (Spark's camel-case names)
        pass

    def onQueryProgress(self, event: t.Any) -> None:
        p = event.progress
        if p.numInputRows:
            self.rows[p.batchId] = (p.numInputRows, [s.numInputRows for s in p.sources])
        figures = p.observedMetrics.get("streamjoin")
        if figures is not None and figures.batch is not None:
            self.observed[p.batchId] = figures.asDict()

    def onQueryIdle(self, event: t.Any) -> None:
        pass

    def onQueryTerminated(self, event: t.Any) -> None:
        pass


def run_counting_input(
    spark: SparkSession, job: Job, checkpoint: str, batches: int, conf: Mapping[str, str]
) -> tuple[Summary, InputRows]:
    """Run `job` to the end of its input with the Spark settings `conf`, and Spark's count of
    the input rows of its first `batches` batches (`InputRows`), in Spark's micro-batch loop
    (the engine's own has no streaming query to count them)."""
    conf = {"streamjoin.loop": "spark", **conf}
    listener = InputRows()
    spark.streams.addListener(listener)
    try:
        with settings_set(spark, conf):
            summary = Engine(spark).run(job, checkpoint=checkpoint, once=True, progress=False)
        deadline = time.monotonic() + 30
        while len(listener.rows) < batches and time.monotonic() < deadline:
            time.sleep(0.1)  # (Spark's listener bus delivers progress events later)
    finally:
        spark.streams.removeListener(listener)
    return summary, listener


SLICES = {"STREAMJOIN_LOCAL": "off"}
"""A run without the join operator: every two-way join on the cached state slices."""


@contextlib.contextmanager
def settings_set(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """`conf`'s streamjoin settings in force: Spark confs, and environment variables (upper
    case keys, as `runtime.settings` reads them), unset after."""
    env = {k: os.environ.get(k) for k in conf if k.isupper()}
    for key, value in conf.items():
        if key.isupper():
            os.environ[key] = value
        else:
            spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in conf:
            if not key.isupper():
                spark.conf.unset(key)
        for key, had in env.items():
            if had is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = had


def replay_and_check(
    spark: SparkSession,
    job: Job,
    batches: Batches,
    checkpoint: Path,
    columns: Sequence[str],
    *,
    final: bool = False,
    sink: str = "g",
) -> int:
    """Run `batches` with a restart that replays the third (and, with `final`, declare the
    input finished); the sink's rows, each with its batch, must be the reference's (query
    q1's). Returns how many rows that is."""
    from streamjoin.reference import normalize, run_reference

    run_batches(spark, job, batches[:3], checkpoint)
    run_batches(spark, job, batches[2:], checkpoint, first_batch=2)
    if final:
        assert Engine(spark).processor(job, str(checkpoint)).finish() == len(batches)
    expected = run_reference(job, batches, final=final)
    rows = zip(expected.outputs["q1"], expected.arrivals["q1"], strict=True)
    want = [(*r, b) for r, b in rows]
    got = read_sink(spark, job, sink, [*columns, "batch"])
    assert normalize(got) == normalize(want)
    return len(want)


def sparks_metrics(spark: SparkSession) -> dict[str, float]:
    """The gauges of the ``streamjoin`` source in the driver's Spark metrics system (what
    Spark's sinks report), by name (``FiguresSource.reported``)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    text = str(jvm.streamjoin.loop.FiguresSource.reported())
    assert text, "no streamjoin source in Spark's metrics system"
    return {name: float(value) for name, _, value in (f.partition("=") for f in text.split(","))}
