"""The policies JAQPOT is measured against (the paper's Appendix B, Table 4, and the issue's
load-shedding baselines), over a plan of binary join operators.

A plan is a tree of `Operator`s; each has two join directions (half-way joins), the rows of one
input probing the other's state with productivity ρ_h = σ·|S|. A policy gives each direction
an *allowance*, probes per unit of time; `evaluate` follows the rows up the tree: a direction
probes ``min(allowance, rows arriving)`` and yields ``probes·ρ_h`` rows for its parent (or the
root's output). Every arriving row is stored, whatever it probes.

- **EqualHJ**: μ/m to each of the m directions.
- **GlobalHJPR**: μ in proportion to each direction's ρ_h.
- **EBestHJP**: μ/n to each of the n operators, then, inside each, BestHJP: the more
  productive direction first, up to its arrivals.
- **Uniform** (load shedding's view): every direction probes the same fraction of what
  arrives, the largest that fits μ.
- **Proportional**: μ over the leaf streams' input paths in proportion to their rates.
- **JAQPOT** (`adapt.jaqpot`) maps onto the same directions through the plan's input paths.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from streamjoin.adapt.jaqpot import Hop, InputPath, jaqpot

if t.TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class Stream:
    """A leaf input: its name and arrival rate."""

    name: str
    rate: float


@dataclass(frozen=True, slots=True)
class Operator:
    """A binary join: ``left`` rows probe the right state with `left_rho`, and the other way."""

    name: str
    left: Stream | Operator
    right: Stream | Operator
    left_rho: float
    right_rho: float

    def directions(self) -> list[tuple[str, Stream | Operator, float]]:
        """Each direction (named ``<op>.<input>``), its probing input and ρ_h, in the tree."""
        own = [
            (f"{self.name}.{self.left.name}", self.left, self.left_rho),
            (f"{self.name}.{self.right.name}", self.right, self.right_rho),
        ]
        below = [
            d
            for side in (self.left, self.right)
            if isinstance(side, Operator)
            for d in side.directions()
        ]
        return below + own


def evaluate(root: Operator, allowances: Mapping[str, float]) -> float:
    """The root's output per unit of time under `allowances` (probes per direction)."""

    def produced(node: Stream | Operator) -> float:
        if isinstance(node, Stream):
            return node.rate
        out = 0.0
        for side, rho in ((node.left, node.left_rho), (node.right, node.right_rho)):
            probes = min(allowances.get(f"{node.name}.{side.name}", 0.0), produced(side))
            out += probes * rho
        return out

    return produced(root)


def equal_hj(root: Operator, budget: float) -> dict[str, float]:
    """EqualHJ: μ/m to each direction."""
    directions = root.directions()
    return {name: budget / len(directions) for name, _, _ in directions}


def global_hjpr(root: Operator, budget: float) -> dict[str, float]:
    """GlobalHJPR: μ in proportion to ρ_h."""
    directions = root.directions()
    total = sum(rho for _, _, rho in directions) or 1.0
    return {name: budget * rho / total for name, _, rho in directions}


def ebest_hjp(root: Operator, budget: float) -> dict[str, float]:
    """EBestHJP: μ/n per operator, BestHJP inside it (its arrivals as measured by exact
    processing below: an upper bound on what reaches it)."""
    operators = _operators(root)
    share = budget / len(operators)
    out: dict[str, float] = {}
    for op in operators:
        left = share
        sides = sorted(((op.left, op.left_rho), (op.right, op.right_rho)), key=lambda s: -s[1])
        for side, _ in sides:
            take = min(left, _exact_rate(side))
            out[f"{op.name}.{side.name}"] = take
            left -= take
    return out


def uniform(root: Operator, budget: float) -> dict[str, float]:
    """Every direction probes the same fraction of its exact arrivals, the most that fits."""
    directions = root.directions()
    demand = sum(_exact_rate(side) for _, side, _ in directions)
    fraction = min(1.0, budget / demand) if demand else 1.0
    return {name: fraction * _exact_rate(side) for name, side, _ in directions}


def proportional(root: Operator, budget: float) -> dict[str, float]:
    """Per-stream proportional: each leaf stream's input path gets μ in proportion to its rate
    (at most what the path can take), split along the path as JAQPOT splits it."""
    paths, names = _paths(root)
    rates = sum(p.rate for p in paths) or 1.0
    given = {p.stream: min(p.capacity, budget * p.rate / rates) for p in paths}
    return _along(paths, names, given)


def jaqpot_allowances(root: Operator, budget: float) -> dict[str, float]:
    """JAQPOT's split of μ over the directions: each leaf's input path to the root."""
    paths, names = _paths(root)
    return _along(paths, names, jaqpot(paths, budget).resources)


def _paths(root: Operator) -> tuple[list[InputPath], list[list[str]]]:
    """Each leaf stream's input path, and the names of its hops' directions."""
    paths, names = [], []
    for name, side, _ in root.directions():
        if isinstance(side, Stream):
            hops = _path(root, name)
            paths.append(InputPath(side.name, side.rate, tuple(Hop(rho) for _, rho in hops)))
            names.append([n for n, _ in hops])
    return paths, names


def _along(
    paths: list[InputPath], names: list[list[str]], resources: Mapping[str, float]
) -> dict[str, float]:
    """Each direction's allowance when the paths get `resources` (shared hops summed)."""
    out: dict[str, float] = {}
    for path, hop_names in zip(paths, names, strict=True):
        for hop, share in zip(hop_names, path.split(resources.get(path.stream, 0.0)), strict=True):
            out[hop] = out.get(hop, 0.0) + share
    return out


def _path(root: Operator, leaf_direction: str) -> list[tuple[str, float]]:
    """The directions a row of the leaf direction goes through to the root, with their ρ_h."""
    for op in _operators(root):
        for side, rho in ((op.left, op.left_rho), (op.right, op.right_rho)):
            if f"{op.name}.{side.name}" == leaf_direction:
                return [(leaf_direction, rho), *_upward(root, op)]
    msg = f"no direction {leaf_direction!r}"
    raise KeyError(msg)


def _upward(root: Operator, child: Operator) -> list[tuple[str, float]]:
    """The directions a row produced by `child` probes on its way to the root."""
    for op in _operators(root):
        if op.left is child:
            return [(f"{op.name}.{child.name}", op.left_rho), *_upward(root, op)]
        if op.right is child:
            return [(f"{op.name}.{child.name}", op.right_rho), *_upward(root, op)]
    return []


def _operators(root: Operator) -> list[Operator]:
    below = [o for s in (root.left, root.right) if isinstance(s, Operator) for o in _operators(s)]
    return [*below, root]


def _exact_rate(node: Stream | Operator) -> float:
    """Rows a unit of time `node` delivers when every direction probes everything."""
    if isinstance(node, Stream):
        return node.rate
    return _exact_rate(node.left) * node.left_rho + _exact_rate(node.right) * node.right_rho
