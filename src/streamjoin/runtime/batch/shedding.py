"""Probe shedding for queries with ``WITH (overload = 'shed')`` (`plan.shedding`): the split
of the controller (`adapt.overload`, JAQPOT) applied to the delta rule.

A two-way query has two directions, ``left`` and ``right``; a multi-way query one per input,
named by its alias: the term of the delta rule that input's new rows start
(`runtime.multiway.joins`), where they probe the other inputs' stores.

A direction's allowance a is the fraction of its new rows that probe: a row probes when a hash
of all its columns and the batch's id falls below a, so a replayed batch makes the same
choices. The rows that do not probe are still stored by the state job, so a later partner
finds them. With ``ΔL_p``, ``ΔR_p`` the probing rows, a batch writes ``ΔL_p ⋈ (R_old ∪ ΔR) ∪
L_old ⋈ ΔR_p``: every pair is a true pair, found once. The loss is ``ΔL_s ⋈ (R_old ∪ ΔR) ∪
L_old ⋈ ΔR_s`` for the skipped rows ``ΔL_s``, ``ΔR_s``: per direction, the skipped probes times
the pairs a probe found (an estimate), or with ``shed_count = 'exact'`` counted by a count-only
join of the skipped rows (which costs the probes shedding saves: for audits and tests).

The allowances in force for a batch come from the manifest of the batch before: the budget of
work a batch may do and the pairs a probe of each direction found (the controller's windowed
figures), split over the batch's own arrivals where its files' footers tell them, so a step
in a rate is met in the batch it arrives in; else the split the controller made at its
average rates. Either way a replay of the batch makes the same choices. The controller's
averages live in the processor and start afresh after a restart.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from streamjoin.adapt.overload import BatchStats, DirectionStats, OverloadController
from streamjoin.plan.shedding import freshness, sheds

if t.TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import Observation, SparkSession

    from streamjoin.adapt.overload import Policy
    from streamjoin.model import Query
    from streamjoin.plan import JobPlan
    from streamjoin.runtime.state.manifest import Manifest

SIDES = ("left", "right")
SCALE = 1_000_000
"""The scale of a row's hash that an allowance cuts (the operator's `IndexProbe.SHEDSCALE`)."""


def probing(view: str, allowance: float, batch_id: int, *, skipped: bool = False) -> str:
    """The rows of `view` that probe at `allowance` in batch `batch_id` (all of them at 1), or
    with `skipped` the others."""
    if allowance >= 1.0 and not skipped:
        return view
    cut = int(allowance * SCALE)
    test = ">=" if skipped else "<"
    return f"(SELECT * FROM {view} WHERE pmod(xxhash64(*, {batch_id}), {SCALE}) {test} {cut})"


def count_rows(spark: SparkSession, sql: str) -> int:
    """Rows of `sql`, by a count-only job: the pairs a direction's skipped rows would have
    found, for ``shed_count = 'exact'``."""
    return int(spark.sql(f"SELECT count(*) FROM ({sql})").first()[0])  # type: ignore[index]


def directions(query: Query) -> tuple[str, ...]:
    """The join directions of `query`, in the order of its inputs: ``left`` and ``right``, or
    a multi-way query's aliases (lower case)."""
    return tuple(s.alias.lower() for s in query.sides) if query.multiway else SIDES


def allowances(
    prev: Manifest,
    query: Query,
    arrivals: Mapping[str, int] | None = None,
    routes: Mapping[str, tuple[str, ...]] | None = None,
    residence: Mapping[str, float] | None = None,
) -> dict[str, float] | None:
    """The allowances in force for `query` in the batch after `prev` (None: it does not shed;
    all 1.0 while it has not needed to): split over the batch's `arrivals` (rows per stream,
    where known) within the budget `prev` carries, else as `prev` holds them. `routes` and
    `residence`: a chain's (`controller`)."""
    if not sheds(query):
        return None
    given = prev.overload.get(query.name, {})
    names = directions(query)
    streams = [s.stream for s in query.sides]
    if "budget.batch" in given and arrivals is not None and all(s in arrivals for s in streams):
        rows = {d: float(arrivals[s]) for d, s in zip(names, streams, strict=True)}
        rho = {k.removeprefix("rho."): float(v) for k, v in given.items() if k.startswith("rho.")}
        loop = controller(query, names, routes=routes, residence=residence)
        return loop.split(rows, rho, float(given["budget.batch"]))
    return {d: float(given.get(d, 1.0)) for d in names}


def controller(
    query: Query,
    names: tuple[str, ...],
    budget: float | None = None,
    routes: Mapping[str, tuple[str, ...]] | None = None,
    residence: Mapping[str, float] | None = None,
) -> OverloadController:
    """The overload controller of shedding `query` with directions `names`; a chain's
    `routes` (`plan.chain.routes`) and the seconds a row stays in each of its states
    (`residence`), which its ``freshness`` is met over."""
    policy = t.cast("Policy", query.option("shed_policy", "jaqpot"))
    given = freshness(query)
    return OverloadController(
        names,
        mode="shed",
        budget=budget,
        freshness={} if given is None else dict.fromkeys(names, float(given)),
        policy=policy,
        pairs_cost=True,
        routes=dict(routes or {}),
        residence=dict(residence or {}),
    )


@dataclass
class Shed:
    """One batch of a shedding query: its allowances and the pairs each direction found."""

    query: Query
    allowances: dict[str, float]
    pairs: dict[str, Observation] = field(default_factory=dict)
    """Per direction, the pairs it wrote, observed (the slices' probe)."""
    found: dict[str, int] | None = None
    """Per direction, the pairs it wrote, counted by the operator's probe (and a chain's per
    combination that probed a level above the first)."""
    routes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """A chain's: per input, the combinations its pairs go on to probe as (`plan.chain`)."""
    fed: dict[str, int] = field(default_factory=dict)
    """A chain's: per combination above the first level, how many probed."""
    residence: dict[str, float] = field(default_factory=dict)
    """A chain's: the seconds a row stays in each input's and combination's state."""
    missed: dict[str, int] | None = None
    """Per direction, the pairs its skipped probes would have found, where counted."""

    def written(self, side: str) -> int:
        """The pairs direction `side` wrote."""
        from streamjoin.runtime.threads import metrics

        if self.found is not None:
            return self.found[side]
        return int(metrics(self.pairs[side]).get("rows", 0)) if side in self.pairs else 0


@dataclass
class Shedding:
    """The controllers of a job's shedding queries, kept across batches."""

    trigger_seconds: float = 1.0
    controllers: dict[str, OverloadController] = field(default_factory=dict)

    def after_batch(
        self,
        plan: JobPlan,
        batch_id: int,
        seconds: float,
        sheds: Mapping[str, Shed],
        arrived: Mapping[str, int],
        prev: Manifest,
    ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, int]]]:
        """Feed each shedding query's batch to its controller: the allowances for the next
        batch with the run's totals (by query), and per query and direction the probes it
        skipped (``left``, ``right``, or a multi-way query's aliases) and the pairs they would
        have found (``left.pairs``, …: counted, or estimated from the pairs a probe found)."""
        decided: dict[str, dict[str, float]] = {}
        skipped: dict[str, dict[str, int]] = {}
        for q in (*(qp.query for qp in plan.queries), *(mp.query for mp in plan.multiway)):
            shed = sheds.get(q.name)
            if shed is None:
                continue
            stats = {}
            names = directions(q)
            for side, js in zip(names, q.sides, strict=True):
                rows = int(arrived.get(js.stream, 0))
                probed = round(rows * shed.allowances[side])
                stats[side] = DirectionStats(rows, probed, shed.written(side))
            for hop, fed in shed.fed.items():  # (a chain's combinations: all of them probe)
                stats[hop] = DirectionStats(fed, fed, (shed.found or {}).get(hop, 0))
            loop = self.controllers.get(q.name)
            if loop is None or loop.routes != shed.routes:
                budget = _per_second(q.option("budget"), self)
                loop = controller(q, names, budget, shed.routes, shed.residence)
                self.controllers[q.name] = loop
            loop.observe(BatchStats(batch_id, seconds, self.trigger_seconds, stats))
            # (This batch's pairs a probe, or the run's where none probed.)
            rho = {
                d: st.pairs / st.probed if st.probed else loop.productivity(d)
                for d, st in stats.items()
            }
            mine = skipped.setdefault(q.name, {})
            for side in names:
                st = stats[side]
                mine[side] = st.arrived - st.probed
                if shed.missed is not None:
                    mine[f"{side}.pairs"] = shed.missed[side]
                else:
                    mine[f"{side}.pairs"] = round(mine[side] * loop.outputs_per_probe(side, rho))
            current = loop.decision
            before = prev.overload.get(q.name, {})
            decided[q.name] = {
                side: current.allowances[side] if current else before.get(side, 1.0)
                for side in names
            }
            # (What the next batch's arrivals are split by: the controller's figures, or,
            # while it has none, those the batch before left.)
            latest = loop.latest()
            if latest is not None:
                decided[q.name]["budget.batch"] = latest[0] * self.trigger_seconds
                decided[q.name] |= {f"rho.{way}": rho for way, rho in latest[1].items()}
            else:
                split = ("budget.batch", "rho.")
                decided[q.name] |= {k: v for k, v in before.items() if k.startswith(split)}
            for side in names:  # (the run's totals, kept with the allowances)
                for key, now in ((f"shed.{side}", side), (f"missed.{side}", f"{side}.pairs")):
                    decided[q.name][key] = before.get(key, 0.0) + mine[now]
            decided[q.name]["counted"] = 1.0 if shed.missed is not None else 0.0
            if current is not None and loop.freshness:  # (whether the split meets it)
                decided[q.name]["fresh"] = 1.0 if current.feasible else 0.0
        return decided, skipped


def _per_second(budget: str | None, shedding: Shedding) -> float | None:
    """A budget of work per batch (probes and pairs) as work per second of the trigger."""
    return None if budget is None else float(budget) / shedding.trigger_seconds
