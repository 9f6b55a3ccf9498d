"""Spark SQL text for one term of a multi-way join's delta rule (see `plan.multiway`).

Every input's columns are renamed to names unique across the inputs (``_sj<i>_<column>``), so
that each probe step can be written as ``SELECT * FROM (rows so far) JOIN (store) ON ...`` and
nested: Spark keeps the nesting as the join order, which is the probe order. A band step
explodes the rows so far over the buckets their band overlaps and keys the store by its own
bucket, as the two-way band join does (`joins.bucket_range`).
"""

from __future__ import annotations

import typing as t

from streamjoin.adapt.reorder import ReorderController
from streamjoin.plan.clash import plan_clash
from streamjoin.plan.multiway import column_name, pair_parts, plan_multiway
from streamjoin.runtime.joins import bucket_range

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from streamjoin.adapt.reorder import Orders
    from streamjoin.model import StreamDef
    from streamjoin.plan import JobPlan, MultiwayPlan, ProbeOrder

DEFAULT_EPOCH = 10
"""Batches per statistics epoch of the multi-way re-planning (query option ``epoch``)."""


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


class Reorderer:
    """The multi-way queries' plans batch by batch: probe orders re-planned by CLASH's ILP on
    each epoch's measured rates, in force two epochs later (`adapt.reorder`)."""

    def __init__(self, plan: JobPlan, parallelism: int) -> None:
        self.plan = plan
        self.parallelism = parallelism
        self.queries = [mp.query for mp in plan.multiway]
        self.pairs = {q.name: pair_parts(plan.job, q) for q in self.queries}
        self.adaptive = any(q.option("adapt", "true") == "true" for q in self.queries)
        length = min((int(q.option("epoch") or DEFAULT_EPOCH) for q in self.queries), default=1)
        initial = plan.clash.orders if plan.clash is not None else {}
        self.controller = ReorderController(length, initial)
        self._built: dict[str, tuple[dict[int, tuple[int, ...]], MultiwayPlan]] = {
            mp.query.name: (initial.get(mp.query.name, {}), mp) for mp in plan.multiway
        }

    def restore(self, saved: Mapping[str, t.Any] | None) -> None:
        """Continue from the controller state a manifest saved (None: from the job's plan)."""
        if saved:
            self.controller = ReorderController.from_dict(saved)
        else:
            initial = self.plan.clash.orders if self.plan.clash is not None else {}
            self.controller = ReorderController(self.controller.length, initial)

    def plans(self, batch: int) -> list[MultiwayPlan]:
        """Each multi-way query's plan under the orders in force for `batch`."""
        orders = self.controller.orders_at(batch)
        out = []
        for q in self.queries:
            wanted = orders.get(q.name, {})
            built, mp = self._built[q.name]
            if wanted != built:
                mp = plan_multiway(self.plan.job, q, wanted or None)
                self._built[q.name] = (wanted, mp)
            out.append(mp)
        return out

    def after_batch(self, batch: int, rows: Mapping[str, int]) -> dict[str, str]:
        """Count the batch's rows; at an epoch's end re-plan. A note per query when its orders
        change (for the progress line)."""
        note = ""
        if self.adaptive:
            note = self.controller.after_batch(batch, rows, self._optimize)
        self.controller.prune(batch)
        if not note:
            return {}
        first = self.controller.epochs[-1][0]
        return {
            mp.query.name: "probe orders -> "
            + "; ".join(o.describe(mp.aliases) for o in mp.orders)
            + f" ({note})"
            for mp in self.plans(first)
        }

    def state(self) -> dict[str, t.Any]:
        """What the next batch needs (saved in the manifest)."""
        return self.controller.to_dict()

    def _optimize(self, rates: dict[str, float]) -> Orders:
        clash = plan_clash(
            self.plan.job, self.queries, self.pairs, rates=rates, parallelism=self.parallelism
        )
        return clash.orders if clash is not None else {}
