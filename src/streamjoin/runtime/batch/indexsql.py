"""The SQL of a query's rows as its index (`indexed`, ``JoinIndex.java``) takes them, and of
the query's rows made from the candidate pairs a probe returns."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.batch.joins import Side, bucket_range
from streamjoin.runtime.routing.router import key_types

if t.TYPE_CHECKING:
    from streamjoin.plan import JobPlan, QueryPlan, StreamPlan
    from streamjoin.runtime.batch.context import BatchContext


def input_parts(
    ctx: BatchContext, qp: QueryPlan, left: str, right: str, *, late: bool = False
) -> list[str]:
    """The SELECT of each side's rows of relations `left` and `right` (the two sides' columns)
    as `JoinIndex` takes them: side, key, event time, and each row as a struct on its side's
    column (a band join's bucket range after them); with `late`, each row's event time last,
    for the probe's late test (`intake.status_sql`'s, there compared as a decimal: the same
    answer for every event time a row that is not malformed has)."""
    q = qp.query
    streams = (ctx.plan.stream(q.left.stream), ctx.plan.stream(q.right.stream))
    none = [f"CAST(NULL AS {_struct(sp)})" for sp in streams]
    parts = []
    for i, (alias, rel, time) in enumerate(
        ((q.left.alias, left, qp.left_time), (q.right.alias, right, qp.right_time))
    ):
        key, ranged = key_sql(ctx, qp, i)
        ts = f"unix_micros({alias}.`{time}`)" if time is not None else "CAST(NULL AS BIGINT)"
        row = f"struct({alias}.*)"
        sides = (row, none[1]) if i == 0 else (none[0], row)
        event = streams[i].stream.event_time
        evt = f"unix_micros({alias}.`{event}`)" if event else "CAST(NULL AS BIGINT)"
        parts.append(
            f"SELECT {i} AS _sj_side, {key} AS _sj_key, {ts} AS _sj_ts, "
            f"{sides[0]} AS _sj_l, {sides[1]} AS _sj_r"
            + ranged
            + (f", {evt} AS _sj_evt" if late else "")
            + f" FROM {rel} AS {alias}"
        )
    return parts


def banded(qp: QueryPlan) -> bool:
    """Whether `qp` is a band join without an equality key: its index holds each row by its
    value's bucket, and a row probes the buckets its band reaches (`joins.bucket_range`)."""
    return qp.band is not None and not qp.parts.equi


def key_sql(ctx: BatchContext, qp: QueryPlan, side: int) -> tuple[str, str]:
    """The SQL of a row of `side`'s key in the index (a hash of its equality keys, NULL where
    one is NULL; a band join's: its value's bucket), and the columns that follow its other
    columns (a band join's bucket range, ``_sj_lo`` and ``_sj_hi``; none)."""
    if banded(qp):
        assert qp.band is not None
        sides: tuple[Side, Side] = ("left", "right") if side == 0 else ("right", "left")
        lo, hi, _ = bucket_range(qp.band, sides[0])
        key = bucket_range(qp.band, sides[1])[2]  # (the bucket the other side's probes reach)
        # (A NULL value meets nothing: kept nowhere, as a NULL key. The bucket of NULL is the
        # lowest one, greatest() passing over NULL.)
        value = qp.band.left_sql if side == 0 else qp.band.right_sql
        key = f"CASE WHEN ({value}) IS NULL THEN NULL ELSE {key} END"
        return key, f", CAST({lo} AS BIGINT) AS _sj_lo, CAST({hi} AS BIGINT) AS _sj_hi"
    router = ctx.routers[qp.query.name]
    if router.key_types is None:
        router.key_types = key_types(ctx.spark, router)
    keys = [k.left_sql if side == 0 else k.right_sql for k in qp.parts.equi]
    cast = [f"CAST({k} AS {ty})" for k, ty in zip(keys, router.key_types, strict=True)]
    null = " OR ".join(f"({c}) IS NULL" for c in cast)
    return f"CASE WHEN {null} THEN NULL ELSE xxhash64({', '.join(cast)}) END", ""


def output_sql(qp: QueryPlan, pairs: str) -> str:
    """SQL of `qp`'s rows from the candidate pairs in relation `pairs` (its predicate, then its
    SELECT)."""
    q = qp.query
    a, b = q.left.alias, q.right.alias
    select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
    return (
        f"SELECT {select} FROM (SELECT _sj_l AS {a}, _sj_r AS {b} FROM {pairs}) "
        f"WHERE {qp.spark_predicate}"
    )


def _struct(sp: StreamPlan) -> str:
    """The DDL of a struct of `sp`'s columns."""
    return "STRUCT<" + ", ".join(f"`{c.name}`: {c.type.ddl}" for c in sp.stream.columns) + ">"


def least_times(ctx: BatchContext, qp: QueryPlan) -> tuple[int | None, int | None]:
    """The least event time a left and a right state row needs to meet the batch's rows
    (which are at or past the watermark W): ``W - hi`` and ``W + lo`` for a window of
    ``right - left`` in [lo, hi]; None where nothing bounds it."""
    window = qp.parts.window
    wm = ctx.watermark
    if window is None or wm is None or qp.left_time is None or qp.right_time is None:
        return None, None
    lo = None if window.hi_us is None else wm - window.hi_us
    hi = None if window.lo_us is None else wm + window.lo_us
    return lo, hi


def serves_every_join(plan: JobPlan) -> bool:
    """Whether the indexes can serve every join of `plan` (two-way inner equi or band joins
    only, no query that reads the stored rows otherwise), so that no state needs caching
    beside them."""
    plain = not (plan.multiway or plan.outers or plan.buffers or plan.group_queries)
    return plain and all(
        (qp.parts.equi or banded(qp))
        and qp.query.outer is None
        and qp.query.option("partitioning") is None
        for qp in plan.joins
    )
