"""The rows the join operator (`indexed`) takes: a batch's delta of both sides, and the
committed live rows a build loads, each in the operator's input layout (`indexsql.input_parts`:
the side, the key's hash, the event time, the row as a struct, and its places)."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.batch.indexsql import input_parts, least_times

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamjoin.plan import QueryPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.state.stores import StoreViews


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
