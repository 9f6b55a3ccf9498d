"""The engine's own micro-batch loop over file streams, in place of Spark's.

Spark's micro-batch loop costs a batch of a job's file streams about 80 ms before the engine
sees a row, whatever the batch holds (docs/dev-log.md, *Spark's floor*): it lists each
directory, writes its offset and commit logs, analyses, optimises and plans the unified
input's query again, and calls foreachBatch back through py4j. Where every stream of a job is a
directory of files, this loop does the same work once: each stream's reader and the projection
into the unified input are made at the start (`BatchScan`, in the jar of `runtime.local`), and
a batch lists the directories, logs its files, and hands the processor its rows, about 10 ms.

Exactly once: batch b's files are logged (``<checkpoint>/loop/<b>``) before it runs, and the
batch is committed by its manifest, as under Spark's loop. A restart runs the logged batch
again when its manifest is missing, with the same files, then takes new ones; a file once
logged is never taken again. Files are taken oldest first (modification time, then path) and
``maxFilesPerTrigger`` at a time per stream, as Spark's file source does.

`loop_refusal` says when Spark's loop runs instead: a stream that is not a file stream, a
path with wildcards, a Spark file-source option this loop does not implement, a checkpoint that
Spark's loop started, elastic executors (which read Spark's progress), or the setting
``streamjoin.loop = spark``.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import typing as t

from pyspark.sql import DataFrame, SparkSession

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.sources import FILE_FORMATS, file_reader, reader_options

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from streamjoin.plan import JobPlan, StreamPlan
    from streamjoin.runtime.batch.context import BatchReport
    from streamjoin.runtime.batch.processor import BatchProcessor
    from streamjoin.runtime.state.checkpoint import Checkpoint

LOOP_DIR = "loop"
"""Under the checkpoint: the loop's log of each batch's files."""
EMPTY_DIR = f"{LOOP_DIR}/empty"
"""An empty directory the unified input's plan is first made over."""
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
_WILDCARDS = frozenset("*?[{")
COMPACT_EVERY = 100
"""Every so many committed batches, the logs so far become one list of the files read."""


def loop_refusal(
    plan: JobPlan, store: Checkpoint, *, given: Mapping[str, t.Any], choice: str
) -> str | None:
    """Why `plan` runs in Spark's loop rather than this one (None: it runs in this one)."""
    if choice == "spark":
        return "streamjoin.loop is spark"
    if given:
        return "some streams are DataFrames the caller gave"
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


class BatchLog:
    """Which files each batch read, under ``<checkpoint>/loop``: ``<b>`` per batch (JSON: each
    stream's files and their sizes), written before the batch runs, and ``<b>.read``, every
    file the batches up to b read and its batch, which replaces the single logs up to b once b
    is committed.
    Also what `runtime.state.sourcefiles.SourceLog` tells a batch: the files of its streams
    whose state is read back from them."""

    def __init__(self, store: Checkpoint, sourced: t.Collection[StreamPlan] = ()) -> None:
        self.fs = store.fs
        self.dir = store.path(LOOP_DIR)
        self.sourced = {sp.name for sp in sourced}
        self._batches: dict[int, dict[str, list[tuple[str, int]]]] = {}

    def _names(self) -> list[str]:
        return self.fs.list_names(self.dir)

    def restore(self) -> tuple[dict[str, dict[str, int]], int | None]:
        """Every file logged so far and its batch, per stream, and the newest logged batch
        (None: none)."""
        names = self._names()
        compacts = sorted(int(n[: -len(".read")]) for n in names if n.endswith(".read"))
        read: dict[str, dict[str, int]] = {}
        newest = compacts[-1] if compacts else None
        if compacts:
            raw = json.loads(self.fs.read_text(f"{self.dir}/{compacts[-1]}.read"))
            read = {name: dict(files) for name, files in raw["streams"].items()}
        upto = compacts[-1] if compacts else -1
        for b in sorted(int(n) for n in names if n.isdigit()):
            if b <= upto:
                continue
            for name, files in self.read(b).items():
                read.setdefault(name, {}).update((f, b) for f, _ in files)
            newest = b
        return read, newest

    def read(self, batch: int) -> dict[str, list[tuple[str, int]]]:
        """Batch `batch`'s files per stream, with their sizes (empty: not logged)."""
        if batch not in self._batches:
            path = f"{self.dir}/{batch}"
            if not self.fs.exists(path):
                return {}
            raw = json.loads(self.fs.read_text(path))
            self._batches[batch] = {
                name: [(f, int(n)) for f, n in files] for name, files in raw["streams"].items()
            }
        return self._batches[batch]

    def write(self, batch: int, files: Mapping[str, list[tuple[str, int]]]) -> None:
        """Log batch `batch`'s files before it runs."""
        text = json.dumps({"streams": {n: [[f, s] for f, s in fs] for n, fs in files.items()}})
        self.fs.write_text_atomic(f"{self.dir}/{batch}", text)
        self._batches = {b: f for b, f in self._batches.items() if b >= batch - 1}
        self._batches[batch] = dict(files)

    def files(self, batch: int) -> dict[str, list[str]]:
        """The files batch `batch` read of each stream whose state is read back from them."""
        return {
            name: sorted(f for f, _ in files)
            for name, files in self.read(batch).items()
            if name in self.sourced and files
        }

    def compact(self, committed: int, read: Mapping[str, Mapping[str, int]]) -> None:
        """After batch `committed` is committed: every `COMPACT_EVERY` batches, the files read
        so far (`read`) in one file, and the logs it replaces deleted."""
        if (committed + 1) % COMPACT_EVERY:
            return
        text = json.dumps({"streams": {n: dict(sorted(fs.items())) for n, fs in read.items()}})
        self.fs.write_text_atomic(f"{self.dir}/{committed}.read", text)
        for name in self._names():
            stem = name[: -len(".read")] if name.endswith(".read") else name
            if stem.isdigit() and int(stem) < committed:
                self.fs.delete(f"{self.dir}/{name}")
        self.fs.delete(f"{self.dir}/{committed}")


class FileLoop:
    """Runs a job's batches over its file streams (see the module's text)."""

    def __init__(self, session: SparkSession, plan: JobPlan, scan: t.Any, log: BatchLog) -> None:
        self.session = session
        self.plan = plan
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
        driver lacks streamjoin's jar, or Spark plans the unified input otherwise."""
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        # (A batch's settings and temp views stay off the caller's session, as in Spark's
        # loop, whose batches run in a clone of it.)
        session = SparkSession(
            spark.sparkContext, jsparkSession=spark._jsparkSession.cloneSession()
        )
        empty = store.path(EMPTY_DIR)
        store.fs.mkdirs(empty)
        streams = [sp.stream for sp in plan.streams]
        reader = session.read
        template = unify(
            {
                s.name: file_reader(reader.options(**reader_options(s)), s).load(empty)
                for s in streams
            }
        )
        dirs = "\n".join(s.option("path") or "" for s in streams)
        try:
            scan = jvm.streamjoin.BatchScan.of(template._jdf, dirs)
        except Exception:  # (py4j: a class it cannot find is a package, and calling it fails)
            return None
        return None if scan is None else cls(session, plan, scan, BatchLog(store, sourced))

    def _poll(self, i: int) -> list[tuple[str, int]]:
        s = self.streams[i]
        try:
            text = str(self.scan.poll(i))
        except Exception as err:  # (py4j's error: the directory cannot be listed)
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            msg = f"stream {s.name!r}: its directory {s.option('path')} cannot be listed: {first}"
            raise StreamJoinError(msg) from None
        out = []
        for line in text.splitlines():
            size, _, path = line.partition("\t")
            out.append((path, int(size)))
        return out

    def _next_files(self, once: bool) -> dict[str, list[tuple[str, int]]]:
        """The next batch's files per stream (none: no new file)."""
        if self._queue is None or not once:  # (with `once`, the files there at the start)
            self._queue = [self._poll(i) for i in range(len(self.streams))]
        files = {}
        for i, s in enumerate(self.streams):
            take = self.limits[i] or len(self._queue[i])
            if self._queue[i][:take]:
                files[s.name] = self._queue[i][:take]
                self._queue[i] = self._queue[i][take:]
        return files

    def _run_batch(
        self,
        processor: BatchProcessor,
        batch: int,
        files: Mapping[str, list[tuple[str, int]]],
        began: float,
    ) -> None:
        index = {s.name: i for i, s in enumerate(self.streams)}
        spec = "\n".join(f"{index[n]}\t{f}" for n, fs in files.items() for f, _ in fs)
        df = DataFrame(self.scan.batch(spec), self.session)
        self._input = time.monotonic() - began
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
    ) -> bool:
        """Run batches through `processor` until the input is done (`once`), `timeout` seconds
        pass, `stop` is set, or Ctrl-C; returns whether it was stopped before its input was
        done."""
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        stop = stop or threading.Event()
        told = processor.on_batch

        def on_batch(report: BatchReport) -> None:
            # (A batch's time counts from the listing of its files, as Spark's trigger's does.)
            seconds, phases = report.seconds + self._input, {"input": round(self._input, 3)}
            if told is not None:
                told(dataclasses.replace(report, seconds=seconds, phases=phases | report.phases))

        processor.on_batch = on_batch
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
                if files:
                    self.log.write(batch, files)
                    self._run_batch(processor, batch, files, began)
                    batch += 1
                elif once:
                    return False
                if not once and trigger is not None:
                    wait = began + trigger - time.monotonic()
                    if deadline is not None:
                        wait = min(wait, deadline - time.monotonic())
                    if wait > 0:
                        stop.wait(wait)
        except KeyboardInterrupt:
            # (A batch cut short is not committed: a restart runs it again.)
            self.session.sparkContext.cancelAllJobs()
            processor.error = None
            return True
        finally:
            self.running = False
            processor.on_batch = told


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
