"""The join operator's two-way probe where a cluster's executors hold the index partitions
(`placed.PlacedIndexes`, ``PlacedIndex.java``): each partition built on one executor from the
committed units where it is not there, a drain started beside it where its placement changed,
then probed on its owner. The driver's JVM's probe, and the state both share, are
`indexed.IndexedJoins`'."""

from __future__ import annotations

import typing as t
from functools import partial

from pyspark.sql import DataFrame

from streamjoin.runtime.batch.indexinput import index_input, stored_rows
from streamjoin.runtime.batch.indexouter import decided_least, kept, loaded, outer_plan
from streamjoin.runtime.batch.indexplans import query_key
from streamjoin.runtime.batch.indexsql import index_least, least_times
from streamjoin.runtime.batch.placed import DrainsOnExecutors

if t.TYPE_CHECKING:
    from streamjoin.plan import QueryPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.indexed import IndexedJoins
    from streamjoin.runtime.batch.shedding import Shed
    from streamjoin.runtime.state.stores import StoreViews

_LEAST = -(2**63)


def placed_pairs(
    joins: IndexedJoins,
    ctx: BatchContext,
    qp: QueryPlan,
    deltas: t.Mapping[str, str],
    stores: StoreViews,
    placed: tuple[int, tuple[int, str]],
    shed: Shed | None,
) -> DataFrame:
    """`pairs` where a cluster's executors hold the partitions (`PlacedIndexes`): built
    there from the units where not there, then probed on each partition's owner (`placed`:
    the partitions and the layout). A batch that fits one task is read by one (its
    `BatchInput`: nothing planned for it but the shuffle to the owners), else its delta is
    planned as a relation of each side's rows."""
    q = qp.query
    parts, layout = placed
    key = query_key(qp)
    planned = joins.batch_input(ctx, qp)  # (None for an index that drains)
    if planned is not None:
        late = _LEAST if ctx.watermark is None else ctx.watermark
        delta, output = DataFrame(planned[0].delta(ctx.rows._jdf, late), ctx.spark), planned[1]
        joins.batch_reads += 1
    else:
        delta = index_input(ctx, qp, deltas[q.left.stream], deltas[q.right.stream])
        output = joins.plans.output(ctx, qp, delta)
    op = outer_plan(ctx, qp)
    marker = None if op is None else joins.plans.marker(ctx, op, delta)
    at = {(ctx.batch_id - 1, layout), (ctx.batch_id, layout)}
    drains = DrainsOnExecutors(joins.placed, ctx.spark, ctx)
    if joins.builds.get(key) not in at or key not in joins.placed:
        bounds = least_times(ctx, qp)  # (the stored rows' event times)
        decided = [_LEAST, _LEAST]
        if op is not None:
            bounds = loaded(bounds, op, ctx.watermark)
            decided = decided_least(op, ctx.watermark)
        built, name = joins.builds.get(key), joins.placed.name(key) if key in joins.placed else ""
        moved = joins.drains.start(ctx, qp, key, name, built, drains, not shed and bool(name))
        stored = None if moved else stored_rows(ctx, qp, stores, bounds)
        rows = delta.limit(0) if stored is None else stored  # (a drain's starts empty)
        beside = moved[0] if moved else None
        build = (rows, parts, ctx.batch_id - 1, marker, decided, beside)
        keeps = 0 if op is None else sum(1 << i for i in (0, 1) if op.outer.preserves(i))
        joins.placed.build(ctx.spark, key, *build, memory=ctx.settings.memory, preserved=keeps)
    joins.uses[key] = (ctx.batch_id, layout)
    least = index_least(ctx, qp)
    alone = None
    if op is not None:
        least = kept(least, op, ctx.watermark)
        # (A delta planned as a relation: its index drains, or may start to, beside it.)
        alone = _alone(joins, ctx, qp, delta, output) if planned is not None else None
        batch = ctx.batch_id
        if alone is None:
            joins.reads.deciding_after[q.name] = (
                op,
                lambda side, below: joins.placed.decide(ctx, key, delta, side, below, batch),
            )
        else:
            joins.reads.probed.add(q.name)
    expiry = [_LEAST if x is None else x for x in least]
    sample = partial(joins.placed.buckets, ctx.spark, key)
    units, cuts = joins.reads.expect(ctx, qp, joins.placed.name(key), shed, sample)
    how = (output, cuts, units)
    pairs = joins.placed.probe(ctx.spark, key, delta, ctx.batch_id, expiry, marker, how, alone)
    # (A probe of the batch's own rows: no index drains, whose probe would read views.)
    sides = ("", "") if planned is not None else (deltas[q.left.stream], deltas[q.right.stream])
    return joins.with_drain(ctx, qp, (key, sides, drains), pairs, output)


def _alone(
    joins: IndexedJoins, ctx: BatchContext, qp: QueryPlan, delta: DataFrame, output: t.Any
) -> tuple[t.Any, int, int] | None:
    """An outer join's rows without a partner as each partition's probe task decides them
    (their plan and the bounds per side of the watermark the batch leaves), or None: decided
    after the probe. In the task only where the watermark is known before the probe, the
    output is planned, each row lies in one partition (a row with copies elsewhere, a
    keyless band's runs, a matrix, an OR's tables, is alone only where none of them matched),
    and no drain's matches of its rows wait for their decisions (`decide` applies them)."""
    op = outer_plan(ctx, qp)
    copies = {"_sj_ss", "_sj_tab"} & set(delta.columns)
    if op is None or joins.leaving is None or output is None or copies:
        return None
    if joins.placed.vetoes_pending(ctx.spark, query_key(qp)):
        return None  # (a drain that ended left matches of rows still undecided)
    plan = joins.plans.alone(ctx, op, delta)
    if plan is None:
        return None
    below = decided_least(op, joins.leaving[0])
    return plan, below[0], below[1]
