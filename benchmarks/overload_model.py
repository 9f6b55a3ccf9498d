"""The paper's setting for the ``overload`` benchmark, in JAQPOT's fractional model (no Spark):
4-stream linear and bushy plans drawn from the paper's Table 3, a budget at 40 % of what exact
processing needs, selectivities that drift twice in a run (its Fig. 6), and freshness predicates
of 1.5× and 5× the window. The ``asymmetric`` regime is where join directions differ: streams
at rates 1:10 (A and C slow, B and D fast) over time-based windows, a two-way join where a slow
row's probe finds about one partner, and linear and bushy plans of four streams.

Each policy splits the budget over the plan's join directions in each phase:

- ``jaqpot``: the freshness cover, then GrePP (`adapt.jaqpot`), from each phase's statistics;
- the paper's heuristics (``equal_hj``, ``global_hjpr``, ``ebest_hjp``) and load shedding's
  (``uniform``, ``proportional``, ``random``: each row of a stream probes with the same chance,
  the one that fits the budget, all the way up), from each phase's statistics too;
- ``best_fixed``: one split of the budget over the input paths, the same in every phase, the
  best of a random search (what a user tuning a fixed allowance by hand would find at best);
- ``lp``: the exact optimum of the same model, freshness included (`adapt.jaqpot_lp`).

A policy's output is the root's rows a unit of time (`jaqpot_baselines.evaluate`); a phase
violates freshness when a susceptible state (an operator's output stored for its parent) is
refreshed below the rate its streams' predicates need (`adapt.jaqpot.refresh_rates`), counted
in the phases where some split of the budget meets them all (`jaqpot_lp.min_cover`).

At a budget of a share f of exact processing's probes, ``random`` yields f of the exact output
(every row probes with chance f, and the rows it produces go on), so no policy can exceed 1/f
times it: 2.5× at 40 %, reached only when some paths produce nothing at all.
"""

from __future__ import annotations

import itertools
import random
import typing as t
from dataclasses import dataclass

from streamjoin.adapt.jaqpot import Hop, InputPath, jaqpot, refresh_rates
from streamjoin.adapt.jaqpot_baselines import (
    Operator,
    Stream,
    ebest_hjp,
    equal_hj,
    evaluate,
    global_hjpr,
    proportional,
    uniform,
)
from streamjoin.adapt.jaqpot_lp import min_cover, optimum

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

BUDGET = 0.4
"""The budget as a share of exact processing's probes."""
PHASES = 3
"""Selectivity drift: the run's phases (the paper's Fig. 6 changes them at 3 and 7 minutes)."""
FRESHNESS = (1.5, 5.0)
"""Freshness predicates, as multiples of the window (the paper's Table 3 range)."""
SEARCH = 400
"""Random splits tried by ``best_fixed``."""

Allowances = dict[str, float]


@dataclass(frozen=True)
class Plan:
    """A plan in one phase: its operator tree, input paths (with their hops' directions and
    susceptible states) and the refresh rates freshness needs."""

    root: Operator
    paths: list[InputPath]
    directions: list[list[str]]
    needed: dict[str, float]


REGIMES = {"table3": (0.01, 0.1), "selective": (0.00002, 0.002), "asymmetric": (0.1, 10.0)}
"""Selectivity ranges: the paper's Table 3, where every ρ_h = σ·|S| is 2-500 and a path's
cost is its last hop's, and one where ρ_h spans 0.004-10, so paths differ. The asymmetric
regime's range is a factor on the selectivity at which a slow row's probe of a fast stream's
window finds one partner."""
SHAPES: dict[str, tuple[str, ...]] = {
    "table3": ("linear", "bushy"),
    "selective": ("linear", "bushy"),
    "asymmetric": ("two-way", "linear", "bushy"),
}
SLOW, FAST = "AC", "BD"
"""The asymmetric regime's streams at the slow rate, and at ten times it."""


def draw_plan(
    rng: random.Random, shape: str, freshness: float, drift: int, regime: str = "table3"
) -> Plan:
    """A plan of `shape` (``two-way``: A⋈B, ``linear``: ((A⋈B)⋈C)⋈D, ``bushy``:
    (A⋈B)⋈(C⋈D)), selectivities log-uniform in the `regime`'s range, after `drift`
    selectivity changes; `freshness` times the window for every stream. Table 3's rates
    (300-1200 rows/s) and windows (200-5000 rows), or in the asymmetric regime rates 1:10 and
    a window of 2-10 s, a state holding what arrives in it (the paper's Appendix A: |S| = λT).
    """
    names = "AB" if shape == "two-way" else "ABCD"
    if regime == "asymmetric":
        slow, span = rng.uniform(300, 1200), rng.uniform(2.0, 10.0)
        rates = {s: slow * (10.0 if s in FAST else 1.0) for s in names}
        rows = {s: rates[s] * span for s in names}
        one = 1.0 / (10.0 * slow * span)  # (a slow row probing a fast window finds one row)
        lo, hi = (one * f for f in REGIMES[regime])
        sel = [one] if shape == "two-way" else [lo * (hi / lo) ** rng.random() for _ in range(3)]

        def held(op: Operator) -> float:
            return _rate(op) * span

    else:
        rates = {s: rng.uniform(300, 1200) for s in names}
        rows = {s: rng.uniform(200, 5000) for s in names}
        lo, hi = REGIMES[regime]
        sel = [lo * (hi / lo) ** rng.random() for _ in range(3)]

        def held(op: Operator) -> float:
            return min(5000.0, _rate(op) * min(rows.values()) / 1000)

    for _ in range(drift):  # (each phase moves one operator's selectivity, as Fig. 6 does)
        i = rng.randrange(len(sel))
        sel[i] = min(hi, sel[i] * rng.uniform(1.5, 3.0))
    leaf = {s: Stream(s, rates[s]) for s in names}
    j1 = _op("j1", leaf["A"], leaf["B"], sel[0], rows["B"], rows["A"])
    if shape == "two-way":
        root = j1
    elif shape == "linear":
        j2 = _op("j2", j1, leaf["C"], sel[1], rows["C"], held(j1))
        root = _op("j3", j2, leaf["D"], sel[2], rows["D"], held(j2))
    else:
        j2 = _op("j2", leaf["C"], leaf["D"], sel[1], rows["D"], rows["C"])
        root = _op("j3", j1, j2, sel[2], held(j2), held(j1))
    paths, directions = _paths(root, rows, held)
    window = {s: rows[s] / rates[s] for s in names}  # (seconds a row stays in its window)
    needed = refresh_rates(paths, {s: freshness * window[s] for s in names}) or {}
    return Plan(root, paths, directions, needed)


def _op(
    name: str, left: Stream | Operator, right: Stream | Operator, sel: float, *rows: float
) -> Operator:
    """A join whose left rows probe a state of ``rows[0]`` and right rows one of ``rows[1]``."""
    return Operator(name, left, right, sel * rows[0], sel * rows[1])


def _rate(node: Stream | Operator) -> float:
    if isinstance(node, Stream):
        return node.rate
    return _rate(node.left) * node.left_rho + _rate(node.right) * node.right_rho


def _paths(
    root: Operator, rows: Mapping[str, float], held: Callable[[Operator], float]
) -> tuple[list[InputPath], list[list[str]]]:
    """Each leaf's input path with its hops' directions; a hop stores its probing rows in the
    state of the operator they came from (susceptible unless a leaf's), of `held` rows."""
    parents = {}
    for op in _operators(root):
        for side in (op.left, op.right):
            parents[side.name] = (op, side)
    paths, names = [], []
    for leaf in _leaves(root):
        hops, hop_names = [], []
        node: Stream | Operator = leaf
        while node.name in parents:
            op, side = parents[node.name]
            rho = op.left_rho if side is op.left else op.right_rho
            if isinstance(node, Stream):
                hops.append(Hop(rho))
            else:
                hops.append(Hop(rho, node.name, held(node)))
            hop_names.append(f"{op.name}.{node.name}")
            node = op
        paths.append(InputPath(leaf.name, leaf.rate, tuple(hops), rows[leaf.name]))
        names.append(hop_names)
    return paths, names


def _operators(node: Stream | Operator) -> list[Operator]:
    if isinstance(node, Stream):
        return []
    return [*_operators(node.left), *_operators(node.right), node]


def _leaves(node: Stream | Operator) -> list[Stream]:
    if isinstance(node, Stream):
        return [node]
    return [*_leaves(node.left), *_leaves(node.right)]


def demand(plan: Plan) -> float:
    """Probes a unit of time exact processing needs."""
    return sum(p.capacity for p in plan.paths)


def along(plan: Plan, resources: Mapping[str, float]) -> Allowances:
    """Each direction's probes when the input paths get `resources`."""
    out: dict[str, float] = {}
    for path, names in zip(plan.paths, plan.directions, strict=True):
        for name, share in zip(names, path.split(resources.get(path.stream, 0.0)), strict=True):
            out[name] = out.get(name, 0.0) + share
    return out


def random_policy(plan: Plan, budget: float) -> Allowances:
    """Each arriving row probes with the chance that fits the budget, and so does every row it
    produces: a path's share is its capacity's."""
    share = min(1.0, budget / demand(plan))
    return along(plan, {p.stream: share * p.capacity for p in plan.paths})


def policies() -> dict[str, Callable[[Plan, float], Allowances]]:
    """The adaptive policies: each phase's split from that phase's statistics."""
    return {
        "jaqpot": lambda plan, b: along(plan, jaqpot(plan.paths, b, plan.needed).resources),
        "lp": lambda plan, b: along(plan, optimum(plan.paths, b, plan.needed).resources),
        "equal_hj": lambda plan, b: equal_hj(plan.root, b),
        "global_hjpr": lambda plan, b: global_hjpr(plan.root, b),
        "ebest_hjp": lambda plan, b: ebest_hjp(plan.root, b),
        "uniform": lambda plan, b: uniform(plan.root, b),
        "proportional": lambda plan, b: proportional(plan.root, b),
        "random": random_policy,
    }


def violations(plan: Plan, allowances: Mapping[str, float]) -> int:
    """Susceptible states refreshed below what freshness needs under `allowances`."""
    produced = _produced(plan.root, allowances)
    return sum(1 for state, rate in plan.needed.items() if produced[state] < rate * (1 - 1e-6))


def _produced(root: Operator, allowances: Mapping[str, float]) -> dict[str, float]:
    """Rows each operator outputs a unit of time under `allowances`."""
    out: dict[str, float] = {}

    def walk(node: Stream | Operator) -> float:
        if isinstance(node, Stream):
            return node.rate
        total = 0.0
        for side, rho in ((node.left, node.left_rho), (node.right, node.right_rho)):
            total += min(allowances.get(f"{node.name}.{side.name}", 0.0), walk(side)) * rho
        out[node.name] = total
        return total

    walk(root)
    return out


def best_fixed(phases: list[Plan], budgets: list[float], rng: random.Random) -> list[Allowances]:
    """One split of each phase's budget over the input paths, in fixed shares, the best of
    `SEARCH` random shares (and the corners) by total output over the phases."""
    streams = [p.stream for p in phases[0].paths]
    candidates = [{s: float(s == c) for s in streams} for c in streams]
    for _ in range(SEARCH):
        weights = [rng.random() ** 3 for _ in streams]
        total = sum(weights)
        candidates.append({s: w / total for s, w in zip(streams, weights, strict=True)})

    def run(shares: Mapping[str, float]) -> list[Allowances]:
        out = []
        for plan, budget in zip(phases, budgets, strict=True):
            given = {p.stream: min(p.capacity, shares[p.stream] * budget) for p in plan.paths}
            out.append(along(plan, given))
        return out

    def output(split: list[Allowances]) -> float:
        return sum(evaluate(p.root, a) for p, a in zip(phases, split, strict=True))

    return max((run(c) for c in candidates), key=output)


def run_model(seeds: int = 20, seed: int = 0) -> dict[str, t.Any]:
    """Every policy over `seeds` drawn plans per regime, shape and freshness (a two-way join,
    which holds no susceptible state, at one freshness only); outputs relative to exact
    processing, to uniform shedding, to the LP optimum, and freshness violations, summed over
    the phases."""
    rng = random.Random(seed)
    cases = []
    for regime in REGIMES:
        for shape, fresh in itertools.product(SHAPES[regime], FRESHNESS):
            if shape != "two-way" or fresh == FRESHNESS[0]:
                cases.append(_case(rng, regime, shape, fresh, seeds))
    return {"budget_share": BUDGET, "phases": PHASES, "cases": cases}


def _case(
    rng: random.Random, regime: str, shape: str, fresh: float, seeds: int
) -> dict[str, t.Any]:
    totals: dict[str, float] = {}
    broken: dict[str, int] = {}
    exact_total = 0.0
    infeasible = 0
    for _ in range(seeds):
        state = rng.getstate()
        phases = []
        for drift in range(PHASES):
            rng.setstate(state)  # (the same plan, its selectivities drifting)
            phases.append(draw_plan(rng, shape, fresh, drift, regime))
        budgets = [BUDGET * demand(p) for p in phases]
        # (Where no split of the budget meets freshness, no policy is held to it.)
        least = [min_cover(p.paths, p.needed) for p in phases]
        feasible = [m is not None and m <= b for m, b in zip(least, budgets, strict=True)]
        infeasible += feasible.count(False)
        chosen = {
            name: [policy(p, b) for p, b in zip(phases, budgets, strict=True)]
            for name, policy in policies().items()
        }
        chosen["best_fixed"] = best_fixed(phases, budgets, rng)
        for name, split in chosen.items():
            out = sum(evaluate(p.root, a) for p, a in zip(phases, split, strict=True))
            totals[name] = totals.get(name, 0.0) + out
            bad = sum(
                violations(p, a) for p, a, ok in zip(phases, split, feasible, strict=True) if ok
            )
            broken[name] = broken.get(name, 0) + bad
        exact_total += sum(_exact(p) for p in phases)
    baselines = {n: v for n, v in totals.items() if n not in ("jaqpot", "lp")}
    best = max(baselines, key=lambda n: baselines[n])
    return {
        "regime": regime,
        "shape": shape,
        "freshness_x_window": fresh,
        "plans": seeds,
        "share_of_exact": {n: round(v / exact_total, 4) for n, v in totals.items()},
        "freshness_violations": broken,
        "phases_freshness_infeasible": infeasible,
        "best_baseline": best,
        "jaqpot_over_best_baseline": round(totals["jaqpot"] / totals[best], 2),
        "jaqpot_over_uniform": round(totals["jaqpot"] / totals["uniform"], 2),
        "jaqpot_over_lp": round(totals["jaqpot"] / totals["lp"], 4),
    }


def _exact(plan: Plan) -> float:
    """The root's rows a unit of time when every direction probes all that arrives."""
    return evaluate(plan.root, {name: float("inf") for names in plan.directions for name in names})
