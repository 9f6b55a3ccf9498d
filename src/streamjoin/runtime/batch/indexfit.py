"""How the join operator serves a two-way join in a batch (`indexed`): in how many partitions,
and what its probe counts for the controllers: decisions from the query's plan, its router's
scheme and the batch's footers, read by `IndexedJoins` each batch."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.batch.indexsql import banded, index_band, nested, runs
from streamjoin.runtime.batch.shedding import SCALE

if t.TYPE_CHECKING:
    from streamjoin.plan import QueryPlan, StreamPlan
    from streamjoin.runtime.batch.context import BatchContext


ONE_TASK_ROWS = 20_000
"""A batch's delta of at most this many rows (both sides, by its files' footers) is probed in one
task without a shuffle: the shuffle's stage costs more than a second core saves on it. The
bound on a cluster, and a multi-way chain's deltas' (`multiway.chain`)."""

LOCAL_ONE_TASK_ROWS = 250_000
"""A two-way join's bound in local mode, where the driver's JVM holds every partition, for a
probe of the batch's own rows (`BatchInput`): one task reads them as Spark planned them, with
no plan of its input made each batch and no shuffle. (An input planned in the batch keeps
`ONE_TASK_ROWS`: there one task saves no plan, only the shuffle, and loses the second core.)
Measured (docs/dev-log.md): live equi at 20,000 rows a second a stream, batch p50 207
against 442 ms; `equi`'s quick backlog (100,000 rows a batch), warm batches 186-243 against
441-636 ms, its full backlog (200,000) 307-489 against 460-680; Nexmark's backlogs (196,000 a
batch) q20 12.0 against 16.8 s, q4 23.2 against 24.8, q9 26.3 against 27.9, q7 equal. The
engine's loop takes at most about this many rows a batch at the default heap
(`streamjoin.batch.maxRows`)."""

CHAIN_ONE_TASK_ROWS = 40_000
"""The same bound for a multi-way chain (`multiway.chain`), whose levels in one task are
planned once, where over several tasks each level's input and output are planned every batch
(tens of ms a level in the driver): `multiquery` quick, 10 queries, about 21,600 rows a batch,
ran 25-28 % faster in one task (three alternating pairs)."""


def two_way_one_task(ctx: BatchContext, *streams: StreamPlan) -> bool:
    """`one_task` for a two-way join's probe of the batch's own rows: `LOCAL_ONE_TASK_ROWS` in
    local mode."""
    from streamjoin.runtime.batch.placed import on_cluster

    local = not on_cluster(ctx.spark)
    return one_task(ctx, *streams, most=LOCAL_ONE_TASK_ROWS if local else ONE_TASK_ROWS)


def one_task(ctx: BatchContext, *streams: StreamPlan, most: int | None = None) -> bool:
    """Whether the batch's rows of `streams` (a join's two sides; or every stream, which a probe
    of the batch's own rows reads) are few enough, by their files' footers, for one task: at
    most `most` (None: `ONE_TASK_ROWS`). A stream that reads no file in the batch has none:
    a batch of one stream's file is one task too."""
    rows = ctx.arrivals
    if any(sp.name not in rows for sp in streams):
        return False
    bound = ONE_TASK_ROWS if most is None else most
    return sum(rows[sp.name] for sp in streams) <= bound  # (a self-join's rows: twice)


def partitions(ctx: BatchContext, qp: QueryPlan) -> int:
    """The partitions of `qp`'s index: a scheme's places; a band join without a key's runs of
    buckets (`indexsql.runs`); one for a nested loop (every row under one key); else the
    batch's shuffle partitions."""
    router = ctx.routers[qp.query.name]
    if router.scheme is not None:
        return router.units
    if banded(qp):
        return runs(ctx, qp) or 1
    return 1 if nested(qp) else ctx.parallelism


def counted_units(ctx: BatchContext, qp: QueryPlan) -> int:
    """The units the probe of `qp` counts the batch's rows in for its router (0: none): the
    automatic hash path's by the equality key, which the skew check reads (a band's bucket
    within the key too), and a scheme's places, which its controllers read."""
    q = qp.query
    router = ctx.routers[q.name]
    forced = q.option("partitioning", "auto")
    automatic = forced == "auto" and q.option("adapt") != "false"
    if router.scheme is not None or forced == "hash" or (automatic and qp.parts.equi):
        return router.units
    return 0


def shed_cuts(left: float, right: float, count: bool) -> str:
    """Shedding's test for a probe (`JoinIndex.probing`) whose sides' rows probe at allowances
    `left` and `right`: each side's cut of the hash's scale below which a row probes, and
    whether the pairs of those that do not are counted."""
    cuts = (str(int(allowance * SCALE)) for allowance in (left, right))
    return ",".join((*cuts, "count" if count else "estimate"))


SAMPLED_ROWS = 4096
"""About how many live rows' band buckets a range query's bounds are taken from."""


def range_sample(ctx: BatchContext, qp: QueryPlan) -> tuple[float, int, int] | None:
    """Where `qp` runs under range partitioning and its bounds are due (none yet, or a batch
    of the skew check's), what its index's rows are sampled by after the batch's probe: the
    band's bucket width, the ranges it asks for, and the step between two rows sampled
    (`ProbeReads.quantiles`); else None."""
    params = ctx.routers[qp.query.name].params
    if params.get("name") != "range" or int(params.get("units", 1)) < 2:
        return None
    band = index_band(ctx, qp)
    if band is None:
        return None
    if params.get("bounds") and not ctx.checks_skew:
        return None
    rows = ctx.prev.state_rows()
    live = sum(rows.get(s.stream, 0) for s in {qp.query.left, qp.query.right})
    return band.width, int(params["units"]), live // SAMPLED_ROWS + 1
