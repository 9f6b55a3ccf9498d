"""The rows the join operator (`indexed`) takes: a batch's delta of both sides, and the
committed live rows a build loads (`load_index`), each in the operator's input layout
(`indexsql.input_parts`: the side, the key's hash, the event time, the row as a struct, and its
places)."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.batch.indexouter import decided_least, loaded, outer_plan
from streamjoin.runtime.batch.indexsql import input_parts, least_times

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamjoin.plan import QueryPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.indexplans import ProbePlans
    from streamjoin.runtime.state.stores import StoreViews

_LEAST = -(2**63)
"""The least long: no bound."""


def index_input(ctx: BatchContext, qp: QueryPlan, left: str, right: str) -> DataFrame:
    """The rows of relations `left` and `right` (the two sides' columns) as `JoinIndex`
    takes them."""
    return ctx.spark.sql(" UNION ALL ".join(input_parts(ctx, qp, left, right)))


def stored_rows(
    ctx: BatchContext,
    qp: QueryPlan,
    stores: StoreViews,
    bounds: tuple[int | None, int | None] | None = None,
) -> DataFrame | None:
    """The committed live rows of `qp`'s two sides as its index takes them (from the units'
    files: the index is their only copy in memory), from `bounds` (default: the least times
    the batch's rows can meet); None where there are none."""
    sides = (ctx.plan.stream(qp.query.left.stream), ctx.plan.stream(qp.query.right.stream))
    if not any(ctx.prev.live(sp.name) for sp in sides):
        return None
    views = ctx.scratch.views
    state = [
        stores.state(ctx.spark, sp, ctx.prev, least, None, views, cached=False)
        for sp, least in zip(sides, bounds or least_times(ctx, qp), strict=True)
    ]
    return index_input(ctx, qp, *state)


def load_index(
    ctx: BatchContext,
    qp: QueryPlan,
    index: tuple[t.Any, str, int],
    stores: StoreViews,
    plans: ProbePlans,
) -> None:
    """Loads `qp`'s committed live rows into its (reset) index in the driver's JVM (`index`:
    the ``JoinIndex`` class, the index's name and partitions); an outer join's pairs among
    them mark their rows, and its rows the committed watermark decided count as decided."""
    cls, name, parts = index
    op = outer_plan(ctx, qp)
    bounds = least_times(ctx, qp)
    if op is not None:
        bounds = loaded(bounds, op, ctx.watermark)
    stored = stored_rows(ctx, qp, stores, bounds)
    if stored is None:
        return
    marker, decided = None, [_LEAST, _LEAST]
    if op is not None:
        marker = plans.marker(ctx, op, stored)
        decided = decided_least(op, ctx.watermark)
    cls.load(stored._jdf, name, parts, marker, *decided)
