"""`Engine`: run jobs on a SparkSession — the Python API the CLI is a thin shell over."""

from __future__ import annotations

import shutil
import tempfile
import time
import typing as t

from streamjoin.errors import JobError, StreamJoinError
from streamjoin.optimizer.sharing import group_all
from streamjoin.plan import JobPlan, plan_job
from streamjoin.plan.aggregate import plan_aggregate
from streamjoin.plan.physical import candidates_of, side_lags
from streamjoin.plan.rollup import RollupPlan
from streamjoin.runtime.batch.processor import BatchProcessor, BatchReport
from streamjoin.runtime.progress import FallingBehind, ProgressLine, Summary, trigger_seconds
from streamjoin.runtime.session import get_session
from streamjoin.runtime.settings import Settings
from streamjoin.runtime.sources import (
    conform,
    empty_relation,
    read_stream,
    tag,
    unify,
    unreadable_file,
)
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.runtime.state.fs import FileStore
from streamjoin.runtime.state.sourcefiles import SourceLog, sourced_streams

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from streamjoin.model import GroupQuery, Job, Query
    from streamjoin.plan.groups import GroupQueryPlan
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
        # The engine's SQL follows Spark's non-ANSI rules (see session.LOCAL_CONF), also on a
        # session the caller built.
        self.spark.conf.set("spark.sql.ansi.enabled", "false")

    @staticmethod
    def parse(sql: str, source: str = "<string>") -> Job:
        """Parse a job file's text (`JobError` names line, column and text on any mistake)."""
        from streamjoin.sql import parse_job

        return parse_job(sql, source)

    def validate(self, job: Job, settings: Settings | None = None) -> JobPlan:
        """Plan `job` and let Spark analyse every query on empty inputs, so that a mistake only
        Spark can see (an unknown function, say) is reported before the stream starts."""
        plan = self._plan(job, settings)
        for q in job.queries:
            self.check_query(job, q)
        for gp in plan.group_queries:
            self._analyse(self._group_query_sql(job, gp), gp.query.name, gp.query, job.source)
        return plan

    def _plan(self, job: Job, settings: Settings | None = None) -> JobPlan:
        """`job`'s plan, its queries grouped to share joins as the settings allow."""
        settings = settings or Settings.of(self.spark)
        if settings.share_joins and settings.share:
            return plan_job(job)
        alone = plan_job(job, groups=())
        allowed = [c for c in candidates_of(alone) if settings.may_share(c)]
        return plan_job(job, groups=group_all(allowed))

    def check_query(self, job: Job, q: Query, source: str | None = None) -> None:
        """Let Spark analyse query `q` of `job` on empty inputs.

        Raises:
            JobError: Spark rejects it, at the query's INSERT INTO in `source` (default: the
                job's file).
        """
        # Each input is an empty relation of the stream's declared columns, inline in the one
        # SQL text: one analysis, no temp views.
        inputs = ", ".join(
            f"({empty_relation(job.stream(side.stream))}) AS {side.alias}" for side in q.sides
        )
        windowed = None
        if q.windowed is not None:  # (its join, then its groups over the join's columns)
            windowed = plan_aggregate(q, side_lags(job, q), job.source)
        join = windowed.join_query() if windowed else q
        select = ", ".join(f"{i.sql} AS `{i.alias}`" for i in join.select)
        sql = f"SELECT {select} FROM {inputs} WHERE ({q.predicate})"
        if windowed is not None:
            sql = windowed.group_sql(f"({sql})", None, None)
        if q.rollup is not None:  # (its partials of the groups, merged, then its values)
            rp = RollupPlan(q)
            items = ", ".join(f"`{i.alias}`" for i in q.select)  # (not the window's end)
            groups = f"(SELECT {items} FROM ({sql}))"
            partial = f"({rp.partial_sql(groups)})"
            sql = rp.output_sql(f"({rp.merge_sql(None, partial)})", partial)
        self._analyse(sql, q.name, q, source or job.source)

    def _analyse(self, sql: str, name: str, q: Query | GroupQuery, source: str) -> None:
        """Let Spark analyse `sql`, query `name`'s SQL over empty inputs.

        Raises:
            JobError: Spark rejects it, at the query's INSERT INTO in `source`.
        """
        try:
            self.spark.sql(sql).schema  # noqa: B018 - forces analysis
        except Exception as err:  # Spark's AnalysisException and friends
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            msg = f"Spark rejects query {name}: {first}"
            text = "INSERT INTO " + q.sink
            raise JobError(msg, line=q.line, col=1, text=text, source=source) from None

    @staticmethod
    def _group_query_sql(job: Job, gp: GroupQueryPlan) -> str:
        """A group query's SQL over empty inputs: each input's buffered rows, their groups,
        then the query's rows."""
        groups = []
        for i, group in enumerate(gp.query.inputs):
            rows = gp.rows_sql(i, f"({empty_relation(job.stream(group.stream))})")
            grouped = gp.inputs[i].group_sql(f"({rows})", None, None)
            items = ", ".join(f"`{i.alias}`" for i in group.select)  # (not the window's end)
            groups.append(f"(SELECT {items} FROM ({grouped}))")
        return gp.output_sql(tuple(groups))

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
        """
        if final and not once:
            msg = "final needs once: only a run that stops when its input is done can end it"
            raise StreamJoinError(msg)
        given = dict(sources or {})
        settings = Settings.of(self.spark)  # (fails now, naming a bad setting)
        plan = self.validate(job, settings)
        temporary = checkpoint is None
        ckpt = checkpoint or tempfile.mkdtemp(prefix="streamjoin-")
        line = ProgressLine() if progress else None
        counted: list[BatchReport] = []
        every = trigger_seconds(trigger)
        behind = None if once or every is None else FallingBehind(every)

        def on_batch(report: BatchReport) -> None:
            counted.append(report)
            if line is not None:
                line(report)
            if behind is not None:
                behind(report)

        store = Checkpoint(FileStore(self.spark), ckpt)
        read = [sp.name for sp in plan.streams if sp.name not in given]
        sourced = sourced_streams(plan, read, settings.state_from_source)
        log = SourceLog(store.fs, store.path("spark"), sourced) if sourced else None
        processor = BatchProcessor(self.spark, plan, store, on_batch, log, settings)
        processor.shedding.trigger_seconds = every or 1.0  # (a measured budget fits it)
        writer = self._writer(plan, processor, given, once=once, trigger=trigger)
        started = time.monotonic()
        query = writer.start()
        stopped = False
        try:
            deadline = None if timeout is None else started + timeout
            while query.isActive:
                # Seconds as a float work at runtime; pyspark's hint says int.
                query.awaitTermination(0.5)  # type: ignore[arg-type]
                if deadline is not None and time.monotonic() > deadline:
                    stopped = True
                    query.stop()
        except KeyboardInterrupt:
            query.stop()
        except Exception:  # a failed batch surfaces here; reported below
            if processor.error is None and query.exception() is None:
                raise
        finally:
            if query.isActive:  # (an unexpected error: no batch may run past this point)
                query.stop()
            processor.close()
            if line is not None:
                line.close()
        raise_failure(query, processor, stopped=stopped)
        if final and not stopped:
            processor.finish()
        summary = Summary.from_manifest(
            store.latest(), ckpt, time.monotonic() - started, len(counted)
        )
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
    ) -> DataStreamWriter:
        """The stream of `plan`'s inputs into `processor`, ready to start."""
        frames = {
            sp.name: given[sp.name] if sp.name in given else read_stream(self.spark, sp.stream)
            for sp in plan.streams
        }
        writer = (
            self.unified(plan, frames)
            .writeStream.foreachBatch(processor)
            .option("checkpointLocation", processor.checkpoint.path("spark"))
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
        share = (settings.share_joins, settings.share)
        served = ServedQueries(job, store, self.check_query, history, share=share)
        plan = served.plan(served.job_of(served.current), served.current.groups)
        for q in plan.job.queries:
            self.check_query(plan.job, q)
        serving = Serving(served, on_batch)
        # (No stream's state is its input files: the queries that will read them are unknown.)
        processor = BatchProcessor(
            self.spark, plan, store, serving.batch_done, None, settings, served
        )
        writer = self._writer(plan, processor, given, once=False, trigger=trigger)
        serving.started(writer.start(), processor)
        return serving


def raise_failure(
    query: StreamingQuery, processor: BatchProcessor, *, stopped: bool = False
) -> None:
    """Raise what stopped `query`, if a failure did: a batch's error, or the stream's. When the
    caller `stopped` the query, a batch's error that the stop's interruption caused is none."""
    if isinstance(processor.error, (StreamJoinError, KeyboardInterrupt)):
        raise processor.error
    if stopped and processor.error is not None:
        # (py4j's error, or PySpark's converted one, holds the JVM's.)
        err = processor.error
        java = getattr(err, "java_exception", None) or getattr(err, "_origin", None)
        if java is not None and _interruption(java, cancelled=True):
            return
    if processor.error is not None:
        err = processor.error
        unreadable = unreadable_file(err)
        if unreadable is not None:
            msg = f"an input file cannot be read: {unreadable}"
            raise StreamJoinError(msg) from err
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        msg = f"a batch failed ({type(err).__name__}): {first}"
        raise StreamJoinError(msg) from err
    failure = query.exception()
    # A stop (ours at a timeout, or a caller's) interrupts whatever the query was doing, and
    # Spark may report that interruption as the query's error: it is a stop, not a failure.
    if failure is not None and not interrupted(query):
        first = (str(failure).strip().splitlines() or ["unknown error"])[0]
        msg = f"the stream stopped with an error: {first}"
        raise StreamJoinError(msg)


_CANCELLED = "[SPARK_JOB_CANCELLED]"
"""The error class of a Spark job cancelled because its streaming query was stopped."""
_INTERRUPTS = (
    "java.lang.InterruptedException",
    "java.nio.channels.ClosedByInterruptException",
    "java.io.InterruptedIOException",
)


def interrupted(query: StreamingQuery) -> bool:
    """Whether `query`'s error was caused by an interruption of its thread (what `stop()` does):
    Spark recognises most such errors as a stop, but not all (one wrapped in a SparkException
    while a batch was being planned, seen in CI), and then reports a failed query."""
    failure = query._jsq.exception()  # the JVM error, to walk its causes
    return not failure.isEmpty() and _interruption(failure.get())


def _interruption(error: t.Any, *, cancelled: bool = False) -> bool:
    """Whether JVM throwable `error` or one of its causes is a thread's interruption (or, with
    `cancelled`, a Spark job cancelled because its query was stopped)."""
    cause, seen = error, 0
    while cause is not None and seen < 32:
        if cause.getClass().getName() in _INTERRUPTS:
            return True
        if cancelled and _CANCELLED in str(cause.getMessage()):
            return True
        cause, seen = cause.getCause(), seen + 1
    return False
