"""The multi-way queries' probe orders, batch by batch — pure.

`Reorderer` holds CLASH's plan for every multi-way query of a job: the probe orders in force at
each batch, and the measured selectivities. At each epoch's end it
re-plans with the ILP on the epoch's rates (`ReorderController`: the new orders take effect two
epochs later); the runtime only runs the plans it hands out (`runtime.multiway`).
"""

from __future__ import annotations

import typing as t

from streamjoin.adapt.reorder import ReorderController
from streamjoin.plan.clash import measured_selectivities, pair_measures, plan_clash
from streamjoin.plan.multiway import pair_parts, plan_multiway
from streamjoin.plan.probeorder import flat

if t.TYPE_CHECKING:
    from collections.abc import Mapping

    from streamjoin.adapt.reorder import Orders
    from streamjoin.plan import JobPlan, MultiwayPlan
    from streamjoin.plan.probeorder import Target

DEFAULT_EPOCH = 10
"""Batches per statistics epoch of the multi-way re-planning (query option ``epoch``)."""


class Reorderer:
    """The multi-way queries' plans batch by batch: probe orders re-planned by CLASH's ILP on
    each epoch's measured rates, in force two epochs later (`adapt.reorder`)."""

    def __init__(self, plan: JobPlan, parallelism: int) -> None:
        self.plan = plan
        self.parallelism = parallelism
        self.queries = [mp.query for mp in plan.multiway]
        self.pairs = {q.name: pair_parts(plan.job, q) for q in self.queries}
        self.measures = pair_measures(self.queries, self.pairs)
        self.selectivities: dict[str, float] = {}
        """Measured at the last epoch's end, by `plan.clash.selectivity_key`."""
        self.adaptive = any(q.option("adapt", "true") == "true" for q in self.queries)
        self.greedy = False
        """Greedy probe orders, no ILP (Spark conf ``streamjoin.multiway.optimizer=greedy``,
        the benchmark's "simple sharing" baseline)."""
        self.length = min(
            (int(q.option("epoch") or DEFAULT_EPOCH) for q in self.queries), default=1
        )
        initial = plan.clash.orders if plan.clash is not None else {}
        self.controller = ReorderController(self.length, initial)
        self._built: dict[str, tuple[dict[int, tuple[Target, ...]], MultiwayPlan]] = {
            mp.query.name: (initial.get(mp.query.name, {}), mp) for mp in plan.multiway
        }

    def configure(self, *, greedy: bool) -> None:
        """Greedy orders instead of the ILP's, or not (the run's settings)."""
        self.greedy = greedy

    def restore(self, saved: Mapping[str, t.Any] | None) -> None:
        """Continue from the controller state a manifest saved (None: from the job's plan).

        The job may have been edited since the state was saved (`runtime.restart`): saved
        orders carry over to the queries of the same signature (under their names now), the
        other queries (new or changed) take the job plan's, and the epoch length is the
        job's. (A manifest from before signatures were saved carries orders over by name.)"""
        planned = self.plan.clash.orders if self.plan.clash is not None else {}
        self.selectivities = dict((saved or {}).get("selectivities", {}))
        if not saved:
            self.controller = ReorderController(self.length, planned)
            return
        restored = ReorderController.from_dict(saved)
        signatures: Mapping[str, str] | None = saved.get("signatures")
        queries = {q.name: q for q in self.queries}
        named: dict[str, list[str]] = {}
        for q in self.queries:
            named.setdefault(q.signature if signatures is not None else q.name, []).append(q.name)

        def carried(orders: Orders) -> Orders:
            out = {name: planned[name] for name in queries if name in planned}
            for old, by_start in orders.items():
                key = signatures.get(old, "") if signatures is not None else old
                for name in named.get(key, []):
                    k = len(queries[name].sides)
                    if all(sorted((s, *flat(o))) == list(range(k)) for s, o in by_start.items()):
                        out[name] = by_start
            return out

        self.controller = ReorderController(
            self.length,
            carried(restored.initial),
            restored.rows,
            [(first, carried(orders)) for first, orders in restored.epochs],
        )

    def plans(self, batch: int) -> list[MultiwayPlan]:
        """Each multi-way query's plan under the orders in force for `batch`."""
        orders = {} if self.greedy else self.controller.orders_at(batch)
        out = []
        for q in self.queries:
            wanted = orders.get(q.name, {})
            built, mp = self._built[q.name]
            if wanted != built:
                mp = plan_multiway(self.plan.job, q, wanted or None)
                self._built[q.name] = (wanted, mp)
            out.append(mp)
        return out

    def measuring(self, batch: int) -> bool:
        """True when `batch` ends an epoch whose statistics the optimizer will read: the batch
        then measures the pairs' selectivities (`runtime.multiway.selectivity`)."""
        return (
            self.adaptive
            and not self.greedy
            and bool(self.measures)
            and (batch + 1) % self.length == 0
        )

    def expected_rows(self, batch: int) -> dict[str, float]:
        """Rows per batch per stream so far in `batch`'s epoch (empty at its first batch)."""
        seen = batch % self.length
        return {s: n / seen for s, n in self.controller.rows.items()} if seen else {}

    def after_batch(
        self,
        batch: int,
        rows: Mapping[str, int],
        counts: Mapping[int, tuple[float | None, float]] | None = None,
    ) -> dict[str, str]:
        """Count the batch's rows and take its measured pair counts (`measuring`); at an
        epoch's end re-plan. A note per query when its orders change (for the progress line)."""
        queries = {q.name: q for q in self.queries}
        for index, (equal, total) in (counts or {}).items():
            m = self.measures[index]
            inputs = [side.stream for side in queries[m.query].sides]
            pair = (rows.get(inputs[m.left], 0), rows.get(inputs[m.right], 0))
            self.selectivities.update(measured_selectivities(m, equal, total, pair))
        note = ""
        if self.adaptive and not self.greedy:
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
        """What the next batch needs (saved in the manifest), with each query's signature."""
        signatures = {q.name: q.signature for q in self.queries}
        return self.controller.to_dict() | {
            "signatures": signatures,
            "selectivities": dict(self.selectivities),
        }

    def _optimize(self, rates: dict[str, float]) -> Orders:
        clash = plan_clash(
            self.plan.job,
            self.queries,
            self.pairs,
            rates=rates,
            selectivities=self.selectivities,
            parallelism=self.parallelism,
        )
        return clash.orders if clash is not None else {}
