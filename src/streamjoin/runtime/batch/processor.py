"""One micro-batch: classify input, dead-letter the bad rows, append to state, join, commit.

Per batch, with W the global watermark committed by the previous batch:

1. every input row is ok, malformed (unparsable, or NULL event time) or late (event time < W);
2. one Spark job appends the ok rows of every stream to the state, as new files keyed by the batch
   id and partitioned by stream (a unit of state), or, for a file stream whose state is read back
   from its input files, notes those files; the same job observes, per stream, the row counts and
   the event-time range, which feed watermarks, pruning and counters (`runtime.state.statejob`),
   unless
   the streams' Parquet footers tell them (`runtime.state.footers`);
3. bad rows, if any, go to the dead-letter location;
4. each query computes ``ΔL ⋈ (R_old ∪ ΔR) ∪ L_old ⋈ ΔR`` (each new pair exactly once), reading
   only the state units whose event times can meet the delta's (where no scheme places the rows
   and no band buckets them, as the one join ``(L_old ∪ ΔL) ⋈ (R_old ∪ ΔR)`` less the pairs of
   two old rows: `joins.pairs_sql`);
5. each sink receives its queries' rows under ``<path>/batch=<id>/`` (overwritten on replay);
6. the manifest for the batch is written: this is the commit.
"""

from __future__ import annotations

import threading
import time
import typing as t
from dataclasses import dataclass, field
from functools import cache, partial

from pyspark.sql import Observation
from pyspark.sql import functions as F

from streamjoin.runtime.batch.inputrows import settle_input_rows
from streamjoin.runtime.batch.intake import classify, write_deadletters
from streamjoin.runtime.batch.joins import (
    OLD,
    SHUFFLE_ROWS,
    SHUFFLE_ROWS_CONF,
    delta_join_sql,
    one_join,
    pairs_sql,
)
from streamjoin.runtime.batch.sinks import write_sink
from streamjoin.runtime.batch.threads import Background, PhaseClock, metrics
from streamjoin.runtime.faults import maybe_crash
from streamjoin.runtime.multiway.mirs import MirStores
from streamjoin.runtime.multiway.selectivity import start_measures
from streamjoin.runtime.multiway.terms import Reorderer, batch_terms
from streamjoin.runtime.restart import check_restart
from streamjoin.runtime.routing.router import (
    QueryRouter,
    UnitStats,
    after_batch,
    key_types,
    scheme_from_params,
)
from streamjoin.runtime.routing.unitcounts import InputUnitCounts, counts_units, skew_every
from streamjoin.runtime.session import BATCH_CONF, count_conf
from streamjoin.runtime.sources import prefixed
from streamjoin.runtime.state.footers import read_footers
from streamjoin.runtime.state.manifest import Manifest
from streamjoin.runtime.state.nextmanifest import next_manifest
from streamjoin.runtime.state.statejob import StateJob
from streamjoin.runtime.state.stores import (
    PARTITIONED_CONF,
    PARTITIONED_STORE_CONF,
    ROUTE_ROWS,
    ROUTE_ROWS_CONF,
    SPARK_DEFAULTS,
    StoreViews,
)

if t.TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.model import Query, StreamDef
    from streamjoin.plan import JobPlan, MultiwayPlan, QueryPlan
    from streamjoin.runtime.batch.joins import Side
    from streamjoin.runtime.state.checkpoint import Checkpoint


_CONCURRENT_WRITES = 8
"""Sink writes run at once. Unbounded, a job of 100 sinks queued so many Spark jobs on the
cores that broadcasts waited past Spark's 300 s timeout and the batch failed (measured)."""

_INPUT_VIEW = "_sj_input"
"""The batch's classified input (`intake.classify`), as a temp view."""


@dataclass(frozen=True)
class BatchReport:
    """What one batch did, for progress lines and summaries."""

    batch: int
    rows_in: int
    late: int
    malformed: int
    out: dict[str, int]
    state_rows: int
    watermark: int | None
    seconds: float
    manifest: Manifest = field(repr=False)
    phases: dict[str, float] = field(default_factory=dict)
    units: dict[str, UnitStats] = field(default_factory=dict)
    """Per query: rows each unit of its join received (routed queries, and forced hash)."""
    routing: dict[str, str] = field(default_factory=dict)
    """Per query: the scheme the batch ran under, and any change decided for the next batch."""


class BatchProcessor:
    """The foreachBatch function of a job (also callable directly with a unified DataFrame)."""

    def __init__(
        self,
        spark: SparkSession,
        plan: JobPlan,
        store: Checkpoint,
        on_batch: Callable[[BatchReport], None] | None = None,
    ) -> None:
        self.spark = spark
        self._session = spark
        """The session that starts the stream (`self.spark` becomes each batch's clone)."""
        self.plan = plan
        self.store = store
        self.on_batch = on_batch
        self.error: BaseException | None = None
        self.routers: dict[str, QueryRouter] = {}
        self._next_schemes: dict[str, dict[str, t.Any]] = {}
        self._unit_obs: dict[str, list[tuple[str, Observation, int]]] = {}
        default = int(spark.conf.get("spark.sql.shuffle.partitions") or "4")
        self.reorder = Reorderer(plan, default)
        self._cached: list[DataFrame] = []
        self._floors: dict[str, int] = {}
        """The batch's least event time per sourced stream, by its files' footers."""
        self._delta_rows: dict[str, int] = {}
        """The batch's rows per sourced stream, by its files' footers."""
        self._measures: Background | None = None
        """The selectivity counts running beside an epoch's last batch
        (`runtime.multiway.selectivity`)."""
        self._mirs: MirStores | None = None
        """The batch's MIR stores (`runtime.multiway.mirs`)."""
        self._input_units = InputUnitCounts()
        """Queries whose rows per unit the state job counts (`runtime.routing.unitcounts`)."""
        self.state_job = StateJob(plan, store)
        """Step 2 of each batch (`runtime.state.statejob`)."""
        self._started = False
        """True once this processor ran a batch (MIR stores are refilled at a (re)start)."""
        self.stores = StoreViews(store, self.reorder.parallelism)
        """The streams' stored rows as relations of the batch's SQL (`runtime.state.stores`)."""
        # A restart may run an edited job: fail now if Spark's checkpoint or the state cannot
        # serve it, and warn of new queries whose windows reach dropped state.
        check_restart(plan, store.latest(), store.root)
        skew_every(spark)  # (fails now, naming a bad value)

    def close(self) -> None:
        """Release what the processor keeps cached between batches."""
        self.stores.partitioned.clear()
        self.stores.sourced.clear()

    def set_partitioning(self, query: str, params: dict[str, t.Any]) -> None:
        """Run `query` under the scheme `params` from the next batch on (e.g. ``{"name":
        "matrix", "n": 2, "m": 4}``; see `routing.scheme_from_params`). The change is recorded
        in that batch's manifest, so a replay or restart keeps it."""
        names = [qp.query.name for qp in self.plan.queries]
        if query not in names:
            msg = f"unknown query {query!r}; the job's queries are {', '.join(names)}"
            raise KeyError(msg)
        scheme_from_params(params)  # fails early, naming the bad scheme
        self._next_schemes[query] = dict(params)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self.process(df, batch_id)
        except BaseException as err:
            # Spark wraps errors raised here in a StreamingQueryException with a JVM trace;
            # keep the original so the caller can report it plainly.
            self.error = err
            raise

    def process(self, df: DataFrame, batch_id: int) -> BatchReport:
        """Run batch `batch_id` on the unified input `df`; idempotent for a given input."""
        started = time.monotonic()
        # foreachBatch hands over a DataFrame of a cloned session: temp views must live there.
        self.spark = df.sparkSession
        prev = self.store.previous(batch_id)
        # (`_multiway_parts` switches to PARTITIONED_STORE_CONF when a step routes.)
        for key, value in (BATCH_CONF | SPARK_DEFAULTS).items():
            self.spark.conf.set(key, value)
        # (Classified when read: a batch of file streams whose footers tell its statistics
        # never reads its DataFrame, and the plan costs a JVM round trip per column.)
        classified = cache(lambda: classify(df, self.plan, prev.global_wm))
        self._load_routers(prev)
        self._input_units.choose(self.spark, self.plan, self.routers)
        self.reorder.restore(prev.multiway)
        self.reorder.configure(self.spark)
        views: list[str] = []
        units_job: Background | None = None
        clock = PhaseClock()
        try:
            # The state write and the joins are independent (the joins read the batch's input,
            # not the new state files): run them as concurrent Spark jobs, so that one's driver
            # overhead overlaps the other's tasks (measured: a third off the batch time).
            files = self.state_job.batch_files(batch_id)
            footers = {
                name: f
                for name, paths in files.items()
                if (f := read_footers(self.plan.stream(name), paths)) is not None
            }
            self._floors = {n: f.least for n, f in footers.items() if f.least is not None}
            self._delta_rows = {n: f.total for n, f in footers.items()}
            known = self.state_job.from_footers(
                self._session, batch_id, prev.global_wm, files, footers
            )
            state_job = None
            if known is None:
                append = partial(self.state_job.run, classified(), batch_id, prev.global_wm)
                state_job = Background(lambda: append(self._input_units, self.routers, files))
            deltas = self._delta_views(classified, views, batch_id, files, prev.global_wm)
            counting = known is not None and bool(self._input_units.sides)
            if counting and counts_units(batch_id, skew_every(self.spark)):
                units_job = self._count_units(batch_id, files, prev.global_wm)
            out = self._join_and_write(batch_id, prev, deltas, views)
            clock.mark("join")
            maybe_crash("after-sink", batch_id)
            stats = known if state_job is None else state_job.result()
            assert stats is not None
            clock.mark("state")
            maybe_crash("after-state", batch_id)
            rejected = {name: st.late + st.malformed for name, st in stats.items()}
            if any(rejected.values()):
                write_deadletters(classified(), self.plan, self.store, batch_id, rejected)
            clock.mark("deadletters")
            maybe_crash("after-deadletter", batch_id)
            if units_job is not None:
                units_job.result()
            units, routing = after_batch(
                self.plan,
                self.routers,
                self._unit_obs,
                self._input_units.counts,
                batch_id,
                stats,
                prev,
            )
            counts = self._measures.result() if self._measures is not None else None
            rows = {k: s.ok for k, s in stats.items()}
            routing |= self.reorder.after_batch(batch_id, rows, counts)
            carried = ({n: r.state() for n, r in self.routers.items()}, self.reorder.state())
            assert self._mirs is not None  # (set by the joins)
            manifest = next_manifest(
                self.plan, prev, batch_id, stats, out, carried, self._mirs.finish
            )
            self.store.commit(manifest, prev)
            clock.mark("commit")
            maybe_crash("after-commit", batch_id)
        finally:
            for running in (self._measures, self._mirs, units_job):  # (they read the views)
                if running is not None:
                    running.wait()
            self._measures = self._mirs = None
            for view in views:
                self.spark.catalog.dropTempView(view)
            for cached in self._cached:
                cached.unpersist()
            self._cached = []
            self.stores.end_batch()
        # The state job read the batch's DataFrame; the joins of a stream not read back from
        # its files and the dead letters read it again, which Spark would count as more input.
        copied = any(sp.name not in files for sp in self.plan.streams)
        if known is None and (copied or any(rejected.values())):
            read = [stats[sp.name] for sp in self.plan.streams]
            settle_input_rows(self._session, [s.ok + s.late + s.malformed for s in read])
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
        )
        if self.on_batch is not None:
            self.on_batch(report)
        return report

    def _count_units(
        self, batch_id: int, files: dict[str, list[str]], watermark: int | None
    ) -> Background:
        """The rows per unit of the queries `_input_units` counts, over the batch's `files`
        (whose footers gave its statistics, so no state job counts them): a job beside the
        joins that reads only the keys (`InputUnitCounts.files_sql`), where the state job read
        every column of the batch's input (equi benchmark, three interleaved pairs: 17.64 /
        18.48 / 18.45 CPU s against 17.84 / 18.98 / 19.98)."""
        relations = {
            sp.index: self.stores.sourced.batch_view(
                self.spark, sp, batch_id, files[sp.name], watermark
            )
            for sp in self.plan.streams
            if sp.name in files
        }
        sql = self._input_units.files_sql(relations)
        spark, units, routers = self.spark, self._input_units, self.routers
        return Background(lambda: units.read_rows(spark.sql(sql).collect(), routers))

    def _delta_views(
        self,
        classified: Callable[[], DataFrame],
        views: list[str],
        batch_id: int,
        files: dict[str, list[str]],
        watermark: int | None,
    ) -> dict[str, str]:
        """Each stream's ok rows of this batch, as a relation for SQL text.

        The relations are subqueries of one temp view of the batch's input: each classic PySpark
        DataFrame call is a round trip with an analysis in the JVM (5-25 ms, measured; tens of
        them a batch), where a subquery in the join's SQL text is analysed with it. A stream
        whose state is its input `files` (the batch started at `watermark`) is read from them
        instead: its own rows and columns only, where each read of the batch's input reruns
        Spark's plan of every stream's rows in the unified layout (equi benchmark, three
        interleaved pairs: 15.5 s and 26.2 CPU s against 16.15 s and 27.4 CPU s)."""
        if any(sp.name not in files for sp in self.plan.streams):
            classified().createOrReplaceTempView(_INPUT_VIEW)
            views.append(_INPUT_VIEW)
        deltas: dict[str, str] = {}
        for sp in self.plan.streams:
            if sp.name in files:
                deltas[sp.name] = self.stores.sourced_delta(
                    self.spark, sp, batch_id, files[sp.name], watermark
                )
                continue
            cols = ", ".join(
                f"`{prefixed(sp.index, c.name)}` AS `{c.name}`" for c in sp.stream.columns
            )
            rows = (
                f"SELECT {cols} FROM {_INPUT_VIEW} WHERE _sj_status = 'ok' AND _sj_src = {sp.index}"
            )
            if self.plan.multiway:
                # Multi-way terms read each delta many times, and the batch's input is one RDD
                # of every stream's rows that no filter prunes: each read would scan all of it.
                # (Two-way queries read it twice: re-reading costs less than a cache there.)
                view = f"_sj_delta_{sp.index}"
                delta = self.spark.sql(rows).coalesce(self.reorder.parallelism).persist()
                self._cached.append(delta)
                delta.createOrReplaceTempView(view)
                views.append(view)
                deltas[sp.name] = view
            else:
                deltas[sp.name] = f"({rows})"
        return deltas

    # -- 4./5. joins and sinks ------------------------------------------------------------------
    def _join_and_write(
        self,
        batch_id: int,
        prev: Manifest,
        deltas: dict[str, str],
        views: list[str],
    ) -> dict[str, int]:
        per_sink: dict[str, list[tuple[str, DataFrame, Observation]]] = {}
        every: list[tuple[Query, list[DataFrame]]] = [
            (qp.query, self._query_parts(qp, prev, deltas, views)) for qp in self.plan.queries
        ]
        multiway = self._multiway_parts(batch_id, prev, deltas, views)
        every += [(q, multiway.get(q.name, [])) for q in self.plan.job.queries if q.multiway]
        for q, parts in every:
            if not parts:
                continue
            out = parts[0]
            for p in parts[1:]:
                out = out.unionAll(p)
            obs = Observation(f"sj_{q.name}_{batch_id}")
            out = out.observe(obs, F.count(F.lit(1)).alias("rows"))
            per_sink.setdefault(q.sink, []).append((q.name, out, obs))
        writes = []
        slots = threading.BoundedSemaphore(_CONCURRENT_WRITES)
        for sink_name, outputs in per_sink.items():
            sink_df = outputs[0][1]
            for _, df, _ in outputs[1:]:
                sink_df = sink_df.unionByName(df)
            sink = self.plan.job.sink(sink_name)
            if len(per_sink) == 1 or sink.format == "console":  # (console: in order, on stdout)
                write_sink(sink, sink_df, batch_id)
            else:
                # Each sink is its own Spark job whose driver work (planning, the file commit)
                # leaves the cores idle: run them together so one's overhead overlaps another's
                # tasks.
                writes.append(Background(partial(write_sink, sink, sink_df, batch_id), slots))
        results = [w.wait() for w in writes]  # all of them, even after a failure
        for error in filter(None, results):
            raise error
        return {
            name: int(metrics(obs).get("rows", 0))
            for outputs in per_sink.values()
            for name, _, obs in outputs
        }

    def _query_parts(
        self, qp: QueryPlan, prev: Manifest, deltas: dict[str, str], views: list[str]
    ) -> list[DataFrame]:
        q = qp.query
        window = qp.parts.window
        lo = window.lo_us if window else None
        hi = window.hi_us if window else None
        # Delta rows are not late: their event times are >= the watermark W the batch started
        # with, so only state rows that can meet an event time >= W are read. A delta whose
        # files' footers tell its least event time F raises that to max(W, F): the older units
        # of a stream read in time order then drop out whole (equi benchmark: a steady batch
        # reads one unit a side instead of two).
        wm = prev.global_wm if qp.left_time is not None and qp.right_time is not None else None
        left, right = self.plan.stream(q.left.stream), self.plan.stream(q.right.stream)
        floor = {
            n: max(wm, self._floors.get(n, wm)) for n in (left.name, right.name) if wm is not None
        }
        # right rows that can meet the left delta: r.ts >= W + lo
        r_lo = floor[left.name] + lo if wm is not None and lo is not None else None
        # left rows that can meet the right delta: l.ts >= W - hi
        l_lo = floor[right.name] - hi if wm is not None and hi is not None else None
        router = self.routers[q.name]
        placed = router.scheme is not None
        shuffle = placed or q.option("partitioning") == "hash"
        # On the automatic hash path the units are still observed (where the key's hash would
        # send each row), so that skew is seen and the scheme can move away from hashing.
        observe = shuffle or (bool(qp.parts.equi) and q.option("adapt", "true") == "true")
        observe = observe and q.name not in self._input_units
        how = None
        if not (observe or shuffle or router.band):
            large = count_conf(self.spark, SHUFFLE_ROWS_CONF, SHUFFLE_ROWS)
            how = one_join(prev, left, l_lo, right, r_lo, large, self._delta_rows)
        if how is not None:
            # Both halves of the delta rule as one join (`joins.pairs_sql`).
            sides = []
            for sp, bound in ((left, l_lo), (right, r_lo)):
                state = self.stores.state(self.spark, sp, prev, bound, None, views)
                sides.append(
                    f"(SELECT *, FALSE AS {OLD} FROM {deltas[sp.name]} "
                    f"UNION ALL SELECT *, TRUE AS {OLD} FROM {state})"
                )
            build = None if how == "auto" else how
            return [self.spark.sql(pairs_sql(qp, *sides, build=build))]
        r_state = self.stores.state(self.spark, right, prev, r_lo, deltas[q.right.stream], views)
        l_state = self.stores.state(self.spark, left, prev, l_lo, None, views)
        inputs: list[tuple[Side, str, str]] = [
            ("left", deltas[q.left.stream], r_state),
            ("right", deltas[q.right.stream], l_state),
        ]
        sqls = []
        for delta_side, delta_view, state_view in inputs:
            if observe:
                delta_view, state_view = self._routed_views(
                    router, delta_side, delta_view, state_view, views, shuffle=shuffle
                )
            sql = delta_join_sql(
                qp,
                delta_side,
                delta_view,
                state_view,
                placed=placed,
                shuffle=shuffle,
                band=router.band,
            )
            sqls.append(sql)
        # One SQL text for both terms: one analysis in the JVM instead of two and a union.
        return [self.spark.sql(" UNION ALL ".join(f"({sql})" for sql in sqls))]

    def _multiway_parts(
        self, batch_id: int, prev: Manifest, deltas: dict[str, str], views: list[str]
    ) -> dict[str, list[DataFrame]]:
        """Per multi-way query, one DataFrame per term of its delta rule (`plan.multiway`);
        probe prefixes that several terms run are computed once and cached for the batch."""

        def streams(mp: MultiwayPlan) -> list[StreamDef]:
            return [self.plan.job.stream(side.stream) for side in mp.query.sides]

        def store(stream: str, lo: int | None, with_new: bool, column: str | None = None) -> str:
            delta = deltas[stream] if with_new else None
            sp = self.plan.stream(stream)
            return self.stores.state(self.spark, sp, prev, lo, delta, views, column)

        partitioning: dict[str, str] = {}
        if self.spark.conf.get(PARTITIONED_CONF, "true") != "false":
            partitioning = self.reorder.partitioning(batch_id)
        self.stores.partitioned.retain(partitioning, prev)
        # A small delta is broadcast to every partition, a large one routed to its partition
        # (DESIGN: move the delta to the state). Its size: the stream's rows in the last batch.
        threshold = count_conf(self.spark, ROUTE_ROWS_CONF, ROUTE_ROWS)
        large = {u.stream for u in prev.units if u.batch == prev.batch and u.rows >= threshold}
        if partitioning and large:
            for key, value in PARTITIONED_STORE_CONF.items():
                self.spark.conf.set(key, value)
        plans = self.reorder.plans(batch_id)
        self._mirs = MirStores(
            self.spark,
            self.store,
            prev,
            batch_id,
            streams,
            deltas,
            lambda stream: store(stream, None, False),
            views,
            self._cached,
            self.reorder.parallelism,
            refill=not self._started,
        )
        self._started = True
        if self.reorder.measuring(batch_id):
            args = (self.spark, self.reorder, batch_id, plans, streams, deltas, store)
            self._measures = start_measures(*args)
        share = self.spark.conf.get("streamjoin.multiway.share", "true") != "false"
        built = batch_terms(
            plans,
            streams,
            deltas,
            store,
            prev.global_wm,
            share=share,
            mirs=self._mirs,
            partitioning=partitioning,
            routed=large,
        )
        for name, sql in built.shared.items():
            # A join's output has as many partitions as its store's files and the batch's input
            # together (tens); every reader of the view would run a task for each.
            df = self.spark.sql(sql).coalesce(self.reorder.parallelism).persist()
            df.createOrReplaceTempView(name)
            views.append(name)
            self._cached.append(df)
        return {name: [self.spark.sql(sql) for sql in terms] for name, terms in built.terms.items()}

    def _routed_views(
        self,
        router: QueryRouter,
        delta_side: Side,
        delta_view: str,
        state_view: str,
        views: list[str],
        *,
        shuffle: bool = True,
    ) -> tuple[str, str]:
        """The delta routed to its probe places and the state to its store places (for the hash
        path: as they are), each observed for its rows per unit."""
        if router.key_types is None and router.qp.parts.equi:
            router.key_types = key_types(self.spark, router)
        state_side: Side = "right" if delta_side == "left" else "left"
        name = router.qp.query.name
        out = []
        roles: tuple[tuple[Side, str, t.Literal["probe", "store"]], ...] = (
            (delta_side, delta_view, "probe"),
            (state_side, state_view, "store"),
        )
        for side, view, role in roles:
            if not shuffle and role == "store":
                # The automatic hash path watches the delta's keys only: skew shows there,
                # and the state scan stays free of per-row hashing.
                out.append(view)
                continue
            df = self.spark.sql(router.routed(side, view, role))
            unit = router.unit_sql(side)
            aggs = [F.expr(f"count_if({unit} = {i})").alias(f"u{i}") for i in range(router.units)]
            value = router.row_sql(side).value
            ranges = int(router.params.get("units", 1))
            if router.params.get("name") == "range" and value is not None and ranges > 1:
                # Equi-depth bounds for the next batch, from the rows of this one.
                qs = ", ".join(repr(i / ranges) for i in range(1, ranges))
                aggs.append(F.expr(f"percentile_approx({value}, array({qs}))").alias("q"))
            obs = Observation(f"sj_units_{name}_{len(views)}")
            view_name = f"_sj_routed_{len(views)}"
            df.observe(obs, *aggs).createOrReplaceTempView(view_name)
            views.append(view_name)
            self._unit_obs.setdefault(name, []).append((role, obs, router.units))
            out.append(view_name)
        return out[0], out[1]

    def _load_routers(self, prev: Manifest) -> None:
        """Each query's router as the previous batch left it (its scheme and controllers)."""
        default = int(self.spark.conf.get("spark.sql.shuffle.partitions") or "4")
        for qp in self.plan.queries:
            q = qp.query
            self.routers[q.name] = QueryRouter.restore(
                qp,
                self.plan.job.stream(q.left.stream),
                self.plan.job.stream(q.right.stream),
                prev.routing.get(q.name),
                int(q.option("units") or default),
            )
            forced = self._next_schemes.pop(q.name, None)
            if forced is not None:
                router = self.routers[q.name]
                keep: dict[str, t.Any] = {
                    k: router.params[k] for k in ("units", "time_bucket") if k in router.params
                }
                router.params = {"units": default, **forced, **keep}
                router.controller = {}
        self._unit_obs = {}
