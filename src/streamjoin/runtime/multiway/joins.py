"""Step 4 of a batch, multi-way queries: each query's new combinations, one DataFrame per term
of its delta rule (`plan.multiway`), with shared probe prefixes computed once and cached for the
batch, and an epoch's selectivities measured. (This is the cached slices' path: runs without the
join operator, and queries that shed; the operator runs the others as chains, `chained`.)"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field
from functools import partial

from pyspark.sql import Observation
from pyspark.sql import functions as F

from streamjoin.adapt.probes import Reorderer
from streamjoin.plan.chain import chain_choices
from streamjoin.plan.shedding import counts_shed_pairs
from streamjoin.runtime.batch.context import view_tag
from streamjoin.runtime.batch.shedding import Shed, allowances, count_rows, directions, probing
from streamjoin.runtime.multiway.selectivity import start_measures
from streamjoin.runtime.multiway.terms import BatchTerms, batch_terms, unfolded

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.model import StreamDef
    from streamjoin.plan import JobPlan, MultiwayPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.settings import Settings
    from streamjoin.runtime.state.stores import StoreViews
    from streamjoin.runtime.threads import Background


@dataclass
class MultiwayBatch:
    """One batch's multi-way work: the terms' DataFrames by query, and what runs beside them."""

    frames: dict[str, list[DataFrame]]
    measures: Background | None
    """The selectivity counts running beside an epoch's last batch."""
    shed: dict[str, Shed] = field(default_factory=dict)
    """Per query that sheds probes: its allowances and the pairs each term found."""


class MultiwayJoins:
    """The multi-way queries of a job, batch after batch: their plans (`adapt.probes`)."""

    def __init__(self, plan: JobPlan, settings: Settings, parallelism: int) -> None:
        self.plan = plan
        self.settings = settings
        self.reorder = Reorderer(plan, parallelism)
        self.reorder.configure(greedy=settings.optimizer == "greedy")
        self._unfolded: dict[str, tuple[MultiwayPlan, MultiwayPlan]] = {}
        """Per query: the last plan `reorder` gave and that plan `unfolded` (planned once)."""

    def run(
        self, ctx: BatchContext, deltas: Mapping[str, str], stores: StoreViews
    ) -> MultiwayBatch:
        """Start the batch's multi-way joins over `deltas` (each stream's new rows)."""
        spark, prev, batch_id = ctx.spark, ctx.prev, ctx.batch_id
        self.reorder.restore(prev.multiway)

        def streams(mp: MultiwayPlan) -> list[StreamDef]:
            return [self.plan.job.stream(side.stream) for side in mp.query.sides]

        def store(stream: str, lo: int | None, with_new: bool) -> str:
            delta = deltas[stream] if with_new else None
            sp = self.plan.stream(stream)
            return stores.state(spark, sp, prev, lo, delta, ctx.scratch.views)

        plans = [self._unfold(mp) for mp in self.reorder.plans(batch_id)]
        measures = None
        if self.reorder.measuring(batch_id):
            args = (spark, self.reorder, batch_id, plans, streams, deltas, store)
            measures = start_measures(*args)
            ctx.scratch.running.append(measures)
        shed: dict[str, Shed] = {}
        starts: dict[str, dict[int, str]] = {}
        for mp in plans:
            given = allowances(prev, mp.query, ctx.arrivals)
            if given is not None:
                shed[mp.query.name] = Shed(mp.query, given)
                starts[mp.query.name] = _starts(mp, streams(mp), deltas, given, batch_id)

        def terms(chosen: list[MultiwayPlan], views: Mapping[str, Mapping[int, str]]) -> BatchTerms:
            return batch_terms(
                chosen,
                streams,
                deltas,
                store,
                prev.global_wm,
                share=self.settings.share,
                probing=views,
            )

        built = terms(plans, starts)
        for name, sql in built.shared.items():
            # A join's output has as many partitions as its store's files and the batch's input
            # together (tens); every reader of the view would run a task for each.
            df = ctx.scratch.persist(spark.sql(sql).coalesce(self.reorder.parallelism))
            ctx.scratch.view(df, name)
        frames = {name: [spark.sql(sql) for sql in sqls] for name, sqls in built.terms.items()}
        for mp in plans:
            if mp.query.name in shed:
                recount = partial(terms, [mp]) if counts_shed_pairs(mp.query) else None
                query = (mp, streams(mp), deltas, shed[mp.query.name], batch_id)
                frames[mp.query.name] = _observe_shed(spark, *query, frames[mp.query.name], recount)
        return MultiwayBatch(frames, measures, shed)

    def _unfold(self, mp: MultiwayPlan) -> MultiwayPlan:
        """`mp` as the slices run it (`unfolded`), planned again only when `reorder` gives a
        new plan for its query (it hands out the same object while the orders stay)."""
        given, made = self._unfolded.get(mp.query.name, (None, None))
        if given is not mp or made is None:
            made = unfolded(self.plan.job, mp)
            self._unfolded[mp.query.name] = (mp, made)
        return made

    def chained(
        self, ctx: BatchContext, deltas: Mapping[str, str], stores: StoreViews
    ) -> tuple[list[MultiwayPlan], Background | None]:
        """The batch's plans, for queries that run on the operator's levels (`chain`): their
        orders set the order of each query's chain; and at an epoch's last batch the
        selectivity counts, beside the batch (the stored rows read from the units' files)."""
        self.reorder.restore(ctx.prev.multiway)
        plans = list(self.reorder.plans(ctx.batch_id))
        if not self.reorder.measuring(ctx.batch_id):
            return plans, None
        # (Only a chain's first input's order counts here: measured where one may change.)
        if not any(chain_choices(self.plan.job, mp) for mp in plans):
            return plans, None

        def streams(mp: MultiwayPlan) -> list[StreamDef]:
            return [self.plan.job.stream(side.stream) for side in mp.query.sides]

        def store(stream: str, lo: int | None, with_new: bool) -> str:
            delta = deltas[stream] if with_new else None
            sp, views = self.plan.stream(stream), ctx.scratch.views
            return stores.state(
                ctx.spark, sp, ctx.prev, lo, delta, views, cached=False, estimate=True
            )

        args = (ctx.spark, self.reorder, ctx.batch_id, plans, streams, deltas, store)
        measures = start_measures(*args)
        ctx.scratch.running.append(measures)
        return plans, measures

    def after_batch(
        self, measures: Background | None, batch_id: int, rows: Mapping[str, int]
    ) -> tuple[dict[str, str], dict[str, t.Any]]:
        """Feed the batch's rows and its `measures` (an epoch's last batch's counts, else
        None) to the plans; a note per query whose orders change, and the state the manifest
        carries to the next batch."""
        counts = measures.result() if measures is not None else None
        notes = self.reorder.after_batch(batch_id, rows, counts)
        return notes, self.reorder.state()


def _starts(
    mp: MultiwayPlan,
    inputs: t.Sequence[StreamDef],
    deltas: Mapping[str, str],
    given: Mapping[str, float],
    batch_id: int,
    skipped: bool = False,
) -> dict[int, str]:
    """Per input position of a shedding query: its new rows that probe at its direction's
    allowance (`runtime.batch.shedding.probing`), or with `skipped` those that do not."""
    names = directions(mp.query)
    return {
        j: probing(deltas[s.name], given[names[j]], batch_id, skipped=skipped)
        for j, s in enumerate(inputs)
    }


def _observe_shed(
    spark: SparkSession,
    mp: MultiwayPlan,
    inputs: t.Sequence[StreamDef],
    deltas: Mapping[str, str],
    shed: Shed,
    batch_id: int,
    frames: list[DataFrame],
    recount: Callable[[Mapping[str, Mapping[int, str]]], BatchTerms] | None,
) -> list[DataFrame]:
    """A shedding query's term frames, each observed for the pairs its direction found; with
    `recount` (the batch's terms for other starting rows), the pairs its skipped rows would
    have found, counted."""
    q = mp.query
    names = directions(q)  # (term j starts from input j's new rows: direction j)
    observed = []
    for j, df in enumerate(frames):
        seen = Observation(f"sj_shed_{view_tag(q.name, batch_id)}_{j}")
        observed.append(df.observe(seen, F.count(F.lit(1)).alias("rows")))
        shed.pairs[names[j]] = seen
    if recount is not None:
        skipped = _starts(mp, inputs, deltas, shed.allowances, batch_id, skipped=True)
        missed = recount({q.name: skipped}).terms[q.name]
        shed.missed = {
            d: count_rows(spark, sql) if shed.allowances[d] < 1.0 else 0
            for d, sql in zip(names, missed, strict=True)
        }
    return observed
