"""One micro-batch, as a list of steps: intake, state, joins, sinks, dead letters, commit.

Per batch, with W the global watermark committed by the previous batch:

1. intake: each row ok, malformed or late (event time < W), if a step reads it (`intake`);
2. state: the ok rows' counts and event-time ranges, from the footers or a job (`state.statejob`);
3. deltas: each stream's ok rows as relations (`deltas`), made where a join first reads one
   (probes of the batch's own rows read none);
4. joins: two-way queries' new pairs (`twoway`, `indexed`), multi-way ones' (`multiway.chain`);
5. sinks: each sink receives its queries' rows under ``<path>/batch=<id>/`` (`sinks`);
6. dead letters: late and malformed rows, if any, beside the sinks (`intake.start_deadletters`);
7. adapt: the policies of `adapt/` choose each query's next scheme and probe orders
   (`committing`);
8. commit: the manifest for the batch is written (`committing`, `state.nextmanifest`).
"""

from __future__ import annotations

import time
import typing as t
from functools import cache, partial

from streamjoin.adapt.skewcheck import checks_skew, skew_check_period
from streamjoin.runtime.batch.closing import close_batch
from streamjoin.runtime.batch.committing import batch_manifest
from streamjoin.runtime.batch.context import BatchContext, BatchReport, Scratch, SessionConf
from streamjoin.runtime.batch.deltas import LazyDeltas, delta_relations
from streamjoin.runtime.batch.heldgroups import HeldGroups
from streamjoin.runtime.batch.indexed import IndexedJoins
from streamjoin.runtime.batch.intake import classify, start_deadletters
from streamjoin.runtime.batch.sharedsinks import STAGING, MemberPlans, shared_outputs
from streamjoin.runtime.batch.shedding import Shedding
from streamjoin.runtime.batch.sinks import sink_batch_path, write_outputs
from streamjoin.runtime.batch.twoway import shared_cores, two_way_joins
from streamjoin.runtime.faults import maybe_crash
from streamjoin.runtime.multiway.chain import ChainJoins
from streamjoin.runtime.multiway.joins import MultiwayJoins
from streamjoin.runtime.restart import check_restart
from streamjoin.runtime.routing.router import check_scheme_change, restore_routers
from streamjoin.runtime.routing.unitcounts import InputUnitCounts, count_units
from streamjoin.runtime.session import clone
from streamjoin.runtime.settings import Settings
from streamjoin.runtime.sources import no_rows
from streamjoin.runtime.state.copybehind import CopyBehind, unbounded_streams
from streamjoin.runtime.state.footers import read_footers
from streamjoin.runtime.state.inputrows import settle_reads
from streamjoin.runtime.state.nextmanifest import leaving_watermark
from streamjoin.runtime.state.statejob import StateJob
from streamjoin.runtime.state.stores import StoreViews
from streamjoin.runtime.threads import Background, PhaseClock

if t.TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.plan import JobPlan
    from streamjoin.runtime.multiway.joins import MultiwayBatch
    from streamjoin.runtime.serve.queries import QuerySet, ServedQueries
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.sourcefiles import BatchFiles

__all__ = ["BatchProcessor", "BatchReport"]


class BatchProcessor:
    """The foreachBatch function of a job (also callable with a unified DataFrame): what outlives
    a batch (plan, settings, checkpoint, stores, indexes); a batch's own is its `BatchContext`."""

    def __init__(
        self,
        spark: SparkSession,
        plan: JobPlan,
        checkpoint: Checkpoint,
        on_batch: Callable[[BatchReport], None] | None = None,
        source_log: BatchFiles | None = None,
        settings: Settings | None = None,
        served: ServedQueries | None = None,
    ) -> None:
        self.session = spark
        """The session that starts the stream (each batch runs in foreachBatch's clone)."""
        self.plan = plan
        self.checkpoint = checkpoint
        self.on_batch = on_batch
        self.settings = settings or Settings.of(spark)
        self.error: BaseException | None = None
        heap = spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory()  # type: ignore[union-attr]
        self.driver_heap = f"{heap / 2**30:.1f} GiB"
        """The driver JVM's heap: named if the JVM dies of it."""
        self.parallelism = int(spark.conf.get("spark.sql.shuffle.partitions") or "4")
        self._shuffles: int | None = None
        """Shuffle partitions for the next batch's session to take (`resize`)."""
        self.conf = SessionConf()
        """The batches' settings on foreachBatch's session."""
        self.state_job = StateJob(plan, checkpoint, source_log)
        self.behind = CopyBehind(checkpoint, unbounded_streams(plan))
        """Copies the units of unbounded streams read back from their files (`copybehind`)."""
        self.indexed = IndexedJoins()
        """The indexes of the two-way equi joins (`batch.indexed`)."""
        self.held = HeldGroups()
        """The GROUP BY buffers' rows of the open windows, in memory (`batch.heldgroups`)."""
        self.stores = StoreViews(checkpoint, self.parallelism)
        """The streams' stored rows as relations of the batch's SQL (`state.stores`)."""
        self.multiway = self._multiway()
        self.chains = ChainJoins(self.indexed.levels)
        """The multi-way joins on the operator (`multiway.chain`)."""
        self.members = MemberPlans()
        self._next_schemes: dict[str, dict[str, t.Any]] = {}
        self.shedding = Shedding()
        """The overload controllers of the queries that shed probes (`batch.shedding`)."""
        self.trigger_seconds: float | None = None
        """The run's trigger interval (None: a backlog run, or not told): see `set_trigger`."""
        self.served = served
        """A served job's queries, which may change at any batch (`runtime.serve`)."""
        self.spark_loop = True
        """Whether Spark's micro-batch loop calls it (False: the engine's, `runtime.loop`)."""
        self._serving: tuple[t.Any, ...] | None = None
        self._final = False
        """Whether the batch under way is the last of a finished input (`finish`)."""
        self._last_session: SparkSession | None = None
        """The session of the last batch run (Spark's clone, or the engine's loop's)."""
        # A restart may run an edited job: fail now if the checkpoints cannot serve it.
        check_restart(plan, checkpoint.latest(), checkpoint.root)

    def set_trigger(self, seconds: float | None) -> None:
        """Take the run's trigger interval (None: none, as with ``--once``): a measured
        shedding budget fits it, and the skew checks are spaced by it (`skew_check_period`)."""
        self.trigger_seconds = seconds
        # (Back-to-back batches get a second of work each: a budget of the time the batch
        # before took would keep any length batches grew to. docs/overload.md.)
        self.shedding.trigger_seconds = seconds or 1.0

    def _follow(self, batch_id: int) -> QuerySet | None:
        """A served job's query set for batch `batch_id`, its plan put in place if it changed:
        what a restart with the edited job would do, with the cached state kept."""
        if self.served is None:
            return None
        job, queries = self.served.for_batch(batch_id, self.checkpoint.previous(batch_id))
        if (job, queries.groups) != self._serving:
            self._serving = (job, queries.groups)
            # An earlier attempt at this batch may have run a query dropped since: its output
            # of the batch goes (the query's results end before this batch).
            kept = {q.name for q in job.queries}
            for q in self.plan.job.queries:
                sink = self.plan.job.sink(q.sink)
                if q.name not in kept and sink.option("path"):
                    self.checkpoint.fs.delete(sink_batch_path(sink, batch_id))
            plan = self.served.plan(job, queries.groups)
            self.plan = plan
            self.state_job = StateJob(plan, self.checkpoint, self.state_job.source_log)
            self.multiway = self._multiway()
        return queries

    def _multiway(self) -> MultiwayJoins | None:
        """The plan's multi-way joins."""
        args = (self.plan, self.settings, self.parallelism)
        return MultiwayJoins(*args) if self.plan.multiway else None

    def resize(self, units: int) -> None:
        """Shuffle and cache the state in `units` partitions from the next batch on: Spark's
        shuffles of the batch's joins too, so that added cores get tasks."""
        self.parallelism = units
        self._shuffles = units
        self.stores.resize(units)
        if self.multiway is not None:
            self.multiway.reorder.parallelism = units

    def close(self, *, keep: bool = False) -> None:
        """Release what the processor keeps cached between batches; with `keep`, the indexes
        and the GROUP BY buffers' rows stay for a last batch of a finished input (`finish`)."""
        self.behind.stop()
        self.stores.clear()
        if not keep:
            self.indexed.clear(self.session)
            self.held.clear(self.session)

    def set_partitioning(self, query: str, params: dict[str, t.Any]) -> None:
        """Run `query` under the scheme `params` from the next batch on (e.g. ``{"name":
        "matrix", "n": 2, "m": 4}``; see `adapt.schemestate.scheme_from_params`). The change is
        recorded in that batch's manifest, so a replay or restart keeps it."""
        check_scheme_change(self.plan, query, params)
        self._next_schemes[query] = dict(params)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Spark's foreachBatch call: `process`, again if the cache failed it (`HotState.failed`)
        or an executor took index partitions (`IndexedJoins.lost`); its error kept for the run."""
        forced = dict(self._next_schemes)
        try:
            try:
                self.process(df, batch_id)
            except Exception as err:
                hot = self.stores.hot.failed(err)
                # (An executor lost with index partitions took its cached blocks too.)
                if not (hot or self.indexed.lost(err)):
                    raise
                self.stores.clear()
                self._next_schemes = forced
                self.process(df, batch_id)
        except BaseException as err:
            self.error = err  # (Spark wraps it in an error with a JVM trace: keep the original)
            raise

    def process(self, df: DataFrame, batch_id: int) -> BatchReport:
        """Run batch `batch_id` on the unified input `df`; idempotent for a given input."""
        started, clock = time.monotonic(), PhaseClock()
        ctx: BatchContext | None = None
        shed: dict[str, dict[str, int]] = {}
        work: MultiwayBatch | None = None
        units_job: Background | None = None
        try:
            queries = self._follow(batch_id)
            ctx = self._context(df, batch_id)
            self._last_session = ctx.spark
            if not ctx.final:  # (no batch reads a final one's copies)
                self.behind.submit(ctx.prev)
            # (Probes that read the rows Spark planned for the batch need no relation of them,
            # and their reads are Spark's count of the batch's input rows.)
            reads_rows = self.indexed.reads_rows(ctx)
            # (Outside Spark's loop no streaming query counts the batch's input rows.)
            counted = reads_rows or not self.spark_loop
            known, statistics = self.state_job.start(self.session, ctx, counted=counted)
            # (Where indexes serve every join, no state slice is read: none is cached.)
            self.stores.cache_deltas = not self.indexed.serve_all(ctx)
            chained = self.indexed.chained(ctx)
            made = partial(delta_relations, ctx, self.stores, chained)
            deltas = {} if reads_rows else LazyDeltas(made)
            if known is not None and ctx.counted.sides:
                counts_itself = partial(self.indexed.counts_units, ctx)
                units_job = count_units(ctx, self.stores.sourced, counts_itself)
            # (Known before the probes, an outer join's probe decides its rows without a
            # partner in its own task: `IndexedJoins.leaving`.)
            self.indexed.leaving = None
            if known is not None and self.plan.outers:
                self.indexed.leaving = (
                    leaving_watermark(self.plan, ctx.prev, known, final=ctx.final),
                )
            two = two_way_joins(ctx, deltas, self.stores, self.indexed)
            frames: dict[str, list[DataFrame]] = {}
            measures = None
            if self.multiway is not None and chained:
                plans, measures = self.multiway.chained(ctx, deltas, self.stores)
                found = self.chains.frames(ctx, plans, deltas, self.stores)
                frames = shared_cores(ctx, found, two)
            elif self.multiway is not None:  # (no operator, or a query that sheds)
                work = self.multiway.run(ctx, deltas, self.stores)
                frames, measures = shared_cores(ctx, work.frames, two), work.measures
            staging = self.checkpoint.path(STAGING)
            fs, members = self.checkpoint.fs, self.members
            joint, direct, alone = shared_outputs(ctx, two, staging, fs, members)
            frames |= {n: [frame] for n, frame in alone.items()}
            kept = (self.indexed.reads, self.stores, self.held, self.checkpoint)
            closing = close_batch(ctx, frames, deltas, statistics, kept)
            letters = start_deadletters(ctx, self.plan, self.checkpoint, statistics, known)
            out = write_outputs(ctx, frames, joint, direct)
            if joint:
                self.checkpoint.fs.delete(staging)
            clock.mark("join")
            maybe_crash("after-sink", batch_id)
            if queries is not None and any(b == batch_id for _, b in queries.since):
                maybe_crash("after-sink", "added")
            stats = statistics()
            clock.mark("state")
            maybe_crash("after-state", batch_id)
            if letters is not None:
                letters.result()
            clock.mark("deadletters")
            maybe_crash("after-deadletter", batch_id)
            if units_job is not None:
                units_job.result()
            probes, joins = self.indexed.reads, (self.multiway, measures)
            manifest, units, routing = batch_manifest(ctx, probes, two, stats, out, closing, joins)
            prev = ctx.prev
            if queries is not None:
                manifest.served = queries.to_dict()
            sheds = two.shed | self.chains.take_shed(ctx)
            sheds |= work.shed if work is not None else {}
            if sheds:  # (the allowances for the next batch, from this one's figures)
                arrived = {k: s.ok for k, s in stats.items()}
                spent = time.monotonic() - started
                manifest.overload, shed = self.shedding.after_batch(
                    self.plan, batch_id, spent, sheds, arrived, prev
                )
            if not ctx.final:
                self.behind.swap(manifest)
            self.checkpoint.commit(manifest, prev)
            for path in manifest.dropped if ctx.final else ():  # (no batch replays it)
                self.checkpoint.fs.delete(self.checkpoint.path(path))
            self.indexed.committed(self.session)
            if self.served is not None and queries is not None:
                self.served.committed(queries)
            clock.mark("commit")
            maybe_crash("after-commit", batch_id)
        except BaseException:
            self.indexed.failed()
            raise
        finally:
            if ctx is not None:
                ctx.scratch.release()
            self.stores.end_batch()
        # (Reads of the batch's DataFrame as a whole: the state job's, the probes' and the
        # chains'; and the footers' counts where Spark's loop took them as a read's.)
        added = known is not None and self.spark_loop and not reads_rows
        reads = self.indexed.take_reads() + (known is None) + added
        if reads and not ctx.final:  # (Spark's loop counts no input of a final batch)
            settle_reads(self.session, self.plan, ctx.files, stats, reads=reads)
        report = BatchReport(
            batch=batch_id,
            rows_in=sum(s.ok + s.late + s.malformed for s in stats.values()),
            late=sum(s.late for s in stats.values()),
            malformed=sum(s.malformed for s in stats.values()),
            out=out,
            state_rows=sum(manifest.state_rows().values()),
            watermark=manifest.global_wm,
            seconds=time.monotonic() - started,
            manifest=manifest,
            phases=clock.phases,
            units=units,
            routing=routing,
            shed=shed,
            streams=stats,
            parallelism=ctx.parallelism,
            events=self.indexed.take_events(self.session),
        )
        if self.on_batch is not None:
            self.on_batch(report)
        return report

    def finish(self) -> int | None:
        """Declare the input finished (``--final``): a last batch without rows, its watermark
        past every row, emits every window and outer join's row still open (decided where any
        batch decides them); the checkpoint then takes no more input. Returns its id (None:
        nothing was committed yet, or the input was finished before)."""
        prev = self.checkpoint.latest()
        if prev.batch < 0 or prev.final:
            return None
        # (In the session of the run's batches, or a clone of the caller's: a batch's settings
        # stay off the caller's session.)
        spark = self._last_session or clone(self.session)
        self._final = True
        try:
            self(no_rows(spark, self.plan), prev.batch + 1)
        finally:
            self._final = False
        return prev.batch + 1

    @property
    def _skew_period(self) -> int:
        """Batches between two skew checks (`skew_check_period`)."""
        s = self.settings
        return skew_check_period(s.skew_check_every, s.skew_check_seconds, self.trigger_seconds)

    def _context(self, df: DataFrame, batch_id: int) -> BatchContext:
        """What batch `batch_id` starts from: the previous manifest, its routers, the files and
        footers of its sourced streams; and the batch's session set up for its jobs."""
        spark = df.sparkSession  # (foreachBatch's clone: the batch's temp views live there)
        parallelism, self._shuffles = self.conf.start(spark, self._shuffles), None
        prev = self.checkpoint.previous(batch_id)
        forced, self._next_schemes = self._next_schemes, {}
        routers = restore_routers(self.plan, prev, parallelism, forced)
        counted = InputUnitCounts()
        if not self._final:  # (a batch without rows has none to count per unit)
            counted.choose(spark, self.plan, routers)
        files = self.state_job.batch_files(batch_id)
        footers = {
            name: f
            for name, paths in files.items()
            if (f := read_footers(self.plan.stream(name), paths)) is not None
        }
        return BatchContext(
            spark=spark,
            streaming=self.session,
            plan=self.plan,
            settings=self.settings,
            batch_id=batch_id,
            prev=prev,
            classified=cache(lambda: classify(df, self.plan, prev.global_wm)),
            rows=df,
            files=files,
            idle=self.state_job.batch_idle(batch_id),
            footers=footers,
            routers=routers,
            counted=counted,
            parallelism=parallelism,
            scratch=Scratch(spark),
            checks_skew=checks_skew(batch_id, self._skew_period),
            final=self._final,
        )
