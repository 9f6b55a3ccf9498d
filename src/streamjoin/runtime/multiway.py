"""Spark SQL text for one term of a multi-way join's delta rule (see `plan.multiway`).

Every input's columns are renamed to names unique across the inputs (``_sj<i>_<column>``), so
that each probe step can be written as ``SELECT * FROM (rows so far) JOIN (store) ON ...`` and
nested: Spark keeps the nesting as the join order, which is the probe order. A band step
explodes the rows so far over the buckets their band overlaps and keys the store by its own
bucket, as the two-way band join does (`joins.bucket_range`).
"""

from __future__ import annotations

import typing as t

from streamjoin.plan.multiway import column_name
from streamjoin.runtime.joins import bucket_range

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from streamjoin.model import StreamDef
    from streamjoin.plan import MultiwayPlan, ProbeOrder


def renamed(view: str, position: int, stream: StreamDef) -> str:
    """``SELECT`` of `view`'s columns under input `position`'s unique names."""
    cols = ", ".join(f"`{c.name}` AS `{column_name(position, c.name)}`" for c in stream.columns)
    return f"SELECT {cols} FROM {view}"


def term_sql(
    mp: MultiwayPlan,
    order: ProbeOrder,
    inputs: Mapping[int, str],
    streams: Mapping[int, StreamDef],
) -> str:
    """SELECT … for the term of `order`: ``inputs[order.start]`` holds the delta of the start
    input, ``inputs[i]`` the store input i is probed in (old rows, with or without the new ones,
    as the delta rule says)."""
    start = order.start
    rows = renamed(inputs[start], start, streams[start])
    if order.filters:
        rows = f"SELECT * FROM ({rows}) WHERE " + " AND ".join(f"({f})" for f in order.filters)
    for n, step in enumerate(order.steps):
        store = renamed(inputs[step.input], step.input, streams[step.input])
        conditions = [f"({c})" for c in step.conditions]
        if step.band is not None:
            low, high, key = bucket_range(step.band, "left")
            probe_bucket, store_bucket = f"_sj_pb{n}", f"_sj_sb{n}"
            rows = (
                f"SELECT *, explode(sequence(CAST({low} AS BIGINT), CAST({high} AS BIGINT))) "
                f"AS {probe_bucket} FROM ({rows})"
            )
            store = f"SELECT *, CAST({key} AS BIGINT) AS {store_bucket} FROM ({store})"
            conditions.insert(0, f"{probe_bucket} = {store_bucket}")
        on = " AND ".join(conditions) or "TRUE"
        # The rows so far stem from one batch's delta: they go to the store (broadcast), the
        # store stays where its files are. Without the hint Spark's size estimate of a join
        # output is a product and it would shuffle and sort the whole store instead.
        rows = (
            f"SELECT /*+ BROADCAST(_sj_p{n}) */ * FROM ({rows}) AS _sj_p{n} "
            f"JOIN ({store}) AS _sj_s{n} ON {on}"
        )
    select = ", ".join(f"{sql} AS `{alias}`" for sql, alias in mp.select)
    return f"SELECT {select} FROM ({rows}) AS _sj_rows"


def multiway_terms(
    mp: MultiwayPlan,
    streams: Sequence[StreamDef],
    deltas: Mapping[str, str],
    store: Callable[[int, int | None, bool], str],
    watermark: int | None,
) -> list[str]:
    """The SQL of every term of `mp`'s delta rule for one batch.

    Args:
        mp: the plan.
        streams: each input's stream, in written order.
        deltas: stream name -> view of the batch's new rows.
        store: ``store(i, lo, with_new)`` -> a view of input i's stored rows with event time
            >= lo (None: all), plus its new rows when `with_new`.
        watermark: W, the global watermark the batch started with.
    """
    views: dict[tuple[int, bool], str] = {}

    def view(i: int, with_new: bool) -> str:
        if (i, with_new) not in views:
            # A stored row of input i older than W - retain cannot meet any new row.
            keep = mp.retain_us[i]
            lo = watermark - keep if watermark is not None and keep is not None else None
            views[i, with_new] = store(i, lo, with_new)
        return views[i, with_new]

    by_position = dict(enumerate(streams))
    terms = []
    for order in mp.orders:
        j = order.start
        inputs = {j: deltas[streams[j].name]}
        for step in order.steps:
            # Inputs written after the start are probed with their new rows, earlier ones not.
            inputs[step.input] = view(step.input, step.input > j)
        terms.append(term_sql(mp, order, inputs, by_position))
    return terms
