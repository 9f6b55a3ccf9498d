"""Outer joins in a batch (`plan.outer`): the preserved rows that the batch's watermark decides
are joined once more against the other side's rows their window covers, and those without a
partner are emitted with the other side's columns NULL. The pairs come from the join itself."""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.plan import JobPlan
    from streamjoin.runtime.state.manifest import Manifest
    from streamjoin.runtime.state.stores import StoreViews


def unmatched_frames(
    spark: SparkSession,
    plan: JobPlan,
    prev: Manifest,
    stores: StoreViews,
    deltas: Mapping[str, str] | None,
    views: list[str],
    watermark: int | None,
    *,
    final: bool = False,
) -> dict[str, DataFrame]:
    """Per outer join, its rows without a partner that the batch decides: those of a preserved
    side with event times from the previous batch's horizon to the one `watermark` sets (with
    `final`, every one still undecided). `deltas`: the batch's rows of each stream (None: a
    batch without input); `views`: where the batch's temp views are listed."""
    out: dict[str, DataFrame] = {}
    for op in plan.outers:
        q = op.query
        parts = []
        for i in (0, 1):
            if not op.outer.preserves(i):
                continue
            lo = op.dead_below(i, prev.global_wm)
            hi = None if final else op.dead_below(i, watermark)
            if not final and (hi is None or (lo is not None and hi <= lo)):
                continue
            mine, other = q.sides[i], q.sides[1 - i]
            sp, so = plan.stream(mine.stream), plan.stream(other.stream)
            rows = stores.state(spark, sp, prev, lo, _delta(deltas, sp.name), views)
            reach = None if lo is None else lo - op.lag(1 - i)
            partners = stores.state(spark, so, prev, reach, _delta(deltas, so.name), views)
            ts = f"unix_micros(`{sp.stream.event_time}`)"
            bounds = [f"{ts} >= {lo}"] if lo is not None else []
            bounds += [f"{ts} < {hi}"] if hi is not None else []
            decided = f"(SELECT * FROM {rows} WHERE {' AND '.join(bounds) or 'true'})"
            m, o = mine.alias, other.alias
            select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
            sql = (
                f"SELECT {select} FROM (SELECT {m}.* FROM {decided} AS {m} LEFT ANTI JOIN "
                f"{partners} AS {o} ON ({op.outer.on})) AS {m} "
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


def _delta(deltas: Mapping[str, str] | None, stream: str) -> str | None:
    return None if deltas is None else deltas[stream]
