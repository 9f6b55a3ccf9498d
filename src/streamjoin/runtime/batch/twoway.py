"""Step 4 of a batch, two-way queries: each query's new pairs as a DataFrame, from its join
operator (`batch.indexed`), or in a run without its jar (``STREAMJOIN_LOCAL=off``) by the
delta rule ``ΔL ⋈ (R_old ∪ ΔR) ∪ L_old ⋈ ΔR`` over the cached state slices
(`joins.delta_join_sql`),
reading only the state units whose event times can meet the delta's."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from pyspark.sql import Observation
from pyspark.sql import functions as F

from streamjoin.plan.shedding import counts_shed_pairs
from streamjoin.runtime.batch.context import view_tag
from streamjoin.runtime.batch.joins import delta_join_sql
from streamjoin.runtime.batch.shedding import SIDES, Shed, allowances, count_rows, probing
from streamjoin.runtime.routing.router import key_types

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamjoin.plan import Band, QueryPlan
    from streamjoin.plan.shared import SharedGroup
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.indexed import IndexedJoins
    from streamjoin.runtime.batch.joins import Side
    from streamjoin.runtime.routing.router import Observed, QueryRouter
    from streamjoin.runtime.state.stores import StoreViews


@dataclass
class TwoWay:
    """The two-way queries' new pairs, and the views observed for their rows per unit."""

    frames: dict[str, DataFrame] = field(default_factory=dict)
    observed: dict[str, Observed] = field(default_factory=dict)
    shed: dict[str, Shed] = field(default_factory=dict)
    """Per shedding query: its allowances and the pairs each direction found."""
    shared: list[tuple[SharedGroup[t.Any], DataFrame]] = field(default_factory=list)
    """Each shared join's rows (its members' columns; `SharedGroup.bits` tells whose)."""


def two_way_joins(
    ctx: BatchContext,
    deltas: t.Mapping[str, str],
    stores: StoreViews,
    indexed: IndexedJoins | None = None,
) -> TwoWay:
    """Every two-way query's new pairs in the batch (`deltas`: each stream's new rows), from
    their `indexed` state where it serves them (`batch.indexed`)."""
    out = TwoWay()
    for qp in ctx.plan.joins:
        observed: list[tuple[str, Observation, int]] = []
        given = allowances(ctx.prev, qp.query, ctx.arrivals)
        shed = None if given is None else Shed(qp.query, given)
        if indexed is not None and indexed.eligible(ctx, qp):
            out.frames[qp.query.name] = indexed.pairs(ctx, qp, deltas, stores, shed)
            if shed is not None:
                out.shed[qp.query.name] = shed
            continue
        out.frames[qp.query.name] = _pairs(ctx, qp, deltas, stores, observed, shed)
        if shed is not None:
            out.shed[qp.query.name] = shed
        if observed:
            out.observed[qp.query.name] = observed
    for group in ctx.plan.shared:  # (its members' rows: `sharedsinks.shared_outputs`)
        out.shared.append((group, out.frames.pop(group.name)))
    return out


def _pairs(
    ctx: BatchContext,
    qp: QueryPlan,
    deltas: t.Mapping[str, str],
    stores: StoreViews,
    observed: list[tuple[str, Observation, int]],
    shed: Shed | None = None,
) -> DataFrame:
    q = qp.query
    window = qp.parts.window
    lo = window.lo_us if window else None
    hi = window.hi_us if window else None
    # Delta rows are not late: their event times are >= the watermark W the batch started
    # with, so only state rows that can meet an event time >= W are read. A delta whose
    # files' footers tell its least event time F raises that to max(W, F): the older units
    # of a stream read in time order then drop out whole.
    wm = ctx.watermark if qp.left_time is not None and qp.right_time is not None else None
    left, right = ctx.plan.stream(q.left.stream), ctx.plan.stream(q.right.stream)
    floors = ctx.floors
    floor = {n: max(wm, floors.get(n, wm)) for n in (left.name, right.name) if wm is not None}
    # right rows that can meet the left delta: r.ts >= W + lo
    r_lo = floor[left.name] + lo if wm is not None and lo is not None else None
    # left rows that can meet the right delta: l.ts >= W - hi
    l_lo = floor[right.name] - hi if wm is not None and hi is not None else None
    router = ctx.routers[q.name]
    placed = router.scheme is not None
    shuffle = placed or q.option("partitioning") == "hash"
    # On the automatic hash path the units are still observed (where the key's hash would
    # send each row), so that skew is seen and the scheme can move away from hashing.
    observe = shuffle or (bool(qp.parts.equi) and q.option("adapt", "true") == "true")
    # (Unless the state job or the files' keys count them: a query moved off hash is counted
    # there by its keys alone, and its routed views still count its scheme's places.)
    observe = observe and (q.name not in ctx.counted or q.name in ctx.counted.moved)
    views = ctx.scratch.views
    r_state = stores.state(ctx.spark, right, ctx.prev, r_lo, deltas[q.right.stream], views)
    l_state = stores.state(ctx.spark, left, ctx.prev, l_lo, None, views)
    inputs: list[tuple[Side, str, str]] = [
        ("left", deltas[q.left.stream], r_state),
        ("right", deltas[q.right.stream], l_state),
    ]
    sqls = []
    if shed is not None and counts_shed_pairs(q):
        shed.missed = {
            side: _missed(ctx, qp, side, delta, state, shed.allowances[side], router.band)
            for side, delta, state in inputs
        }
    for delta_side, delta_view, state_view in inputs:
        if shed is not None:
            delta_view = probing(delta_view, shed.allowances[delta_side], ctx.batch_id)
        if observe:
            delta_view, state_view = _routed_views(
                ctx, router, delta_side, (delta_view, state_view), observed, shuffle=shuffle
            )
        sqls.append(
            delta_join_sql(
                qp,
                delta_side,
                delta_view,
                state_view,
                placed=placed,
                shuffle=shuffle,
                band=router.band,
            )
        )
    if shed is not None:
        terms = []
        for side, sql in zip(SIDES, sqls, strict=True):
            seen = Observation(f"sj_shed_{view_tag(q.name, ctx.batch_id)}_{side}")
            terms.append(ctx.spark.sql(sql).observe(seen, F.count(F.lit(1)).alias("rows")))
            shed.pairs[side] = seen
        return terms[0].unionAll(terms[1])
    # One SQL text for both terms: one analysis in the JVM instead of two and a union.
    return ctx.spark.sql(" UNION ALL ".join(f"({sql})" for sql in sqls))


def _missed(
    ctx: BatchContext,
    qp: QueryPlan,
    side: Side,
    delta_view: str,
    state_view: str,
    allowance: float,
    band: Band | None,
) -> int:
    """The pairs the rows of `delta_view` that skip their probe at `allowance` would have
    found in `state_view`: a count-only join (one Spark job)."""
    if allowance >= 1.0:
        return 0
    skipped = probing(delta_view, allowance, ctx.batch_id, skipped=True)
    sql = delta_join_sql(qp, side, skipped, state_view, band=band)
    return count_rows(ctx.spark, sql)


def _routed_views(
    ctx: BatchContext,
    router: QueryRouter,
    delta_side: Side,
    relations: tuple[str, str],
    observed: list[tuple[str, Observation, int]],
    *,
    shuffle: bool,
) -> tuple[str, str]:
    """The delta routed to its probe places and the state to its store places (for the hash
    path: as they are), each observed for its rows per unit."""
    if router.key_types is None and router.qp.parts.equi:
        router.key_types = key_types(ctx.spark, router)
    state_side: Side = "right" if delta_side == "left" else "left"
    name = router.qp.query.name
    out = []
    roles: tuple[tuple[Side, str, t.Literal["probe", "store"]], ...] = (
        (delta_side, relations[0], "probe"),
        (state_side, relations[1], "store"),
    )
    for side, view, role in roles:
        if not shuffle and role == "store":
            # The automatic hash path watches the delta's keys only: skew shows there,
            # and the state scan stays free of per-row hashing.
            out.append(view)
            continue
        df = ctx.spark.sql(router.routed(side, view, role))
        unit = router.unit_sql(side)
        aggs = [F.expr(f"count_if({unit} = {i})").alias(f"u{i}") for i in range(router.units)]
        value = router.row_sql(side).value
        ranges = int(router.params.get("units", 1))
        if router.params.get("name") == "range" and value is not None and ranges > 1:
            # Equi-depth bounds for the next batch, from the rows of this one.
            qs = ", ".join(repr(i / ranges) for i in range(1, ranges))
            aggs.append(F.expr(f"percentile_approx({value}, array({qs}))").alias("q"))
        n = len(ctx.scratch.views)
        obs = Observation(f"sj_units_{name}_{n}")
        out.append(ctx.scratch.view(df.observe(obs, *aggs), f"_sj_routed_{n}"))
        observed.append((role, obs, router.units))
    return out[0], out[1]


def shared_cores(
    ctx: BatchContext, frames: t.Mapping[str, list[DataFrame]], out: TwoWay
) -> dict[str, list[DataFrame]]:
    """The multi-way joins' new rows (`frames`, by join) as each query's parts; the rows of a
    multi-way join that queries share go with the shared joins' (`out.shared`)."""
    plan = ctx.plan
    for group in plan.cores:
        parts = frames.get(group.name, [])
        if parts:
            rows = parts[0]
            for part in parts[1:]:
                rows = rows.unionAll(part)
            out.shared.append((group, rows))
    cores = {g.name for g in plan.cores}
    return {n: frames.get(n, []) for mp in plan.multiway if (n := mp.query.name) not in cores}
