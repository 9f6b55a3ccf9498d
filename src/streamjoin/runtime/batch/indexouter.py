"""An outer join on the join operator (`indexed`): the bounds and SQL it adds to an inner join's.

The operator marks a stored row matched when a pair of it meets the ON condition (in the probe's
task, `BatchInput.test`); after the batch's probe, the rows of a preserved side that the
watermark the batch leaves has decided (`plan.outer.OuterPlan.dead_below`) and that no partner
matched are its rows without a partner (``JoinIndex.decide``), each decided once, by one batch
(a rerun of it decides the same). A preserved row stays in the operator until decided; after a
rebuild from the units, the rows the committed watermark had decided count as decided, and the
pairs among the rows loaded mark them (the other side loaded a window's width further back, as
the units keep it)."""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    from streamjoin.plan import QueryPlan
    from streamjoin.plan.outer import OuterPlan
    from streamjoin.runtime.batch.context import BatchContext

Bounds = tuple[int | None, int | None]
"""The least event time of a left and a right row to keep (None: no bound)."""


def outer_plan(ctx: BatchContext, qp: QueryPlan) -> OuterPlan | None:
    """`qp`'s outer join plan (None: an inner join)."""
    return next((op for op in ctx.plan.outers if op.query.name == qp.query.name), None)


def decided_below(op: OuterPlan, watermark: int | None) -> Bounds:
    """Per side, the event time below which a preserved row is decided at `watermark` (None:
    none is, or the side is not preserved)."""
    return (
        op.dead_below(0, watermark) if op.outer.preserves(0) else None,
        op.dead_below(1, watermark) if op.outer.preserves(1) else None,
    )


def decided_least(op: OuterPlan, watermark: int | None) -> list[int]:
    """`decided_below` as the operator takes it: the least long for none."""
    return [-(2**63) if x is None else x for x in decided_below(op, watermark)]


def kept(least: Bounds, op: OuterPlan, watermark: int | None) -> Bounds:
    """The expiry bounds `least` of an inner join, lowered so that no preserved row goes before
    it is decided."""
    below = decided_below(op, watermark)
    return _lower(least, below)


def loaded(least: Bounds, op: OuterPlan, watermark: int | None) -> Bounds:
    """The bounds of the rows a rebuild loads: `kept`, and the other side of each preserved
    one a window's width behind its undecided rows (its partners, whose pairs mark them)."""
    below = decided_below(op, watermark)
    reach: list[int | None] = []
    for i in (0, 1):
        other = below[1 - i]
        reach.append(None if other is None else other - op.lag(i))
    return _lower(_lower(least, below), (reach[0], reach[1]))


def _lower(least: Bounds, other: Bounds) -> Bounds:
    out = []
    for a, b in zip(least, other, strict=True):
        out.append(a if b is None else b if a is None else min(a, b))
    return out[0], out[1]


def marker_sql(op: OuterPlan, pairs: str) -> str:
    """SQL of the pairs of relation `pairs` that meet `op`'s ON condition (its rows then have
    a partner)."""
    q = op.query
    a, b = q.left.alias, q.right.alias
    return f"SELECT * FROM (SELECT _sj_l AS {a}, _sj_r AS {b} FROM {pairs}) WHERE ({op.outer.on})"


def alone_sql(op: OuterPlan, rows: str) -> str:
    """SQL of `op`'s result rows of its rows without a partner in relation `rows` (pairs whose
    other side is NULL) where its WHERE holds on them."""
    q = op.query
    a, b = q.left.alias, q.right.alias
    select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
    where = "" if op.outer.where is None else f" WHERE {op.outer.where}"
    return f"SELECT {select} FROM (SELECT _sj_l AS {a}, _sj_r AS {b} FROM {rows}){where}"
