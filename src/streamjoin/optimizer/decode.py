"""Turn chosen candidates into a global plan: stores, probe orders, shared steps, MIRs (§V-B).

The chosen ``x`` columns are the plan; the step and partitioning columns are read off them
(the paper: "the step variables ... we can ignore them"). Decoding:

- keeps the maintenance orders of the MIR stores that a chosen probe order needs, directly or
  through another MIR's maintenance, and drops any other (a solver stopped by its time limit may
  leave an unneeded one on; it only adds cost);
- gives every store the partitioning its probes use; a base store that no chosen order probes
  takes its first candidate key (its partitioning costs nothing either way, and a fixed rule
  makes plans reproducible);
- lists the steps that more than one probe order runs: each runs once and fans out.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from streamjoin.optimizer.cost import carries_key, shared_load, step_cost
from streamjoin.optimizer.problem import OptimizerError
from streamjoin.optimizer.stores import ProbeOrder, Step, Store, StoreLabel, canonical

if t.TYPE_CHECKING:
    from streamjoin.optimizer.candidates import Candidates
    from streamjoin.optimizer.problem import Problem
    from streamjoin.optimizer.solve import Selection, SolveReport
    from streamjoin.optimizer.stores import Column


@dataclass(frozen=True)
class PlannedStep:
    """One hop of a probe order.

    Attributes:
        label: the store probed, with the attribute it is partitioned on.
        unicast: True when the tuple carries that attribute and goes to one unit; False when it
            is broadcast to every unit of the store.
        cost: tuples sent per time unit by this hop (StepCost).
    """

    label: StoreLabel
    unicast: bool
    cost: float

    def __str__(self) -> str:
        return f"{self.label}{'' if self.unicast else ' (broadcast)'}"


@dataclass(frozen=True)
class PlannedOrder:
    """The probe order installed for one (query, start) or one (MIR, start).

    Attributes:
        owner: the query's name, or the maintained MIR store's name.
        start: the relation whose new tuples follow this order.
        order: the probe order itself.
        steps: its hops, in order.
        cost: its probe load alone (PCost), before sharing.
        maintains: the MIR store it keeps up to date; None for a query's order.
    """

    owner: str
    start: str
    order: ProbeOrder
    steps: tuple[PlannedStep, ...]
    cost: float
    maintains: Store | None = None

    @property
    def name(self) -> str:
        """``owner/start``."""
        return f"{self.owner}/{self.start}"


@dataclass(frozen=True)
class SharedStep:
    """A step (probe-order prefix) that several probe orders run: computed once, fanned out.

    Attributes:
        step: the prefix.
        cost: its load, paid once.
        users: the ``owner/start`` names of the orders that contain it.
    """

    step: Step
    cost: float
    users: tuple[str, ...]


@dataclass(frozen=True)
class GlobalPlan:
    """The optimizer's answer for all queries at once.

    Attributes:
        stores: every store and its partitioning: the base stores (all relations, in problem
            order), then the MIR stores to maintain.
        orders: one probe order per (query, start), in problem order.
        maintenance: the probe orders keeping the MIR stores up to date.
        shared: steps that more than one order runs.
        load: total probe load, each distinct step once (the ILP objective of this plan).
        unshared_load: the sum of every order's own cost, as if nothing were shared.
        report: how the ILP was solved; None for a plan that did not come from the solver.
    """

    stores: tuple[StoreLabel, ...]
    orders: tuple[PlannedOrder, ...]
    maintenance: tuple[PlannedOrder, ...]
    shared: tuple[SharedStep, ...]
    load: float
    unshared_load: float
    report: SolveReport | None = None

    @property
    def mirs(self) -> tuple[Store, ...]:
        """The MIR stores to maintain."""
        return tuple(label.store for label in self.stores if not label.store.is_base)

    def partitioning(self) -> dict[str, str]:
        """Store name → its partitioning attribute (``*`` for round-robin)."""
        out = {}
        for label in self.stores:
            key = label.key
            if key is None:
                out[label.store.name] = "*"
            else:
                out[label.store.name] = key.name if label.store.is_base else str(key)
        return out

    def order_for(self, query: str, start: str) -> PlannedOrder:
        """The probe order of `query` for new tuples of `start`."""
        for order in self.orders:
            if order.owner == query and order.start == start:
                return order
        msg = f"the plan has no probe order for query {query!r} from {start!r}"
        raise OptimizerError(msg)

    def describe(self) -> list[str]:
        """The plan as text lines (what ``streamjoin explain`` shows)."""
        saved = 1.0 - self.load / self.unshared_load if self.unshared_load else 0.0
        lines = [
            f"global plan: probe load {self.load:.6g} tuples per time unit "
            f"(unshared {self.unshared_load:.6g}; sharing saves {saved:.1%})"
        ]
        if self.report is not None:
            lines.append(self.report.describe())
        lines.append("stores:")
        for label in self.stores:
            kind = "base" if label.store.is_base else "MIR, maintained"
            on = "round-robin" if label.key is None else f"hash on {label.key}"
            lines.append(f"  {label.store.name}: {on} ({kind})")
        lines.append("probe orders:")
        lines += [_describe_order(order) for order in self.orders]
        if self.maintenance:
            lines.append("MIR maintenance:")
            lines += [_describe_order(order) for order in self.maintenance]
        if self.shared:
            lines.append("shared steps (run once, fanned out):")
            # A step's text omits its predicates; two steps may differ only in those.
            lines += [
                f"  {s.step} on {'; '.join(str(p) for p in s.step.predicates)} cost "
                f"{s.cost:.6g}: {', '.join(s.users)}"
                for s in self.shared
            ]
        return lines


def _describe_order(order: PlannedOrder) -> str:
    hops = "; ".join(f"{s} {s.cost:.6g}" for s in order.steps)
    return f"  {order.name}: {order.order} cost {order.cost:.6g} [{hops}]"


def _plan_order(problem: Problem, owner: str, order: ProbeOrder, mir: Store | None) -> PlannedOrder:
    steps = tuple(
        PlannedStep(
            step.target,
            carries_key(step.source, step.predicates, step.target),
            step_cost(problem, step),
        )
        for step in order.steps
    )
    return PlannedOrder(owner, order.start, order, steps, sum(s.cost for s in steps), mir)


def decode(
    candidates: Candidates, chosen: Selection, report: SolveReport | None = None
) -> GlobalPlan:
    """The plan made of the candidates in `chosen` (see the module docstring).

    Raises:
        OptimizerError: a (query, start) or a needed MIR maintenance has no order, or two
            orders partition one store differently (the selection is not a valid plan).
    """
    problem = candidates.problem
    sets = candidates.choice_sets
    picked: list[tuple[int, ProbeOrder]] = []
    needed: list[Store] = []
    for i, choice in enumerate(sets):
        if choice.is_query:
            if i not in chosen:
                msg = f"no probe order chosen for {choice.name}"
                raise OptimizerError(msg)
            picked.append((i, choice.orders[chosen[i]]))
    cursor = 0
    while cursor < len(picked):
        for mir in picked[cursor][1].mirs:
            if mir in needed:
                continue
            needed.append(mir)
            for m in candidates.maintenance[mir]:
                if m not in chosen:
                    msg = f"MIR {mir.name} is probed but {sets[m].name} has no probe order"
                    raise OptimizerError(msg)
                picked.append((m, sets[m].orders[chosen[m]]))
        cursor += 1

    keys: dict[Store, Column | None] = {}
    for i, order in picked:
        for label in order.targets:
            if keys.setdefault(label.store, label.key) != label.key:
                msg = (
                    f"store {label.store.name} is partitioned on {keys[label.store]} by one "
                    f"order and on {label.key} by {sets[i].name}"
                )
                raise OptimizerError(msg)
    labels = [
        StoreLabel(store, keys.get(store, options[0]))
        for store, options in candidates.partitionings
        if store.is_base
    ]
    labels += [StoreLabel(mir, keys[mir]) for mir in needed]

    planned = [
        (sets[i], _plan_order(problem, sets[i].owner, o, sets[i].maintains)) for i, o in picked
    ]
    users: dict[Step, list[str]] = {}
    for _, plan_order in planned:
        for step in plan_order.order.steps:
            users.setdefault(step, []).append(plan_order.name)
    shared = tuple(
        SharedStep(step, step_cost(problem, step), tuple(names))
        for step, names in users.items()
        if len(names) > 1
    )
    query_orders = tuple(p for c, p in planned if c.is_query)
    maintenance = tuple(p for c, p in planned if not c.is_query)
    return GlobalPlan(
        stores=tuple(labels),
        orders=query_orders,
        maintenance=maintenance,
        shared=shared,
        load=sum(step_cost(problem, step) for step in users),
        unshared_load=sum(p.cost for _, p in planned),
        report=report,
    )


def recompute_load(problem: Problem, plan: GlobalPlan) -> float:
    """The plan's probe load, rebuilt from its parts and the problem alone.

    Each order is rebuilt from its owner's predicates, its start and its stores, with every
    store partitioned as `plan.stores` says (an order that probes a store under another
    partitioning is an error), and the distinct steps are summed. This checks that a decoded
    plan is self-consistent and costs what the solver said.
    """
    keys = {label.store: label.key for label in plan.stores}
    rebuilt = []
    for order in (*plan.orders, *plan.maintenance):
        if order.maintains is None:
            predicates = canonical(problem.query(order.owner).predicates)
        else:
            predicates = order.maintains.predicates
        targets = []
        for hop in order.steps:
            store = hop.label.store
            if store not in keys:
                msg = f"{order.name} probes {store.name}, which the plan does not keep"
                raise OptimizerError(msg)
            if keys[store] != hop.label.key:
                msg = f"{order.name} probes {hop.label} but the plan partitions it otherwise"
                raise OptimizerError(msg)
            targets.append(StoreLabel(store, keys[store]))
        rebuilt.append(ProbeOrder(order.start, tuple(targets), predicates))
    return shared_load(problem, rebuilt)
