"""Step 4 for two-way joins, inner and outer: the join operator, the live state kept in
executor memory across batches (``JoinIndex.java``), so that a batch shuffles only its delta,
probes only the rows of its keys (a band's: its key in each bucket its band reaches,
`indexsql.lookup_sql`), and runs one Spark job. The hash path, time buckets, a keyless band's
runs and a scheme (matrix, biclique, contrand, range) are the operator's placement: a row has a
copy in each partition of the places it is stored and probes at.

A batch's delta is shuffled to the partitions by its key's hash, or put in one task when its
files' footers count at most `indexfit.ONE_TASK_ROWS` rows; when they count as few of every
stream (in local mode `indexfit.LOCAL_ONE_TASK_ROWS`), the task reads the rows Spark planned
for the batch itself (``BatchInput.java``), with no plan of its input made in the batch. The
rows out of reach go first, then each task probes and extends its partitions and makes the
query's rows of the pairs it finds (its predicate and SELECT, planned once per query: a hash
collision or the window costs a filter, never a wrong pair), counting the delta's rows per unit
for the skew check on the way.

The index is a copy: the manifest's units stay the durable state. It is built from them when a
run starts, and when the placement changes where its old index cannot drain (`drains`:
Squall's migration). Where the partitions in a JVM hold more than ``streamjoin.state.memory``
(rows and slots), their oldest rows spill to local disk (``SpilledRows.java``). A batch run
again takes back the rows its earlier attempt added. In local mode the driver's JVM holds
every partition; on a cluster each lives on one executor (`placed`). docs/architecture.md.
"""

from __future__ import annotations

import itertools
import json
import typing as t
import uuid

from pyspark.sql import DataFrame

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.batch.drains import Drains
from streamjoin.runtime.batch.indexcluster import placed_pairs
from streamjoin.runtime.batch.indexfit import (
    counted_units,
    one_task,
    partitions,
    two_way_one_task,
)
from streamjoin.runtime.batch.indexinput import index_input, load_index
from streamjoin.runtime.batch.indexouter import decided_least, kept, outer_plan
from streamjoin.runtime.batch.indexplans import ProbePlans, query_key
from streamjoin.runtime.batch.indexreads import Decide, ProbeReads
from streamjoin.runtime.batch.indexsql import index_least, output_sql, serves_every_join
from streamjoin.runtime.batch.placed import DrainsOnExecutors, PlacedIndexes, on_cluster
from streamjoin.runtime.batch.shedding import Shed
from streamjoin.runtime.jvm.statics import StaticMethods
from streamjoin.runtime.multiway.chain import on_operator
from streamjoin.runtime.multiway.levels import LevelIndexes

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.plan import QueryPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.state.stores import StoreViews

_LEAST = -(2**63)

_names = itertools.count()


def index_class(spark: SparkSession) -> t.Any | None:
    """The JVM's `JoinIndex` class, or None where it is not on the driver's class path."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    cls = jvm.streamjoin.operator.JoinIndex
    try:
        cls.rows("")
    except Exception:  # (py4j: a class it cannot find is a package, and calling it fails)
        return None
    return cls


class IndexedJoins:
    """The indexes of one processor's queries, and the batch each was last committed at."""

    def __init__(self) -> None:
        self._prefix = f"sj-{uuid.uuid4().hex[:8]}-{next(_names)}"
        self.builds: dict[str, tuple[int, tuple[int, str]]] = {}
        """Query (`_key`) → (batch committed into its index, (partitions, placement))."""
        self.uses: dict[str, tuple[int, tuple[int, str]]] = {}
        """Query → (batch, (partitions, placement)) of the indexes this batch applies."""
        self.leaving: tuple[int | None] | None = None
        """The watermark this batch leaves where known before its probes (its input's
        footers), else None: set by the processor each batch."""
        self.reads = ProbeReads(self._class)
        """What the batch's probes leave to read once they ran (`indexreads`)."""
        self.plans = ProbePlans()
        """What the probes plan once per query (`indexplans`)."""
        self.batch_reads = 0
        """How many probes read the batch's own rows (`BatchInput`), a failed attempt's too."""
        self._jvm: t.Any = None
        self._on_cluster: bool | None = None
        self.placed = PlacedIndexes(self._prefix)
        """The indexes on a cluster's executors (`on_cluster`)."""
        self.drains = Drains()
        """The indexes that drain after their query's placement changed (`drains`)."""
        self._spilling: dict[str, int] = {}
        """Query → rows its index had spilled after the last batch."""
        self.levels = LevelIndexes(ProbePlans(), self.on_cluster)
        """The indexes of the multi-way joins' levels (`multiway.chain`)."""

    def eligible(self, ctx: BatchContext, qp: QueryPlan) -> bool:
        """Whether `qp` runs on its index in this batch: every two-way join, inner or outer,
        under any placement and of any size (beyond ``streamjoin.state.memory`` it spills),
        in a run with the operator's jar (`operates`)."""
        return self.operates(ctx)

    def counts_units(self, ctx: BatchContext, query: str) -> bool:
        """Whether the index of `query`, which the skew check counts (`ctx.counted`), counts
        the batch's rows per unit in its probe (so that no job of its own does)."""
        qp = next((qp for qp in ctx.plan.joins if qp.query.name == query), None)
        return qp is not None and self.eligible(ctx, qp) and counted_units(ctx, qp) > 0

    def serve_all(self, ctx: BatchContext) -> bool:
        """Whether the indexes serve every join of the batch, so that no relation of the
        stored rows is read (`serves_every_join`)."""
        plan = ctx.plan
        served = serves_every_join(plan, self.chained(ctx))
        return served and all(self.eligible(ctx, qp) for qp in plan.joins)

    def chained(self, ctx: BatchContext) -> bool:
        """Whether the batch's multi-way joins run on the operator's levels (`on_operator`)."""
        return bool(ctx.plan.multiway) and on_operator(ctx, self.operates(ctx))

    def reads_rows(self, ctx: BatchContext) -> bool:
        """Whether every join of the batch probes its index with the batch's own rows
        (`batch_input`), so that the batch makes no relation of its streams' new rows."""
        plan = ctx.plan  # (multi-way joins' levels and streams' groups take `deltas`)
        return (
            self.serve_all(ctx)
            and not plan.multiway
            and not plan.group_queries
            and all(self.batch_input(ctx, qp) is not None for qp in plan.joins)
        )

    def batch_input(self, ctx: BatchContext, qp: QueryPlan) -> tuple[t.Any, t.Any] | None:
        """`qp`'s `BatchInput` for this batch (`ProbePlans.batch_input`), or None: the batch's
        rows of every stream (the task reads them all) are more than one task takes, or its
        index drains (or may start to)."""
        fits = two_way_one_task(ctx, *ctx.plan.streams) and self._class(ctx.spark) is not None
        built = self.builds.get(key := query_key(qp))
        # (An index that drains, or may start to, is probed with the delta placed both ways.)
        if key in self.drains or (built is not None and built[1] != self._layout(ctx, qp)):
            return None
        return self.plans.batch_input(ctx, qp, fits)

    def _layout(self, ctx: BatchContext, qp: QueryPlan) -> tuple[int, str]:
        """The partitions and the placement `qp`'s index is built for in this batch."""
        placement = ctx.routers[qp.query.name].placement
        return partitions(ctx, qp), json.dumps(placement, sort_keys=True)

    def pairs(
        self,
        ctx: BatchContext,
        qp: QueryPlan,
        deltas: t.Mapping[str, str],
        stores: StoreViews,
        shed: Shed | None = None,
    ) -> DataFrame:
        """`qp`'s new pairs in the batch, from its index (built first where it is not there);
        a shedding query's probe skips the rows `shed`'s allowances leave out and counts each
        direction's pairs into it (`unit_counts`)."""
        q = qp.query
        key = query_key(qp)
        name = f"{self._prefix}/{key}"
        router = ctx.routers[q.name]
        left, right = ctx.plan.stream(q.left.stream), ctx.plan.stream(q.right.stream)
        op = outer_plan(ctx, qp)
        l_least, r_least = index_least(ctx, qp)
        if op is not None:
            l_least, r_least = kept((l_least, r_least), op, ctx.watermark)
        cls = self._class(ctx.spark)
        # (Built for the partitions and the placement in force, at the batch before or at this
        # one, run again: else built anew.)
        layout = self._layout(ctx, qp)
        parts = layout[0]
        at = {(ctx.batch_id - 1, layout), (ctx.batch_id, layout)}
        if self.on_cluster(ctx.spark):
            return placed_pairs(self, ctx, qp, deltas, stores, (parts, layout), shed)
        if self.builds.get(key) not in at:
            built = self.builds.get(key)
            drains = self.drains.start(ctx, qp, key, name, built, cls, shed is None)
            cls.reset(name, parts, ctx.batch_id - 1, ctx.settings.memory)
            if not drains:  # (a drain's new index starts empty: no batch waits for a build)
                load_index(ctx, qp, (cls, name, parts), stores, self.plans)
            elif op is not None:  # (the drain's probe marks the new rows it matches too)
                cls.shareMarks(name)
        self.uses[key] = (ctx.batch_id, layout)
        least = [_LEAST if x is None else x for x in (l_least, r_least)]
        # (Every partition, rows in this batch or not: the driver's JVM holds them all.)
        cls.expire(name, parts, *least)
        units, cuts = self.reads.expect(
            ctx, qp, name, shed, lambda step: cls.buckets(name, parts, step)
        )
        if router.scheme is not None:  # (its places are its partitions: their rows, stored)
            self.reads.holding[q.name] = (name, parts)
        index = (name, parts, ctx.batch_id, units)
        planned = self.batch_input(ctx, qp)  # (None for an index that drains)
        output = None
        if planned is not None:
            late = _LEAST if ctx.watermark is None else ctx.watermark
            batch_input, output = planned
            marker, alone, alone_below = None, None, [_LEAST, _LEAST]
            leaving = self.leaving
            if op is not None:  # (planned over rows of the probe's layout, none of them)
                none = DataFrame(batch_input.nothing(ctx.rows._jdf), ctx.spark)
                marker = self.plans.marker(ctx, op, none)
                if leaving is not None and output is not None:
                    # (The probe's task decides them once it has marked its pairs' rows.)
                    alone = self.plans.alone(ctx, op, none)
                    alone_below = decided_least(op, leaving[0])
                if alone is None:
                    self.reads.deciding_after[q.name] = (op, self._decide(ctx, name, parts, none))
                else:
                    self.reads.probed.add(q.name)
            rows = ctx.rows._jdf
            jdf = cls.probeBatch(
                batch_input, output, marker, alone, *alone_below, rows, late, cuts, *index
            )
            self.batch_reads += 1
            self.reads.one_task.add(q.name)
        else:
            delta = index_input(ctx, qp, deltas[left.name], deltas[right.name])
            output = self.plans.output(ctx, qp, delta)
            marker = None if op is None else self.plans.marker(ctx, op, delta)
            if op is not None:
                self.reads.deciding_after[q.name] = (op, self._decide(ctx, name, parts, delta))
            # (A large delta is read in parallel, then shuffled to the partitions' tasks. An input
            # planned this batch gains less from one task than the batch's own rows do: the
            # smaller bound.)
            together = one_task(ctx, left, right)
            if together or parts == 1:
                self.reads.one_task.add(q.name)
            jdf = cls.probe(delta._jdf, output, marker, cuts, *index, together)
        # (A probe of the batch's own rows: no index drains, whose probe would read views.)
        sides = ("", "") if planned is not None else (deltas[left.name], deltas[right.name])
        return self.with_drain(ctx, qp, (key, sides, cls), DataFrame(jdf, ctx.spark), output)

    def with_drain(
        self,
        ctx: BatchContext,
        qp: QueryPlan,
        drain: tuple[str, tuple[str, str], t.Any],
        found: DataFrame,
        output: t.Any,
    ) -> DataFrame:
        """`qp`'s rows of `found`, the pairs of its index (made into its rows where `output`
        is planned), with those of the index that drains beside it, if any: `drain` is the
        query key, the batch's views of each side and what `drains` calls. An outer join's
        rows without a partner are then both indexes'. (The cluster's probe too: `indexcluster`.)"""
        q, (key, sides, index) = qp.query, drain
        if (drained := self.drains.probe(ctx, qp, key, sides, index, self.plans)) is not None:
            found = found.union(drained[0])  # (both planned over one query's pairs, or neither)
            if (op := outer_plan(ctx, qp)) is not None:
                decide = self.drains.deciding(ctx, key, self.reads.deciding_after[q.name][1], index)
                self.reads.deciding_after[q.name] = (op, decide)
        if output is not None:
            return found
        view = ctx.scratch.view(found, f"_sj_found_{len(ctx.scratch.views)}")
        return ctx.spark.sql(output_sql(qp, view))

    def take_reads(self) -> int:
        """The probes' and the chains' reads of a batch's rows as a whole since the last call."""
        reads = self.batch_reads + self.levels.batch_reads
        self.batch_reads = self.levels.batch_reads = 0
        return reads

    def built(self) -> dict[str, int]:
        """The batch each query's index was last committed at, by query name."""
        return {key.split("#")[0]: batch for key, (batch, _) in self.builds.items()}

    def spilled(self, spark: SparkSession) -> dict[str, int]:
        """The live rows each query's index has spilled to disk, by query name (on a
        cluster: as its last probe that counted rows per unit found them)."""
        cls, placed = self._class(spark), self.placed
        names = {k: placed.name(k) if k in placed else f"{self._prefix}/{k}" for k in self.builds}
        return {k.split("#")[0]: int(cls.spilled(name)) for k, name in names.items()}

    def take_events(self, spark: SparkSession) -> list[str]:
        """The batch's events: the builds on executors, and each index that starts to spill."""
        events, had = self.placed.take_events() + self.levels.take_events(), self._spilling
        self._spilling = self.spilled(spark) if self.builds else {}
        started = {q: n for q, n in self._spilling.items() if n and not had.get(q)}
        return events + [
            f"{q}: index over streamjoin.state.memory, {n} rows spilled" for q, n in started.items()
        ]

    def committed(self, spark: SparkSession) -> None:
        """The batch committed: its indexes are at its id; those it did not use go (a query
        that comes back to its index builds it anew)."""
        # (After a failed batch, a query's index on executors is in `placed` only.)
        for query in (self.builds.keys() | set(self.placed)) - self.uses.keys():
            if query in self.placed:
                self.placed.drop(spark, query)
                continue
            self._class(spark).drop(f"{self._prefix}/{query}")
        if self.drains.names():
            self.drains.clear(self._drain_calls(spark), keep=self.uses.keys())
        self.placed.drop_stale(spark)
        self.levels.committed(spark)
        self.builds = self.uses
        self.uses = {}
        self.plans.end_batch()

    def failed(self) -> None:
        """The batch failed: its indexes may hold part of it (taken back when it runs again);
        those on executors may be lost with one, so they are built again (and none drains)."""
        for query in self.placed:
            self.builds.pop(query, None)
        if self._on_cluster:
            self.drains.forget()
            self.placed.forget_drained()
        self.levels.failed()
        self.uses = {}
        self.reads.clear()
        self.plans.end_batch()

    def lost(self, err: BaseException) -> bool:
        """Whether batch error `err` is a probe that found no partition of an index on a
        cluster's executors where it ran (`PlacedIndexes.lost`): the failed batch (`failed`)
        left them to be built again."""
        return self.placed.lost(err) or self.levels.lost(err)

    def clear(self, spark: SparkSession) -> None:
        """Drop every index (the processor is done)."""
        for query in self.placed:
            self.placed.drop(spark, query)
        if self.drains.names():
            self.drains.clear(self._drain_calls(spark))
        self.placed.drop_stale(spark)
        self.levels.clear(spark)
        if self.builds and (cls := self._class(spark)) is not None:
            for query in self.builds:
                cls.drop(f"{self._prefix}/{query}")
        self.builds = {}
        self.plans = ProbePlans()

    def on_cluster(self, spark: SparkSession) -> bool:
        """Whether the executors are JVMs of their own (a cluster's), where each index
        partition lives on one of them (``PlacedIndex.java``)."""
        if self._on_cluster is None:
            self._on_cluster = on_cluster(spark)
        return self._on_cluster

    def _decide(self, ctx: BatchContext, name: str, parts: int, frame: DataFrame) -> Decide:
        """What decides the rows of index `name` (in the driver's JVM) without a partner, as
        pairs of `frame`'s layout (`ProbeReads.unmatched`)."""
        cls, batch = self._class(ctx.spark), ctx.batch_id
        return lambda side, below: DataFrame(
            cls.decide(frame._jdf, name, parts, side, below, batch), ctx.spark
        )

    def operates(self, ctx: BatchContext) -> bool:
        """Whether the run has `JoinIndex`: not where ``STREAMJOIN_LOCAL=off`` chose to run
        without streamjoin's jar (every join on the cached slices); else a `StreamJoinError`
        where the driver lacks it."""
        if not ctx.settings.local:
            return False
        if self._class(ctx.spark) is not None:
            return True
        msg = (
            "streamjoin's jar (the join operator) is not on the driver's class path: under "
            "spark-submit, pass --jars and --driver-class-path the path `streamjoin jar` prints; "
            "STREAMJOIN_LOCAL=off runs without it, every join on the slower cached path"
        )
        raise StreamJoinError(msg)

    def _drain_calls(self, spark: SparkSession) -> t.Any:
        """What `drains` calls: ``JoinIndex``, or on a cluster `DrainsOnExecutors`."""
        on_executors = self.on_cluster(spark)
        return DrainsOnExecutors(self.placed, spark, None) if on_executors else self._class(spark)

    def _class(self, spark: SparkSession) -> t.Any:
        if self._jvm is None:
            found = index_class(spark)
            self._jvm = False if found is None else StaticMethods(found)
        return self._jvm or None
