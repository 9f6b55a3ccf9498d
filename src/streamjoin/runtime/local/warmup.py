"""A cold driver JVM warmed by the job's own joins while Spark starts the stream.

The first batch of a job in a fresh local JVM costs twice a steady one: Spark's classes load, the
quick compiler compiles them, Janino generates each plan's code (equi benchmark: 2.6-3.2 s against
1.1-1.4 s). Before that batch, the engine's validation and Spark's start of the stream (listing
the sources, its offset log, the first plan) run on one thread for 2-3 s while the other cores
idle. The warm-up uses them: it runs the job's first queries, each as one half of its delta rule
(`runtime.batch.joins`), on a sample of each file stream's input (synthetic rows for other sources),
and writes their rows in the sink's format to a scratch directory. Nothing of it reaches the
job's checkpoint or sinks; its errors are its own and never stop the job.

A warm-up of the whole batch pipeline (state job, join, sink, commit) on the same sample did
more work than it saved: it was still running when the first batch started.

It runs in local mode only (on a cluster the executors' JVMs are elsewhere, and a scratch
directory on the driver's disk is not theirs), once per Spark application, and not with
``streamjoin.warmup = false``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import typing as t

from streamjoin.plan import plan_job
from streamjoin.runtime.batch.joins import delta_join_sql
from streamjoin.runtime.sources import FILE_FORMATS, conform, file_reader, reader_options
from streamjoin.runtime.state.fs import FileStore

if t.TYPE_CHECKING:
    from collections.abc import Collection

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.model import Job, StreamDef

WARMUP_CONF = "streamjoin.warmup"
SAMPLE_ROWS = 2000
"""Rows per stream: enough for every operator to run (a join to find pairs), few enough that
the sample costs nothing next to a batch."""

_log = logging.getLogger(__name__)
_warmed: set[str] = set()
"""Spark applications (ids) a warm-up ran in: a warm JVM gains nothing from another."""
_lock = threading.Lock()
_QUERIES = 2
"""Queries a warm-up runs: the operators they share are warm after one or two."""


def synthetic_sql(stream: StreamDef, rows: int = SAMPLE_ROWS) -> str:
    """SQL of `rows` rows of `stream`'s declared columns, each the row number cast to the
    column's type (the engine's sessions cast as non-ANSI Spark does: numbers to timestamps as
    seconds since the epoch)."""
    cols = ", ".join(f"CAST(id AS {c.type.ddl}) AS `{c.name}`" for c in stream.columns)
    return f"SELECT {cols} FROM range({rows})"


class Warmup:
    """One warm-up run on a daemon thread; `stop()` cancels what is left of it."""

    def __init__(self, spark: SparkSession, job: Job, read: Collection[str]) -> None:
        # A session of its own: its temp views stay out of the caller's.
        self.spark = spark.newSession()
        self.spark.conf.set("spark.sql.ansi.enabled", "false")  # (as the engine's, `Engine`)
        self.job = job
        self.read = set(read)
        self.scratch = tempfile.mkdtemp(prefix="streamjoin-warmup-")
        self.group = f"streamjoin-warmup-{id(self)}"
        self.rows = 0
        """Rows the warm-up's joins wrote."""
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="streamjoin-warmup", daemon=True)

    @classmethod
    def start(cls, spark: SparkSession, job: Job, read: Collection[str]) -> Warmup | None:
        """Start a warm-up for `job`, whose streams `read` the engine reads itself, unless the
        JVM is warm, remote, or the warm-up is turned off."""
        sc = spark.sparkContext
        if spark.conf.get(WARMUP_CONF, "true") == "false" or not (sc.master or "").startswith(
            "local"
        ):
            return None
        with _lock:
            if sc.applicationId in _warmed:
                return None
            _warmed.add(sc.applicationId)
        warmup = cls(spark, job, read)
        warmup._thread.start()
        return warmup

    def stop(self) -> None:
        """Cancel the warm-up's Spark jobs if it still runs, wait for it, drop its files."""
        if self._thread.is_alive():
            self.spark.sparkContext.cancelJobGroup(self.group)
        self._thread.join()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def sample(self, stream: StreamDef) -> DataFrame:
        """A few rows of `stream`: from the first file it will read where the engine reads its
        files, else synthetic (`synthetic_sql`). (The first files of a job's streams tend to
        cover the same event times, so the sample's joins find pairs.)"""
        path = stream.option("path")
        if stream.name in self.read and stream.format in FILE_FORMATS and path:
            try:
                first = FileStore(self.spark).oldest_file(path)
            except Exception:  # a glob, say
                first = None
            if first is not None:
                reader = file_reader(self.spark.read.options(**reader_options(stream)), stream)
                return reader.load(first).limit(SAMPLE_ROWS)
        return self.spark.sql(synthetic_sql(stream))

    def _run(self) -> None:
        try:
            # (in the thread's own JVM thread: pinned threads carry local properties)
            self.spark.sparkContext.setJobGroup(self.group, "streamjoin warm-up", True)
            plan = plan_job(self.job)
            for sp in plan.streams:
                conform(self.sample(sp.stream), sp.stream).createOrReplaceTempView(_view(sp.index))
            for qp in plan.queries[:_QUERIES]:
                left, right = (plan.stream(side.stream).index for side in qp.query.sides)
                sql = delta_join_sql(qp, "left", _view(left), _view(right))
                sink = self.job.sink(qp.query.sink)
                fmt = sink.format if sink.format in FILE_FORMATS else "parquet"
                path = f"{self.scratch}/{qp.query.name}"
                self.spark.sql(sql).write.format(fmt).save(path)
                # Read back: a scan and an aggregate, the kind of job a batch's statistics
                # run; the count is what the tests check the sample join by.
                self.rows += self.spark.read.format(fmt).load(path).count()
        except BaseException as err:  # a warm-up that fails costs only itself
            self.error = err
            _log.debug("warm-up failed: %s", err)


def _view(index: int) -> str:
    return f"_sj_warm_{index}"
