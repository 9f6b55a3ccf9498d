"""`Engine`: run jobs on a SparkSession — the Python API the CLI is a thin shell over."""

from __future__ import annotations

import functools
import itertools
import shutil
import tempfile
import threading
import time
import typing as t

from streamjoin.errors import StreamJoinError
from streamjoin.plan import JobPlan, plan_job
from streamjoin.runtime.analysis import check_job, check_query
from streamjoin.runtime.batch.processor import BatchProcessor, BatchReport
from streamjoin.runtime.executors import ExecutorScaler
from streamjoin.runtime.failure import close, drive, interrupted, raise_failure, run_loop
from streamjoin.runtime.loop import FileLoop, batch_rows, loop_refusal
from streamjoin.runtime.metrics.history import MetricsHistory, local_dir
from streamjoin.runtime.metrics.sparkprogress import ProgressPublisher, with_observation
from streamjoin.runtime.progress import FallingBehind, ProgressLine, Summary, trigger_seconds
from streamjoin.runtime.serve.runview import Ui, serve_run
from streamjoin.runtime.session import get_session
from streamjoin.runtime.settings import Settings
from streamjoin.runtime.sources import conform, read_stream, tag, unify
from streamjoin.runtime.state.batchlog import refuse_sparks_loop
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.runtime.state.fs import FileStore
from streamjoin.runtime.state.lock import CheckpointLock
from streamjoin.runtime.state.sourcefiles import BatchFiles, SourceLog, sourced_streams
from streamjoin.runtime.storagefaults import told

__all__ = ["Engine", "interrupted", "raise_failure", "take_lock"]

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from streamjoin.model import Job, Query
    from streamjoin.runtime.serve.handle import Serving


class Engine:
    """Runs streamjoin jobs on a SparkSession (the active one, or a new local one).

    >>> engine = Engine()                                          # doctest: +SKIP
    >>> summary = engine.run(Engine.parse(open("job.sql").read()), once=True)  # doctest: +SKIP
    >>> summary.out                                                # doctest: +SKIP
    {'q1': 1234}
    """

    def __init__(self, spark: SparkSession | None = None, *, master: str | None = None) -> None:
        self.spark = spark or get_session(master)
        self.running = threading.Event()
        """Set while `run` runs batches (its micro-batch loop started)."""
        self._stop = threading.Event()
        # The engine's SQL follows Spark's non-ANSI rules (see session.LOCAL_CONF), also on a
        # session the caller built.
        self.spark.conf.set("spark.sql.ansi.enabled", "false")

    def stop(self) -> None:
        """Stop the run going in another thread, as a timeout does: the engine's loop after
        its batch, Spark's at once (a batch cut short runs again at a restart)."""
        self._stop.set()

    @staticmethod
    def parse(sql: str, source: str = "<string>") -> Job:
        """Parse a job file's text (`JobError` names line, column and text on any mistake)."""
        from streamjoin.sql import parse_job

        return parse_job(sql, source)

    def validate(self, job: Job, settings: Settings | None = None) -> JobPlan:
        """Plan `job` and let Spark analyse every query on empty inputs, so that a mistake only
        Spark can see (an unknown function, say) is reported before the stream starts."""
        plan = self._plan(job, settings)
        check_job(self.spark, job, plan)
        return plan

    def _plan(self, job: Job, settings: Settings | None = None) -> JobPlan:
        """`job`'s plan, its queries grouped to share joins as the settings allow."""
        settings = settings or Settings.of(self.spark)
        return plan_job(job) if settings.share else plan_job(job, groups=())

    def check_query(self, job: Job, q: Query, source: str | None = None) -> None:
        """Let Spark analyse query `q` of `job` on empty inputs (`analysis.check_query`)."""
        check_query(self.spark, job, q, source)

    def processor(
        self, job: Job, checkpoint: str, on_batch: Callable[[BatchReport], None] | None = None
    ) -> BatchProcessor:
        """The per-batch function of `job` over `checkpoint`, to drive batches by hand."""
        plan = self._plan(job)
        return BatchProcessor(
            self.spark, plan, Checkpoint(FileStore(self.spark), checkpoint), on_batch
        )

    def unified(self, plan: JobPlan, frames: Mapping[str, DataFrame]) -> DataFrame:
        """The unified input of `plan` from one DataFrame per active stream (static or
        streaming)."""
        tagged = []
        for sp in plan.streams:
            if sp.name not in frames:
                continue
            tagged.append(tag(conform(frames[sp.name], sp.stream), sp))
        if not tagged:
            msg = "no input frames for any stream of the job"
            raise StreamJoinError(msg)
        return unify(tagged)

    def run(
        self,
        job: Job,
        *,
        checkpoint: str | None = None,
        once: bool = False,
        trigger: str = "1 second",
        sources: Mapping[str, DataFrame] | None = None,
        progress: bool = True,
        timeout: float | None = None,
        final: bool = False,
        metrics: MetricsHistory | bool = True,
        ui: Ui | None = None,
    ) -> Summary:
        """Run `job` until stopped (Ctrl-C), or with ``once`` until all available input is done.

        Args:
            job: the parsed job.
            checkpoint: state, manifests, dead letters and Spark's logs; a restart with the same
                directory continues exactly where the last run committed. Default: a temporary
                directory, removed at the end.
            once: process everything available, then return.
            trigger: micro-batch interval when not ``once`` (Spark's processingTime syntax).
            sources: streaming DataFrames standing in for some streams (by name), instead of
                the streams' WITH options.
            progress: show the live line on a terminal.
            timeout: stop after this many seconds (None: run until done or interrupted).
            final: with ``once``, declare the input finished when it is done: every window
                still open, and every outer join's row still waiting for a partner, is
                emitted (as if the watermark passed every row), and the
                checkpoint takes no more input. Without it, a later run continues where this
                one stopped.
            metrics: where each batch's figures go (`runtime.metrics`); True: a history of
                the run's own, written under ``<checkpoint>/metrics/``; False: nowhere.
            ui: serve the dashboard, ``/metrics`` and the read side of the control endpoint
                there while the job runs (`runtime.serve.runview`).
        """
        if final and not once:
            msg = "final needs once: only a run that stops when its input is done can end it"
            raise StreamJoinError(msg)
        if ui is not None and metrics is False:
            msg = "ui needs metrics: the dashboard draws the batches' figures"
            raise StreamJoinError(msg)
        given = dict(sources or {})
        settings = Settings.of(self.spark)  # (fails now, naming a bad setting)
        plan = self.validate(job, settings)
        temporary = checkpoint is None
        ckpt = checkpoint or tempfile.mkdtemp(prefix="streamjoin-")
        line = ProgressLine() if progress else None
        counted = itertools.count()  # (batches this run; a report is not kept past its batch)
        history = metrics if isinstance(metrics, MetricsHistory) else None
        if metrics is True:
            history = MetricsHistory(None if temporary else local_dir(f"{ckpt}/metrics"))
        names = [q.name for q in plan.job.queries]
        every = trigger_seconds(trigger)
        behind = None if once or every is None else FallingBehind(every)

        publisher = ProgressPublisher(self.spark) if history is not None else None

        def on_batch(report: BatchReport) -> None:
            next(counted)
            if history is not None:
                figures = history.record(report, names)
                if publisher is not None:
                    publisher.publish(figures)
            if line is not None:
                line(report)
            if behind is not None:
                behind(report)
            if scaler is not None:
                scaler(report)

        store = Checkpoint(FileStore(self.spark), ckpt)
        store.lock = lock = take_lock(store)
        server = None
        processor = None
        try:
            read = [sp.name for sp in plan.streams if sp.name not in given]
            sourced = sourced_streams(plan, read, settings.state_from_source)
            loop = None
            why = loop_refusal(
                plan, store, settings, given=given, trigger=once or every is not None
            )
            if why is None:
                unify = functools.partial(self.unified, plan)
                loop = FileLoop.start(self.spark, plan, store, sourced, unify)
                if loop is not None:
                    loop.max_rows = batch_rows(self.spark, settings.batch_rows)
            if loop is None:
                refuse_sparks_loop(store, why or "its scan of the files cannot be made")
            log: BatchFiles | None = None
            if loop is not None:
                # (No streaming query's progress carries the figures; Spark's metrics system
                # does, in either loop: `ProgressPublisher`.)
                log = loop.log
            elif sourced:
                log = SourceLog(store.fs, store.path("spark"), sourced)
            processor = BatchProcessor(self.spark, plan, store, on_batch, log, settings)
            processor.set_trigger(None if once else every)
            processor.spark_loop = loop is None
            scaler = ExecutorScaler.of(self.spark, settings, None if once else every, processor)
            if scaler is not None:
                scaler.start()
            started = time.monotonic()
            if loop is not None:
                if ui is not None and history is not None:
                    server = serve_run(ui, plan, history, lambda: loop.running)
                self.running.set()
                stop = self._stop
                starting = None if scaler is None else scaler.starting
                stopped = run_loop(
                    loop,
                    processor,
                    line,
                    once=once,
                    every=every,
                    timeout=timeout,
                    stop=stop,
                    starting=starting,
                )
            else:
                publish = history is not None
                writer = self._writer(
                    plan, processor, given, once=once, trigger=trigger, observe=publish
                )
                query = writer.start()
                if scaler is not None:
                    scaler.watch(query)
                if ui is not None and history is not None:
                    server = serve_run(ui, plan, history, lambda: query.isActive)
                self.running.set()
                stopped = drive(query, processor, line, timeout, self._stop)
            if final and not stopped:
                line = None  # (closed with the loop: the last batch draws no live line)
                with told(store.root):
                    processor.finish()
            summary = Summary.from_manifest(
                store.latest(), ckpt, time.monotonic() - started, next(counted)
            )
        finally:
            self.running.clear()
            self._stop.clear()
            if server is not None:
                server.stop()
            try:
                if processor is not None:
                    # (What it holds in executor memory goes: cached slices, the joins' indexes.)
                    close(processor)
            finally:
                lock.release()
        if temporary:
            shutil.rmtree(ckpt, ignore_errors=True)
        return summary

    def _writer(
        self,
        plan: JobPlan,
        processor: BatchProcessor,
        given: Mapping[str, DataFrame],
        *,
        once: bool,
        trigger: str,
        observe: bool,
        ticks: DataFrame | None = None,
    ) -> DataStreamWriter:
        """The stream of `plan`'s inputs into `processor`, ready to start; with `observe`, it
        carries the observation each batch's figures are published in (`sparkprogress`);
        `ticks`: rows of no stream beside them (`ServedQueries.ticks`)."""
        frames = {
            sp.name: given[sp.name] if sp.name in given else read_stream(self.spark, sp.stream)
            for sp in plan.streams
        }
        unified = self.unified(plan, frames)
        if ticks is not None:
            unified = unified.unionByName(ticks, allowMissingColumns=True)
        if observe:
            unified = with_observation(unified)
        writer = unified.writeStream.foreachBatch(processor).option(
            "checkpointLocation", processor.checkpoint.path("spark")
        )
        return writer.trigger(availableNow=True) if once else writer.trigger(processingTime=trigger)

    def start(
        self,
        job: Job,
        *,
        checkpoint: str,
        trigger: str = "1 second",
        sources: Mapping[str, DataFrame] | None = None,
        history: int | None = 0,
        on_batch: Callable[[BatchReport], None] | None = None,
    ) -> Serving:
        """Serve `job` in the background and return at once: a handle whose queries can be
        added and dropped while the streams run (`runtime.serve`).

        Every stream the job declares is read from the start, queried or not. A query added at
        batch b answers from b on, joining the new rows with the history the state still holds
        (`runtime.serve.queries`).

        Args:
            job: the parsed job (its queries run from the start; it may have none).
            checkpoint: as for `run`; a restart continues with the query set it left.
            trigger: micro-batch interval (Spark's processingTime syntax).
            sources: streaming DataFrames standing in for some streams (by name).
            history: microseconds of event time behind the watermark that every stream's state
                keeps at least, for queries added later to join with (None: all of it).
            on_batch: called after each committed batch.
        """
        from streamjoin.runtime.serve.handle import Serving
        from streamjoin.runtime.serve.queries import ServedQueries

        given = dict(sources or {})
        settings = Settings.of(self.spark)
        store = Checkpoint(FileStore(self.spark), checkpoint)
        store.lock = lock = take_lock(store)
        try:
            refuse_sparks_loop(store, "a served job runs in Spark's loop")
            served = ServedQueries(job, store, self.check_query, history, share=settings.share)
            plan = served.plan(served.job_of(served.current), served.current.groups)
            for q in plan.job.queries:
                self.check_query(plan.job, q)
            serving = Serving(served, on_batch, publisher=ProgressPublisher(self.spark))
            # (No stream's state is its input files: the queries that will read them are
            # unknown.)
            processor = BatchProcessor(
                self.spark, plan, store, serving.batch_done, None, settings, served
            )
            processor.set_trigger(trigger_seconds(trigger))
            ticks = served.ticks(self.spark, len(plan.streams))
            writer = self._writer(
                plan, processor, given, once=False, trigger=trigger, observe=True, ticks=ticks
            )
            serving.started(writer.start(), processor)
        except BaseException:
            lock.release()
            raise
        return serving


def take_lock(store: Checkpoint) -> CheckpointLock:
    """The lock of checkpoint `store` for this run (`state.lock`).

    Raises:
        CheckpointInUseError: another live run holds it.
        StorageError: the checkpoint cannot be written (full, read-only).
    """
    with told(store.path("_lock")):
        return CheckpointLock.take(store.fs, store.root)
