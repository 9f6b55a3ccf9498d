"""Outer joins in a batch (`plan.outer`): the preserved rows that the batch's watermark decides
are joined once more against the other side's rows their window covers, and those without a
partner are emitted with the other side's columns NULL. The pairs come from the join itself."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.batch.joins import BUCKET, bucket_range

if t.TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.plan import Band, JobPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.indexreads import ProbeReads
    from streamjoin.runtime.state.manifest import Manifest
    from streamjoin.runtime.state.stores import StoreViews


def add_unmatched(
    ctx: BatchContext,
    frames: dict[str, list[DataFrame]],
    reads: ProbeReads,
    stores: StoreViews,
    deltas: Mapping[str, str],
    watermark: int | None,
) -> None:
    """Add to `frames` (by query) each outer join's rows without a partner that `watermark`,
    the one the batch leaves, decides: the join operator's (`reads`), once the probe that
    marks the rows it matches has run (its frames are computed first, and kept), else the
    slices' (`unmatched_frames`)."""
    decided = reads.decides()
    for name in reads.deciding_after:
        frames[name] = [ctx.scratch.persist(f) for f in frames[name]]
        for f in frames[name]:
            f.count()
    for name, frame in reads.unmatched(ctx, watermark).items():
        frames.setdefault(name, []).append(frame)
    args = (ctx.spark, ctx.plan, ctx.prev, stores, deltas, ctx.scratch.views)
    for name, frame in unmatched_frames(*args, watermark, skip=decided).items():
        frames.setdefault(name, []).append(frame)


def unmatched_frames(
    spark: SparkSession,
    plan: JobPlan,
    prev: Manifest,
    stores: StoreViews,
    deltas: Mapping[str, str],
    views: list[str],
    watermark: int | None,
    *,
    skip: t.Container[str] = (),
) -> dict[str, DataFrame]:
    """Per outer join, its rows without a partner that the batch decides: those of a preserved
    side with event times from the previous batch's horizon to the one `watermark` sets.
    `deltas`: the batch's rows of each stream; `views`: where the batch's temp views are
    listed; `skip`: the queries whose rows the join operator decides (`batch.indexouter`)."""
    out: dict[str, DataFrame] = {}
    for op in plan.outers:
        q = op.query
        if q.name in skip:
            continue
        parts = []
        for i in (0, 1):
            if not op.outer.preserves(i):
                continue
            lo = op.dead_below(i, prev.global_wm)
            hi = op.dead_below(i, watermark)
            if hi is None or (lo is not None and hi <= lo):
                continue
            mine, other = q.sides[i], q.sides[1 - i]
            sp, so = plan.stream(mine.stream), plan.stream(other.stream)
            rows = stores.state(spark, sp, prev, lo, deltas[sp.name], views)
            reach = None if lo is None else lo - op.lag(1 - i)
            partners = stores.state(spark, so, prev, reach, deltas[so.name], views)
            ts = f"unix_micros(`{sp.stream.event_time}`)"
            bounds = [f"{ts} < {hi}"] + ([f"{ts} >= {lo}"] if lo is not None else [])
            decided = f"(SELECT * FROM {rows} WHERE {' AND '.join(bounds)})"
            m, o = mine.alias, other.alias
            select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
            band = op.band
            if band is None:  # (equality keys: Spark's anti-join hashes on them by itself)
                alone = (
                    f"SELECT {m}.* FROM {decided} AS {m} LEFT ANTI JOIN {partners} AS {o} "
                    f"ON ({op.outer.on})"
                )
            else:
                cols = [f"`{c.name}`" for c in sp.stream.columns]
                alone = _unmatched_by_bucket(band, i, (m, o), decided, partners, op.outer.on, cols)
            sql = (
                f"SELECT {select} FROM ({alone}) AS {m} "
                f"LEFT JOIN (SELECT * FROM {partners} WHERE false) AS {o} ON false"
            )
            if op.outer.where is not None:
                sql += f" WHERE {op.outer.where}"
            parts.append(spark.sql(sql))
        if parts:
            frame = parts[0]
            for p in parts[1:]:
                frame = frame.unionAll(p)
            out[q.name] = frame
    return out


def _unmatched_by_bucket(
    band: Band,
    index: int,
    aliases: tuple[str, str],
    decided: str,
    partners: str,
    on: str,
    columns: list[str],
) -> str:
    """The `decided` rows (of input `index`) that no partner matches, the band's buckets
    joining them: a decided row is spread over the buckets its band reaches, the rows that
    meet a partner there are found by a hash join, and the rest is what an anti-join on
    every column (NULLs equal) leaves. Identical rows match alike, so this is exact."""
    m, o = aliases
    low, high, key = bucket_range(band, "left" if index == 0 else "right")
    spread = (
        f"SELECT {m}.*, explode(sequence(CAST({low} AS BIGINT), CAST({high} AS BIGINT))) "
        f"AS {BUCKET} FROM {decided} AS {m}"
    )
    picked = ", ".join(f"{m}.{c}" for c in columns)
    matched = (
        f"SELECT DISTINCT {picked} FROM ({spread}) AS {m} JOIN {partners} AS {o} "
        f"ON {m}.{BUCKET} = {key} AND ({on})"
    )
    same = " AND ".join(f"{m}.{c} <=> _sj_matched.{c}" for c in columns)
    return f"SELECT {m}.* FROM {decided} AS {m} LEFT ANTI JOIN ({matched}) AS _sj_matched ON {same}"
