"""Spark SQL text for one half of the delta rule on the cached state slices (a delta joined with
the other side's state): the two-way joins of a run without the join operator's jar
(``STREAMJOIN_LOCAL=off``).

The user's predicate runs as written (its timestamp arithmetic in microseconds where that is
exact: `QueryPlan.spark_predicate`); candidates come from Spark's own equi-join extraction
(strategy ``hash``), from bucket equality (``band``) or from a broadcast nested loop. The bucket
mapping ``B(v) = floor(double(v) / w)`` is monotone, so every v in ``[x + lo, x + hi]`` has
``B(x + lo) <= B(v) <= B(x + hi)``; the delta row is exploded over that range of buckets and the
state row is keyed by ``B(v)``. A small margin around double-valued bounds absorbs rounding in
the predicate's own arithmetic; event times are integers and need none.
"""

from __future__ import annotations

import typing as t

from streamjoin.runtime.routing.router import PLACE

if t.TYPE_CHECKING:
    from streamjoin.plan import Band, QueryPlan

Side = t.Literal["left", "right"]
BUCKET = "_sj_bk"


def _lit(v: float) -> str:
    return f"CAST({v!r} AS DOUBLE)"


def bucket_range(band: Band, delta: Side) -> tuple[str, str, str]:
    """(low bucket, high bucket) over the delta's columns, and the state side's bucket key."""
    w = band.width
    if delta == "left":
        x, y = band.left_sql, band.right_sql
        lo, hi = band.lo, band.hi
    else:
        # left - right ∈ [-hi, -lo]
        x, y = band.right_sql, band.left_sql
        lo, hi = -band.hi, -band.lo
    if band.temporal:
        lo_v = f"CAST(({x}) + ({int(lo)}) AS DOUBLE)"
        hi_v = f"CAST(({x}) + ({int(hi)}) AS DOUBLE)"
        w_s = f"{float(w)!r}D"
        key = f"floor(CAST(({y}) AS DOUBLE) / {w_s})"
        return f"floor({lo_v} / {w_s})", f"floor({hi_v} / {w_s})", key
    xd = f"CAST(({x}) AS DOUBLE)"
    margin = f"(1e-9D * (abs({xd}) + {abs(lo) + abs(hi) + 1.0!r}D))"
    # An infinite value (or NaN) meets only its own kind; its margin would make NaN of the range.
    finite = f"abs({xd}) < CAST('Infinity' AS DOUBLE)"
    lo_v = f"CASE WHEN {finite} THEN {xd} + {_lit(lo)} - {margin} ELSE {xd} END"
    hi_v = f"CASE WHEN {finite} THEN {xd} + {_lit(hi)} + {margin} ELSE {xd} END"
    w_s = _lit(w)
    key = _clamped(f"CAST(({y}) AS DOUBLE) / {w_s}")
    return _clamped(f"({lo_v}) / {w_s}"), _clamped(f"({hi_v}) / {w_s}"), key


FAR_BUCKET = 2**40
"""Buckets of double values end at ±2^40: past that a margin of 1e-9 of the value spans more
than a thousand buckets, and a value of 1e300 would explode into more rows than exist."""


def _clamped(quotient: str) -> str:
    """The bucket of a value over the band's width (`quotient`): its floor, held within
    ±`FAR_BUCKET` (monotone, so a range still holds every bucket it held). NaN, which Spark
    takes as equal to NaN and greater than any number, meets only NaN: a bucket of its own."""
    far = int(FAR_BUCKET)
    return (
        f"CASE WHEN isnan({quotient}) THEN CAST({far + 1} AS BIGINT) "
        f"ELSE floor(least(greatest({quotient}, -{far}D), {far}D)) END"
    )


def delta_join_sql(
    qp: QueryPlan,
    delta: Side,
    delta_view: str,
    state_view: str,
    *,
    placed: bool = False,
    shuffle: bool = False,
    band: Band | None = None,
) -> str:
    """SELECT … for ``Δdelta ⋈ other`` where `state_view` holds the other side's rows.

    `placed`: both views carry the place column (the delta routed to its probe places, the state
    to its store places; see `routing`), and a pair must meet at a place, which it does exactly
    once. `shuffle`: the join shuffles both sides (by place and keys) rather than broadcasting.
    `band`: the band whose bucket joins the keys (`QueryRouter.band`).
    """
    q = qp.query
    a, b = q.left.alias, q.right.alias
    delta_alias = a if delta == "left" else b
    state_alias = b if delta == "left" else a
    select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
    condition = f"({qp.spark_predicate})"
    if placed:
        condition = f"{delta_alias}.{PLACE} = {state_alias}.{PLACE} AND {condition}"
    # A partitioned join shuffles both sides by place (or key): a broadcast of the delta would
    # leave the state where the files put it and bypass the scheme.
    hint = f"/*+ SHUFFLE_HASH({delta_alias}) */ " if shuffle else ""
    delta_from = f"{delta_view} AS {delta_alias}"
    if band is not None:
        low, high, key = bucket_range(band, delta)
        delta_from = (
            f"(SELECT {delta_alias}.*, explode(sequence(CAST({low} AS BIGINT), "
            f"CAST({high} AS BIGINT))) AS {BUCKET} FROM {delta_view} AS {delta_alias}) "
            f"AS {delta_alias}"
        )
        condition = f"{delta_alias}.{BUCKET} = {key} AND {condition}"
    state_from = f"{state_view} AS {state_alias}"
    left_from, right_from = (
        (delta_from, state_from) if delta == "left" else (state_from, delta_from)
    )
    # Without a scheme, no join hint: Spark broadcasts the smaller side by its size estimate
    # (usually the delta, moving it to the state), and falls back to a shuffle join when both
    # are large.
    return f"SELECT {hint}{select} FROM {left_from} JOIN {right_from} ON {condition}"
