"""The engine's own micro-batch loop over file streams, in place of Spark's.

Spark's micro-batch loop costs a batch of a job's file streams about 80 ms before the engine
sees a row, whatever the batch holds (docs/dev-log.md, *Spark's floor*): it lists each
directory, writes its offset and commit logs, analyses, optimises and plans the unified
input's query again, and calls foreachBatch back through py4j. Where every stream of a job is a
directory of files, this loop does the same work once: each stream's reader and the projection
into the unified input are made at the start (`BatchScan`, in the jar of `runtime.jvm`), and
a batch lists the directories, logs its files, and hands the processor its rows, about 10 ms.

Exactly once: batch b's files are logged (``<checkpoint>/loop/<b>``) before it runs, and the
batch is committed by its manifest, as under Spark's loop. A restart runs the logged batch
again when its manifest is missing, with the same files, then takes new ones; a file once
logged is never taken again. Files are taken oldest first (modification time, then path) and
``maxFilesPerTrigger`` at a time per stream, as Spark's file source does, and a batch takes at
most ``streamjoin.batch.maxRows`` input rows, all streams together: one file of each stream in
turn while their rows (their bytes over the stream's bytes a row in its last batch) fit, the
oldest of each stream at least. Spark's file source takes every file listed by default: a batch
of a backlog, or of a rate over what the job keeps up with, would grow until the driver's heap
ran out.

`loop_refusal` says when Spark's loop runs instead: a stream that is not a file stream, a
path with wildcards, a Spark file-source option this loop does not implement, a checkpoint that
Spark's loop started, or the setting ``streamjoin.loop = spark``.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
import typing as t

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.session import clone
from streamjoin.runtime.sources import FILE_FORMATS, file_reader, reader_options
from streamjoin.runtime.state.batchlog import BatchLog

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from streamjoin.plan import JobPlan, StreamPlan
    from streamjoin.runtime.batch.context import BatchReport
    from streamjoin.runtime.batch.processor import BatchProcessor
    from streamjoin.runtime.settings import Settings
    from streamjoin.runtime.state.checkpoint import Checkpoint

EMPTY_DIR = "scan-empty"
"""Under the checkpoint: an empty directory the unified input's plan is first made over."""
MAX_FILES = "maxfilespertrigger"
_SPARK_ONLY = frozenset(
    {
        "latestfirst",
        "maxfileage",
        "filenameonly",
        "cleansource",
        "sourcearchivedir",
        "maxbytespertrigger",
        "maxcachedfiles",
        "discardcachedinputratio",
        "pathglobfilter",
        "recursivefilelookup",
        "modifiedbefore",
        "modifiedafter",
        "basepath",
    }
)
"""Options of Spark's file source that this loop does not implement (lower case)."""
ROW_BYTES = 8.0
"""The bytes a row takes in a stream's files until a batch of the stream measured them (at the
start and after a restart): few, so that a first batch seldom holds more rows than the bound (a
compressed Parquet row of a few numbers takes about that; a JSON or CSV row more)."""
_WILDCARDS = frozenset("*?[{")


def loop_refusal(
    plan: JobPlan,
    store: Checkpoint,
    settings: Settings,
    *,
    given: Mapping[str, t.Any],
    trigger: bool = True,
) -> str | None:
    """Why `plan` runs in Spark's loop rather than this one (None: it runs in this one);
    `trigger`: the run's trigger is one this loop reads (or it has none: ``once``)."""
    if settings.loop == "spark":
        return "streamjoin.loop is spark"
    if given:
        return "some streams are DataFrames the caller gave"
    if not trigger:
        return "the trigger is not in seconds or milliseconds"
    paths = set()
    for sp in plan.streams:
        s = sp.stream
        path = s.option("path") or ""
        if s.format not in FILE_FORMATS:
            return f"stream {s.name!r} is read from {s.format!r}"
        if not path or _WILDCARDS & set(path):
            return f"stream {s.name!r} has no plain directory path"
        spark_only = sorted(k for k, _ in s.options if k.lower() in _SPARK_ONLY)
        if spark_only:
            return f"stream {s.name!r} sets {spark_only[0]}"
        paths.add(store.fs.qualify(path).rstrip("/"))
    if len(paths) < len(plan.streams):
        return "two streams read one directory"
    if store.fs.list_names(store.path("spark/offsets")):
        return "Spark's loop started this checkpoint"
    return None


class FileLoop:
    """Runs a job's batches over its file streams (see the module's text)."""

    def __init__(self, session: SparkSession, plan: JobPlan, scan: t.Any, log: BatchLog) -> None:
        self.session = session
        self.scan = scan
        self.log = log
        self.running = False
        self.streams = [sp.stream for sp in plan.streams]
        self.limits = [_max_files(s.name, dict(s.options)) for s in self.streams]
        read, newest = log.restore()
        for i, s in enumerate(self.streams):
            if read.get(s.name):
                self.scan.seen(i, "\n".join(sorted(read[s.name])))
        self.read = read
        self.newest = newest
        self._queue: list[list[tuple[str, int]]] | None = None
        self._input = 0.0
        """Seconds the running batch took to list and set up its files."""
        self.max_rows = 0
        """The most input rows a batch takes (`streamjoin.batch.maxRows`; 0: no bound)."""
        self._row_bytes: dict[str, float] = {}
        """Per stream: the bytes a row took in its files in its last batch."""
        self._bytes: dict[str, int] = {}
        """Per stream: the bytes of the running batch's files."""
        self.held_back = False
        """Whether the bound has held files back for a later batch."""

    @classmethod
    def start(
        cls,
        spark: SparkSession,
        plan: JobPlan,
        store: Checkpoint,
        sourced: t.Collection[StreamPlan],
        unify: Callable[[Mapping[str, DataFrame]], DataFrame],
    ) -> FileLoop | None:
        """The loop of `plan`'s streams over checkpoint `store` (`sourced`: the streams whose
        state is read back from their files), or None where its scan cannot be made: the
        driver lacks streamjoin's jar, or Spark plans the unified input otherwise (a column
        of the current time, say).

        Raises:
            StreamJoinError: a stream's directory does not exist (as Spark's file source).
        """
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        scans = jvm.streamjoin.loop.BatchScan
        try:
            scans.available()
        except Exception:  # (py4j: a class it cannot find is a package, and calling it fails)
            return None
        streams = [sp.stream for sp in plan.streams]
        for s in streams:
            path = s.option("path") or ""
            if not store.fs.exists(path):
                msg = f"stream {s.name!r}: its path {path} does not exist"
                raise StreamJoinError(msg)
        session = clone(spark)
        empty = store.path(EMPTY_DIR)
        store.fs.mkdirs(empty)
        reader = session.read
        template = unify(
            {
                s.name: file_reader(reader.options(**reader_options(s)), s).load(empty)
                for s in streams
            }
        )
        dirs = "\n".join(s.option("path") or "" for s in streams)
        scan = scans.of(template._jdf, dirs)
        return None if scan is None else cls(session, plan, scan, BatchLog(store, sourced))

    def _poll(self, i: int) -> list[tuple[str, int]]:
        s = self.streams[i]
        try:
            text = str(self.scan.poll(i))
        except Py4JJavaError as err:
            msg = f"stream {s.name!r}: its directory {s.option('path')}: {_java_message(err)}"
            raise StreamJoinError(msg) from None
        out = []
        for line in text.splitlines():
            size, _, path = line.partition("\t")
            out.append((path, int(size)))
        return out

    def _next_files(self, once: bool) -> dict[str, list[tuple[str, int]]]:
        """The next batch's files per stream (none: no new file). With `once`, of the files
        there at the start; else a stream's directory is listed again once the files of its
        last listing are taken (as Spark's file source keeps the files a listing found)."""
        if self._queue is None:
            self._queue = [self._poll(i) for i in range(len(self.streams))]
        elif not once:
            self._queue = [q or self._poll(i) for i, q in enumerate(self._queue)]
        takes = [q[: self.limits[i] or len(q)] for i, q in enumerate(self._queue)]
        if self.max_rows:
            takes = self._bounded(takes)
        files = {}
        for i, s in enumerate(self.streams):
            if takes[i]:
                files[s.name] = takes[i]
                self._queue[i] = self._queue[i][len(takes[i]) :]
        return files

    def _bounded(self, takes: list[list[tuple[str, int]]]) -> list[list[tuple[str, int]]]:
        """The first of `takes`' files (per stream, oldest first) whose rows fit `max_rows`:
        one of each stream in turn, so that the streams' times keep step, a stream stopping at
        its first file that does not fit; the oldest file of each stream at least, so that none
        waits for another's backlog."""
        out: list[list[tuple[str, int]]] = [[] for _ in takes]
        full: set[int] = set()
        rows = 0.0
        for step in range(max(map(len, takes), default=0)):
            for i, take in enumerate(takes):
                if step >= len(take) or i in full:
                    continue
                size = take[step][1]
                more = size / self._row_bytes.get(self.streams[i].name, ROW_BYTES)
                if step and rows + more > self.max_rows:  # (its files wait; smaller ones go on)
                    self.held_back = True
                    full.add(i)
                    continue
                out[i].append(take[step])
                rows += more
        return out

    def _run_batch(
        self,
        processor: BatchProcessor,
        batch: int,
        files: Mapping[str, list[tuple[str, int]]],
        began: float,
    ) -> None:
        index = {s.name: i for i, s in enumerate(self.streams)}
        spec = "\n".join(f"{index[n]}\t{f}" for n, fs in files.items() for f, _ in fs)
        try:
            df = DataFrame(self.scan.batch(batch, spec), self.session)
        except Py4JJavaError as err:  # (a logged file gone before a batch runs again)
            msg = f"batch {batch}: its input files cannot be read: {_java_message(err)}"
            raise StreamJoinError(msg) from None
        self._input = time.monotonic() - began
        self._bytes = {name: sum(size for _, size in fs) for name, fs in files.items()}
        processor(df, batch)
        for name, fs in files.items():
            self.read.setdefault(name, {}).update((f, batch) for f, _ in fs)
        self.log.compact(batch, self.read)

    def run(
        self,
        processor: BatchProcessor,
        *,
        once: bool,
        trigger: float | None,
        timeout: float | None,
        stop: threading.Event | None = None,
        starting: Callable[[int], None] | None = None,
    ) -> bool:
        """Run batches through `processor` until the input is done (`once`), `timeout` seconds
        pass, `stop` is set, or Ctrl-C; returns whether it was stopped before its input was
        done. `starting`: called with each new batch's id once its files are logged, before it
        runs (elastic executors: `runtime.executors`)."""
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        stop = stop or threading.Event()
        told = processor.on_batch

        def on_batch(report: BatchReport) -> None:
            # (A batch's time counts from the listing of its files, as Spark's trigger's does.)
            seconds, phases = report.seconds + self._input, {"input": round(self._input, 3)}
            for name, stats in report.streams.items():
                rows = stats.ok + stats.late + stats.malformed
                if rows and self._bytes.get(name):
                    self._row_bytes[name] = self._bytes[name] / rows
            if told is not None:
                told(dataclasses.replace(report, seconds=seconds, phases=phases | report.phases))

        processor.on_batch = on_batch
        said = False
        # (Ctrl-C cancels the batch's jobs, which its threads start in this group too; the
        # caller's thread gets its own group back at the end.)
        context = self.session.sparkContext
        kept = {k: context.getLocalProperty(k) for k in _GROUP_PROPERTIES}
        group = f"streamjoin-loop-{id(self)}"
        context.setJobGroup(group, "streamjoin batches", interruptOnCancel=True)
        committed = processor.checkpoint.latest().batch
        self.running = True
        try:
            if self.newest is not None and self.newest > committed:  # (logged, not committed)
                self._run_batch(
                    processor, self.newest, self.log.read(self.newest), time.monotonic()
                )
            batch = max(committed, self.newest if self.newest is not None else -1) + 1
            while True:
                if stop.is_set() or (deadline is not None and time.monotonic() > deadline):
                    return True
                began = time.monotonic()
                files = self._next_files(once)
                if self.held_back and not said:
                    said = True
                    print(
                        f"streamjoin: a batch takes at most {self.max_rows:,} input rows "
                        "(streamjoin.batch.maxRows): the other files wait for the next batches",
                        file=sys.stderr,
                        flush=True,
                    )
                if files:
                    self.log.write(batch, files)
                    if starting is not None:
                        starting(batch)
                    self._run_batch(processor, batch, files, began)
                    batch += 1
                elif once:
                    return False
                if not once and trigger is not None:
                    # (At least 10 ms between listings that found nothing, as Spark's loop.)
                    wait = began + max(trigger, 0.0 if files else 0.01) - time.monotonic()
                    if deadline is not None:
                        wait = min(wait, deadline - time.monotonic())
                    if wait > 0:
                        stop.wait(wait)
        except KeyboardInterrupt:
            # (A batch cut short is not committed: a restart runs it again.)
            context.cancelJobGroup(group)
            processor.error = None
            return True
        finally:
            self.running = False
            processor.on_batch = told
            for key, value in kept.items():
                context.setLocalProperty(key, value)  # type: ignore[arg-type]


_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
"""Spark's local properties that `SparkContext.setJobGroup` sets on the calling thread."""


def batch_rows(spark: SparkSession, setting: int) -> int:
    """The most input rows a batch takes: `setting` (`streamjoin.batch.maxRows`), or where it
    is `auto` (0) one for each `HEAP_BYTES_A_ROW` of the driver's heap."""
    if setting:
        return setting
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return max(int(jvm.java.lang.Runtime.getRuntime().maxMemory()) // HEAP_BYTES_A_ROW, 1)


HEAP_BYTES_A_ROW = 8192
"""The driver's heap a batch's input row may take, for `auto`: about 230,000 rows under a 2 GiB
``-Xmx`` (the JVM's usable heap is somewhat less). A batch's working memory grows with its rows
and their pairs beside the state's share of the heap: a live equi join at twice what it keeps
up with (a state of 5 million rows, 14 pairs a row) ran out of a 2 GiB heap in batches of
400,000 rows and not in batches of 160,000, and batches far smaller pay their fixed cost more
often (docs/benchmarks.md)."""


def _java_message(err: Py4JJavaError) -> str:
    """The JVM's message of `err`, in one line."""
    return " ".join(str(err.java_exception.getMessage() or err).split())


def _max_files(stream: str, options: Mapping[str, str]) -> int:
    """The stream's ``maxFilesPerTrigger`` (0: no limit)."""
    for key, value in options.items():
        if key.lower() == MAX_FILES:
            try:
                n = int(value)
            except ValueError:
                n = 0
            if n < 1:
                msg = (
                    f"stream {stream!r}: maxFilesPerTrigger must be a whole number, at least 1; "
                    f"got {value!r}"
                )
                raise StreamJoinError(msg)
            return n
    return 0
