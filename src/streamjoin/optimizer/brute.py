"""Brute-force search over every combination of candidate probe orders: the ILP's oracle.

It enumerates, depth first, one candidate per (query, start); when a chosen candidate probes an
MIR store, one maintenance candidate per input relation of that MIR joins the enumeration (as
the ILP's MIR rows demand). A combination is a plan when every store is partitioned one way by
all orders that probe it. Its cost is the ILP's objective computed directly: the sum of the
costs of its distinct steps.

The only pruning is by cost: the load of a partial combination never falls as orders are added
(step costs are positive), so a branch already dearer than the best plan is cut. Branches that
merely tie are explored, so the search also counts how many plans reach the optimum; the golden
tests use that count to know that the optimal plan is unique.

Only for tiny instances: the number of combinations grows as the product of the candidate
counts. ``max_nodes`` stops a search that would not end.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from streamjoin.optimizer.cost import order_cost, step_cost
from streamjoin.optimizer.problem import OptimizerError

if t.TYPE_CHECKING:
    from streamjoin.optimizer.candidates import Candidates
    from streamjoin.optimizer.solve import Selection
    from streamjoin.optimizer.stores import Column, Step, Store

REL_TOL = 1e-9
"""Loads within this relative distance of the best count as ties (float sums in any order)."""


def _tolerance(best: float) -> float:
    # No tolerance before the first plan: inf - inf would be nan and compare false.
    return REL_TOL * max(1.0, best) if best < float("inf") else 0.0


@dataclass(frozen=True)
class BruteResult:
    """The outcome of the exhaustive search.

    Attributes:
        chosen: one optimal plan, as choice-set index → candidate index, sorted by index.
        load: its probe load (the optimum).
        optimal_plans: how many distinct plans reach the optimum (ties within `REL_TOL`).
        nodes: partial combinations visited.
    """

    chosen: tuple[tuple[int, int], ...]
    load: float
    optimal_plans: int
    nodes: int

    @property
    def selection(self) -> Selection:
        """`chosen` as a dict, the form `decode` takes."""
        return dict(self.chosen)


def brute_force(candidates: Candidates, *, max_nodes: int = 5_000_000) -> BruteResult:
    """The cheapest plan over all combinations of `candidates` (see the module docstring).

    Raises:
        OptimizerError: the search visited more than `max_nodes` partial combinations.
    """
    problem = candidates.problem
    sets = candidates.choice_sets
    cost_of: dict[Step, float] = {}
    # Cheapest candidates first, so that a good plan is found early and prunes the rest.
    ranked = [
        [k for _, k in sorted((order_cost(problem, o), k) for k, o in enumerate(c.orders))]
        for c in sets
    ]
    for choice in sets:
        for order in choice.orders:
            for step in order.steps:
                if step not in cost_of:
                    cost_of[step] = step_cost(problem, step)

    active: dict[Step, int] = {}
    keys: dict[Store, Column | None] = {}
    scheduled: set[Store] = set()
    chosen: dict[int, int] = {}
    best_load = float("inf")
    best: tuple[tuple[int, int], ...] = ()
    ties = 0
    nodes = 0

    def visit(pending: tuple[int, ...], load: float) -> None:
        nonlocal best_load, best, ties, nodes
        nodes += 1
        if nodes > max_nodes:
            msg = f"brute force gave up after {max_nodes} partial plans (instance too large)"
            raise OptimizerError(msg)
        if not pending:
            tol = _tolerance(best_load)
            if load < best_load - tol:
                best_load, best, ties = load, tuple(sorted(chosen.items())), 1
            elif load <= best_load + tol:
                ties += 1
            return
        i, rest = pending[0], pending[1:]
        for k in ranked[i]:
            order = sets[i].orders[k]
            if any(keys.get(lb.store, lb.key) != lb.key for lb in order.targets):
                continue
            new_steps = [s for s in order.steps if s not in active]
            added = load + sum(cost_of[s] for s in new_steps)
            if added > best_load + _tolerance(best_load):
                continue
            fixed = [lb.store for lb in order.targets if lb.store not in keys]
            for lb in order.targets:
                keys.setdefault(lb.store, lb.key)
            for s in order.steps:
                active[s] = active.get(s, 0) + 1
            fresh = [m for m in dict.fromkeys(order.mirs) if m not in scheduled]
            scheduled.update(fresh)
            more = tuple(j for m in fresh for j in candidates.maintenance[m])
            chosen[i] = k
            visit(rest + more, added)
            del chosen[i]
            scheduled.difference_update(fresh)
            for s in order.steps:
                active[s] -= 1
                if not active[s]:
                    del active[s]
            for store in fixed:
                del keys[store]

    visit(tuple(i for i, c in enumerate(sets) if c.is_query), 0.0)
    return BruteResult(best, best_load, ties, nodes)
