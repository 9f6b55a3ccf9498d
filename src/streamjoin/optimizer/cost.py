"""CLASH's cost model: probe load, the number of tuples sent between stores per time unit.

Eq. 1 of the paper, for a probe order σ of start relation S1 (j counts the relations already
joined when step j is sent)::

    StepCost(j) = |⋈ of the prefix's relations| · (1/j) · χ(target of step j)
    PCost(σ)    = Σ_j StepCost(j)

- ``|⋈ P|`` is the rate of the join of the relations in P: the product of their rates and of the
  selectivities of the predicates among them (independence, as in the paper's code).
- ``1/j``: a new tuple probes only tuples that arrived before it, so of the j-way partial results
  only those where the start tuple is the latest are sent on, a fraction 1/j (stationary
  arrivals, equal windows). The printed formula has ``⋈_{k=1}^{j-1}``; the paper's own numbers
  (first step = the rate, 100; second = |S⋈R|/2 = 50) need ``j``, which is what we use.
- ``χ`` is 1 when the tuple sent carries the value of the target store's partitioning attribute
  through an equality predicate (it goes to one unit), and the parallelism otherwise (it is
  broadcast to every unit of the store).

With an MIR store in the prefix, j counts relations, not stores: after probing S⋈T, an R tuple
has joined three relations and only 1/3 of R⋈S⋈T has R latest.

Not counted (as in the paper): sending a tuple to its own store, sending a finished result to the
output, and inserting an MIR's maintenance results into the MIR store. An MIR store's
maintenance cost is the probe load of the probe orders that keep it up to date (one per input
relation of the MIR), counted like any other probe order and shared the same way.

Worked example (the paper's §V-2): rates 100, |S⋈T| = 150, other joins 100, parallelism 1.
``⟨S, R, T⟩`` costs 100 + 100/2 = 150 and ``⟨S, T, R⟩`` 100 + 150/2 = 175.
"""

from __future__ import annotations

import math
import typing as t

from streamjoin.optimizer.stores import Step, StoreLabel

if t.TYPE_CHECKING:
    from collections.abc import Iterable

    from streamjoin.optimizer.problem import JoinPredicate, Problem
    from streamjoin.optimizer.stores import ProbeOrder


def join_rate(
    problem: Problem, relations: Iterable[str], predicates: Iterable[JoinPredicate]
) -> float:
    """``|⋈ relations|``: product of the rates times the selectivities of the predicates among
    them (predicates with a side outside `relations` are ignored)."""
    names = frozenset(relations)
    rate = math.prod(problem.relation(name).rate for name in names)
    for pred in predicates:
        if pred.left in names and pred.right in names:
            rate *= pred.selectivity
    return rate


def carries_key(
    source: frozenset[str], predicates: Iterable[JoinPredicate], label: StoreLabel
) -> bool:
    """True when a tuple over `source` knows the value of `label`'s partitioning attribute.

    It does when an equality predicate joins a relation of the tuple to the key's relation on
    the key's attribute (``X.y = S.b`` with X in `source`, for a store partitioned on S.b).
    Equalities implied through a relation outside the tuple are not followed, as in the paper.
    """
    key = label.key
    if key is None:
        return False
    return any(
        pred.is_equality
        and pred.touches(key.relation)
        and pred.other(key.relation) in source
        and pred.attr_of(key.relation) == key.name
        for pred in predicates
    )


def broadcast_factor(
    problem: Problem, source: frozenset[str], predicates: Iterable[JoinPredicate], label: StoreLabel
) -> int:
    """χ: 1 if the tuple is routed to one unit of the store, else the parallelism."""
    return 1 if carries_key(source, predicates, label) else problem.parallelism


def step_cost(problem: Problem, step: Step) -> float:
    """Tuples sent per time unit by one step (the inner term of Eq. 1)."""
    j = len(step.source)
    chi = broadcast_factor(problem, step.source, step.predicates, step.target)
    return join_rate(problem, step.source, step.predicates) / j * chi


def order_cost(problem: Problem, order: ProbeOrder) -> float:
    """PCost(σ): the probe load of one probe order, every step counted."""
    return sum(step_cost(problem, step) for step in order.steps)


def shared_load(problem: Problem, orders: Iterable[ProbeOrder]) -> float:
    """The probe load of running `orders` together: each distinct step is paid once.

    This is the ILP's objective for a set of chosen probe orders (steps equal across orders and
    queries are one step variable).
    """
    steps = {step for order in orders for step in order.steps}
    return sum(step_cost(problem, step) for step in steps)


def maintenance_cost(problem: Problem, orders: Iterable[ProbeOrder]) -> float:
    """The cost of keeping an MIR store up to date with `orders` (one per input relation), paid
    alone; inside a plan, steps it shares with other probe orders are paid once."""
    return shared_load(problem, orders)
