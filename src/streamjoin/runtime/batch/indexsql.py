"""The SQL of a query's rows as its index (`indexed`, ``JoinIndex.java``) takes them, and of
the query's rows made from the candidate pairs a probe returns."""

from __future__ import annotations

import itertools
import typing as t

from streamjoin.runtime.batch.joins import Side, bucket_range
from streamjoin.runtime.routing.router import key_types, key_types_of

if t.TYPE_CHECKING:
    from streamjoin.plan import Band, JobPlan, QueryPlan, StreamPlan
    from streamjoin.runtime.batch.context import BatchContext


def input_parts(
    ctx: BatchContext, qp: QueryPlan, left: str, right: str, *, late: bool = False
) -> list[str]:
    """The SELECT of each side's rows of relations `left` and `right` (the two sides' columns)
    as `JoinIndex` takes them: side, key, event time, and each row as a struct on its side's
    column (`lookup_sql`'s columns after them: a band's buckets, a scheme's places); with
    `late`, each row's event time last, for the probe's late test (`intake.status_sql`'s,
    there compared as a decimal: the same answer for every event time a row that is not
    malformed has). Each part is a projection of its relation's rows (`BatchInput` takes the
    batch's own so), a placed row's places as arrays (``_sj_ss``, ``_sj_ps``)."""
    q = qp.query
    streams = (ctx.plan.stream(q.left.stream), ctx.plan.stream(q.right.stream))
    none = [f"CAST(NULL AS {_struct(sp)})" for sp in streams]
    parts = []
    sides = ((q.left.alias, left, qp.left_time), (q.right.alias, right, qp.right_time))
    # (An OR of equalities: a copy of each row a table, one table an equality.)
    tables = tuple(range(len(qp.parts.ors))) if ored(qp) else (None,)
    for (i, (alias, rel, time)), tab in itertools.product(enumerate(sides), tables):
        key, extra, places = lookup_sql(ctx, qp, i, tab)
        ts = f"unix_micros({alias}.`{time}`)" if time is not None else "CAST(NULL AS BIGINT)"
        if (bound := qp.expiry[i]) is not None:
            # (The index's time: when the row expires; with no end it meets no row: the least.)
            ts = f"coalesce(unix_micros({bound.column}) + {bound.offset_us}, {_NO_END})"
        row = f"struct({alias}.*)"
        structs = (row, none[1]) if i == 0 else (none[0], row)
        event = streams[i].stream.event_time
        evt = f"unix_micros({alias}.`{event}`)" if event else "CAST(NULL AS BIGINT)"
        if tab is not None:
            extra = [*extra, ("_sj_tab", str(tab))]
        columns = (
            f"{i} AS _sj_side, {key} AS _sj_key, {ts} AS _sj_ts, "
            f"{structs[0]} AS _sj_l, {structs[1]} AS _sj_r"
            + "".join(f", {sql} AS {name}" for name, sql in extra)
        )
        tail = f", {evt} AS _sj_evt" if late else ""
        # A placed row's places (a scheme's, a band's runs, time buckets) as arrays: where it is
        # stored, where it probes; the probe makes its copies (`JoinIndex.byPart`).
        arrays = "" if places is None else f", {places[0]} AS _sj_ss, {places[1]} AS _sj_ps"
        parts.append(f"SELECT {columns}{arrays}{tail} FROM {rel} AS {alias}")
    return parts


_NO_END = "-9223372036854775807 - 1"
"""The least long, in Spark SQL: the index time of a row whose expiry column is NULL."""

NOTHING = -1
"""The key of an outer join's row whose key or band value is NULL (`lookup_sql`)."""


def banded(qp: QueryPlan) -> bool:
    """Whether `qp` is a band join without an equality key: its index holds each row by its
    value's bucket, and a row probes the buckets its band reaches (`joins.bucket_range`)."""
    return qp.band is not None and not qp.parts.equi and not qp.parts.ors


def nested(qp: QueryPlan) -> bool:
    """Whether `qp` has no equality key, OR of equalities or band (a theta join over the full
    history, or a window bounded on one side): its index holds every row under one key, and a
    probe tests each live row of the other side (a nested loop, in the probe's task)."""
    return qp.band is None and not qp.parts.equi and not qp.parts.ors


def spread(ctx: BatchContext, qp: QueryPlan) -> bool:
    """Whether `qp`'s rows are spread over its partitions by their time bucket as well as
    their key: an equi join whose time buckets the skew check turned on (`QueryRouter.band`),
    under the hash path."""
    router = ctx.routers[qp.query.name]
    return (
        router.scheme is None
        and qp.band is None
        and qp.time_band is not None
        and bool(router.params.get("time_bucket"))
        and not ored(qp)
    )


def ored(qp: QueryPlan) -> bool:
    """Whether `qp` joins through an OR of equalities and has no equality key of its own: its
    index has a table for each equality, a row is stored and probes in each, and a pair found
    in one table is kept only where no equality before it holds (`output_sql`)."""
    return bool(qp.parts.ors) and not qp.parts.equi


def index_band(ctx: BatchContext, qp: QueryPlan) -> Band | None:
    """The band whose buckets the index looks rows up by, beside the equality keys: a value
    band, the event-time window of a band join without a key, or the window once the skew
    check has turned an equi join's time buckets on (`QueryRouter.band`); None: keys only."""
    if ored(qp):
        return None
    return qp.band if banded(qp) else ctx.routers[qp.query.name].band


def lookup_sql(
    ctx: BatchContext, qp: QueryPlan, side: int, tab: int | None = None
) -> tuple[str, list[tuple[str, str]], tuple[str, str] | None]:
    """For a row of `side`: the SQL of its key in the index (a hash of its equality keys, or of
    an OR's equality `tab`, or 0 without any; NULL where one, or its band value, is NULL: it
    meets nothing), the columns that follow its row (a band's: its own bucket ``_sj_bk``, the
    range of buckets it probes ``_sj_lo`` to ``_sj_hi``), and the arrays of the places it is
    stored at and probes at: a scheme's, a keyless band's runs (`run_places`) or time buckets'
    (`spread`); None: the partition of its key."""
    router = ctx.routers[qp.query.name]
    null: list[str] = []
    key = "CAST(0 AS BIGINT)"
    equalities, types = qp.parts.equi, router.key_types
    if equalities and types is None:
        router.key_types = types = key_types(ctx.spark, router)
    if tab is not None:
        if router.or_key_types is None:
            router.or_key_types = key_types_of(ctx.spark, router, qp.parts.ors)
        equalities, types = (qp.parts.ors[tab],), (router.or_key_types[tab],)
    if equalities:
        assert types is not None
        keys = [k.left_sql if side == 0 else k.right_sql for k in equalities]
        cast = [f"CAST({k} AS {ty})" for k, ty in zip(keys, types, strict=True)]
        null += [f"({c}) IS NULL" for c in cast]
        key = f"xxhash64({', '.join(cast)})"
    extra: list[tuple[str, str]] = []
    band_runs = None
    band = index_band(ctx, qp)
    if band is not None:
        sides: tuple[Side, Side] = ("left", "right") if side == 0 else ("right", "left")
        lo, hi, _ = bucket_range(band, sides[0])
        own = bucket_range(band, sides[1])[2]  # (the bucket the other side's probes reach)
        # (The bucket of NULL is the lowest one, greatest() passing over NULL: kept nowhere.)
        null.append(f"({band.left_sql if side == 0 else band.right_sql}) IS NULL")
        extra = [
            ("_sj_bk", f"CAST({own} AS BIGINT)"),
            ("_sj_lo", f"CAST({lo} AS BIGINT)"),
            ("_sj_hi", f"CAST({hi} AS BIGINT)"),
        ]
        band_runs = run_places(ctx, qp, lo, hi, own)
    if null and qp.query.outer is not None:
        # (An outer join's row that meets nothing is still kept, for its decision: under a
        # key of its own, probing nothing; a row of another's key meets it, never on ON.)
        isnull = " OR ".join(null)
        key = f"CASE WHEN {isnull} THEN CAST({NOTHING} AS BIGINT) ELSE {key} END"
        extra = [*extra, ("_sj_probe", f"NOT coalesce({isnull}, false)")]
    elif null:
        key = f"CASE WHEN {' OR '.join(null)} THEN NULL ELSE {key} END"
    scheme = router.scheme
    if scheme is None and spread(ctx, qp):
        # Placed by its key and each time bucket, so that a hot key's rows spread over the
        # partitions (inline, the key's SQL again: the input stays one projection).
        at = dict(extra)
        return (
            key,
            extra,
            (
                f"array(xxhash64({key}, {at['_sj_bk']}))",
                f"transform(sequence({at['_sj_lo']}, {at['_sj_hi']}), "
                f"_sj_b -> xxhash64({key}, _sj_b))",
            ),
        )
    if scheme is None:
        return key, extra, band_runs
    name: Side = "left" if side == 0 else "right"
    row = router.row_sql(name)
    arrays = [
        f"sequence(CAST({at.start} AS BIGINT), CAST({at.stop} AS BIGINT), "
        f"CAST({at.step} AS BIGINT))"
        for at in (scheme.store(name, row), scheme.probe(name, row))
    ]
    return key, extra, (arrays[0], arrays[1])


BAND_RUN = 4
"""Buckets a partition of a band join without a key holds in a row (`run_places`): a row's
range of two buckets crosses into a second partition once in `BAND_RUN` rows, and a live state
of a few runs still spreads over every partition. A band cut finer than its span (an event-time
window's, `physical.TIME_BAND_SPLIT`) runs a bucket at a time: its rows arrive in time order,
and a run of several would put a batch's probes in one partition."""


def run_places(
    ctx: BatchContext, qp: QueryPlan, lo: str, hi: str, own: str
) -> tuple[str, str] | None:
    """The places (`lookup_sql`) of a row of a band join without a key, spread over the
    batch's partitions (`runs`): its place is its bucket `own`'s run of `BAND_RUN` buckets (of
    one, a band cut finer than its span; runs go round the partitions); it probes at each run
    its range `lo` to `hi` reaches (each partition at most once): one copy a partition, which
    probes its whole range there and finds each row stored there once (an outer join's copies
    share the row's matched mark: ``SharedMarks``). None: one partition holds every row."""
    parts = runs(ctx, qp)
    if parts is None:
        return None
    run = 1 if qp.band is not None and qp.band.split > 1 else BAND_RUN
    first, last, at = (f"CAST(floor(CAST({b} AS DOUBLE) / {run}) AS BIGINT)" for b in (lo, hi, own))
    # (A place's partition is the place modulo the partitions: past as many runs as there are
    # partitions, as many runs from its own reach each of them once.)
    probe = (
        f"CASE WHEN {last} - {first} + 1 >= {parts} THEN sequence({at}, {at} + {parts - 1}) "
        f"ELSE sequence({first}, {last}) END"
    )
    return f"array({at})", probe


def runs(ctx: BatchContext, qp: QueryPlan) -> int | None:
    """The partitions a band join without a key spreads its runs of buckets over
    (`run_places`): the batch's shuffle partitions, under no scheme; None where one partition
    holds it (one shuffle partition)."""
    if not banded(qp) or ctx.parallelism < 2:
        return None
    return None if ctx.routers[qp.query.name].scheme is not None else ctx.parallelism


def output_sql(qp: QueryPlan, pairs: str) -> str:
    """SQL of `qp`'s rows from the candidate pairs in relation `pairs` (its predicate, then its
    SELECT); an OR of equalities keeps a pair found in table t only where none of the
    equalities before t holds (there it was found in that one's table)."""
    q = qp.query
    a, b = q.left.alias, q.right.alias
    select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
    where = f"({qp.spark_predicate})"
    tab = ""
    if ored(qp):
        tab = ", _sj_tab"
        earlier = [k.describe() for k in qp.parts.ors]
        firsts = " ".join(
            f"WHEN {t} THEN NOT coalesce({' OR '.join(earlier[:t])}, false)"
            for t in range(1, len(earlier))
        )
        where += f" AND (CASE _sj_tab {firsts} ELSE true END)"
    return (
        f"SELECT {select} FROM (SELECT _sj_l AS {a}, _sj_r AS {b}{tab} FROM {pairs}) WHERE {where}"
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


def index_least(ctx: BatchContext, qp: QueryPlan) -> tuple[int | None, int | None]:
    """The least index time (`input_parts`' ``_sj_ts``) a left and a right row of `qp`'s
    index needs to meet the batch's rows: `least_times`, but W for a side whose rows expire by
    a column (`QueryPlan.expiry`: their index time is ``column + offset``)."""
    lo, hi = least_times(ctx, qp)
    wm, (left, right) = ctx.watermark, qp.expiry
    return (lo if left is None else wm), (hi if right is None else wm)


def serves_every_join(plan: JobPlan, chained: bool) -> bool:
    """Whether the indexes can serve every join of `plan` (two-way joins, inner or outer, and
    multi-way ones where `chained`: on their levels' indexes; no query that reads the stored
    rows otherwise), so that no state needs caching beside them. GROUP BY buffers take the
    joins' pairs and a stream's groups its new rows: neither reads the stored rows."""
    plain = not (plan.multiway and not chained)
    return plain and all(qp.query.option("partitioning") != "range" for qp in plan.joins)
