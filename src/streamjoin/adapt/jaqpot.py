"""JAQPOT: a probe budget split over join directions for throughput, with freshness first
(Mukherji, Rundensteiner, Ward; digest in ``papers/notes/seed-002-jaqpot.md``).

When the work a batch may do (μ, probes per unit of time) is below what exact processing needs,
every arriving row is still stored, but only some rows probe the other side. The decision is how
to split μ over the join directions (half-way joins).

- An **input path** is the pipeline of half-way joins a stream's row goes through to the root:
  hop j probes a partner state with productivity ρ_h = σ·|S| (outputs per probing row). With
  φ_0 = 1 and φ_j = ρ_h,1 ·…· ρ_h,j, giving a path X resources split along it as
  ``X_j = X·φ_{j−1} / Σ_{g<n} φ_g`` feeds each hop exactly what the one before produces (the
  producer-consumer match) and yields ``ρ_p·X`` root outputs, ``ρ_p = φ_n / Σ_{g<n} φ_g``.
- **GrePP** gives μ to the paths in descending ρ_p, each up to its capacity ``λ·Σ_{g<n} φ_g``
  (its leaf cannot probe more rows than arrive): a fractional knapsack, optimal in the
  continuous model.
- **Freshness.** A state between operators (staleness susceptible) is refreshed only by the
  rows the paths through it are allowed to produce; each needs a minimum refresh rate for the
  freshness predicates of the streams it holds (`refresh_rates`). Covering those rates at
  least cost is a weighted multiple set cover, solved greedily (GH-WMSCP, as reconstructed in
  the digest: the path with the least cost per unit of still-uncovered demand, in the amount
  that closes a residual).
- **JAQPOT** covers first, then runs GrePP on what is left, the paths' capacities reduced by
  what the cover used; the cover's resources produce output too. Both are pure functions of
  the statistics; `adapt.jaqpot_lp` solves the same model exactly, as the oracle.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass, field

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class Hop:
    """One half-way join of a path: its productivity ρ_h = σ·|S| (outputs per probing row),
    and the staleness-susceptible state its probing rows are stored in (None: a leaf's own
    state, refreshed by every arrival) with that state's rows."""

    productivity: float
    own_state: str | None = None
    own_rows: float = 0.0


@dataclass(frozen=True, slots=True)
class InputPath:
    """The half-way joins a row of `stream` goes through to the root, leaf first; `rate` is
    the stream's arrivals per unit of time (λ) and `rows` its leaf state's rows."""

    stream: str
    rate: float
    hops: tuple[Hop, ...]
    rows: float = 0.0

    def __post_init__(self) -> None:
        if not self.hops or self.rate < 0 or any(h.productivity < 0 for h in self.hops):
            msg = f"path {self.stream!r}: at least one hop, rates and productivities >= 0"
            raise ValueError(msg)

    @property
    def phis(self) -> tuple[float, ...]:
        """φ_0 … φ_n: rows reaching each hop (and the root) per leaf row that probes."""
        out = [1.0]
        for hop in self.hops:
            out.append(out[-1] * hop.productivity)
        return tuple(out)

    @property
    def _spent(self) -> float:
        """Σ_{g<n} φ_g: resources one probing leaf row costs along the path."""
        return sum(self.phis[:-1])

    @property
    def productivity(self) -> float:
        """ρ_p: root outputs per unit of resource spent on the path."""
        return self.phis[-1] / self._spent

    @property
    def capacity(self) -> float:
        """The most resources the path can take: every arriving leaf row probes."""
        return self.rate * self._spent

    def split(self, resources: float) -> tuple[float, ...]:
        """Each hop's probe allowance when the path gets `resources` (producer-consumer)."""
        return tuple(resources * phi / self._spent for phi in self.phis[:-1])

    def refresh(self) -> dict[str, float]:
        """Rows per unit of resource the path stores into each susceptible state."""
        out: dict[str, float] = {}
        for share, hop in zip(self.split(1.0), self.hops, strict=True):
            if hop.own_state is not None:
                out[hop.own_state] = out.get(hop.own_state, 0.0) + share
        return out


@dataclass(frozen=True)
class Allocation:
    """Resources per path, each hop's allowance, and what they yield."""

    resources: dict[str, float]
    allowances: dict[str, tuple[float, ...]]
    output: float
    """Root outputs per unit of time."""
    reserved: float = 0.0
    """Resources the freshness cover took (Δμ)."""
    feasible: bool = True
    """False when the freshness rates cannot be met within the budget and capacities."""
    covered: dict[str, float] = field(default_factory=dict)
    """Refresh rate each susceptible state gets."""


def allocation(
    paths: Sequence[InputPath], resources: Mapping[str, float], **kw: t.Any
) -> Allocation:
    """The `Allocation` of `resources` (per path's stream) over `paths`."""
    allowances = {p.stream: p.split(resources.get(p.stream, 0.0)) for p in paths}
    output = sum(p.productivity * resources.get(p.stream, 0.0) for p in paths)
    covered: dict[str, float] = {}
    for p in paths:
        for state, per_unit in p.refresh().items():
            covered[state] = covered.get(state, 0.0) + per_unit * resources.get(p.stream, 0.0)
    return Allocation(dict(resources), allowances, output, covered=covered, **kw)


def grepp(
    paths: Sequence[InputPath], budget: float, given: Mapping[str, float] | None = None
) -> dict[str, float]:
    """GrePP: `budget` to the paths by descending productivity, each up to its capacity less
    what it was `given` already; returns the resources added per path."""
    if budget < 0:
        msg = f"the budget must be >= 0, got {budget}"
        raise ValueError(msg)
    given = given or {}
    left = budget
    out: dict[str, float] = {}
    for p in sorted(paths, key=lambda p: p.productivity, reverse=True):
        room = max(p.capacity - given.get(p.stream, 0.0), 0.0)
        take = min(room, left)
        if take > 0:
            out[p.stream] = take
            left -= take
        if left <= _EPS:
            break
    return out


def cover(
    paths: Sequence[InputPath], needed: Mapping[str, float], budget: float = math.inf
) -> dict[str, float] | None:
    """GH-WMSCP: the least resources found per path that store at least `needed` rows per unit
    of time into each susceptible state, greedily; None if no allocation within the paths'
    capacities and `budget` meets them."""
    residual = {s: r for s, r in needed.items() if r > _EPS}
    given: dict[str, float] = {}
    order: list[str] = []
    supplies = {p.stream: p.refresh() for p in paths}
    while residual:
        best, best_cost = None, (math.inf, 0.0)
        for p in paths:
            room = p.capacity - given.get(p.stream, 0.0)
            useful = sum(supplies[p.stream].get(s, 0.0) for s in residual)
            if room <= _EPS or useful <= _EPS:
                continue
            # (Of equally cheap covers, the more productive path: its resources yield output.)
            cost = (1.0 / useful, -p.productivity)
            if cost < best_cost:
                best, best_cost = p, cost
        if best is None:
            return None
        supply = supplies[best.stream]
        closes = min(r / supply[s] for s, r in residual.items() if supply.get(s, 0.0) > _EPS)
        amount = min(closes, best.capacity - given.get(best.stream, 0.0))
        given[best.stream] = given.get(best.stream, 0.0) + amount
        if best.stream not in order:
            order.append(best.stream)
        for s in list(residual):
            residual[s] -= supply.get(s, 0.0) * amount
            if residual[s] <= 1e-9 * max(needed[s], 1.0):
                del residual[s]
    _prune(given, order, supplies, needed)
    given = {p: x for p, x in given.items() if x > _EPS}
    if sum(given.values()) > budget * (1 + 1e-9) + _EPS:
        return None
    return given


def _prune(
    given: dict[str, float],
    order: Sequence[str],
    supplies: Mapping[str, Mapping[str, float]],
    needed: Mapping[str, float],
) -> None:
    """Take back, latest choice first, what a path was given beyond what the rates need once
    the paths chosen after it supply them too (the greedy set cover's redundancy elimination:
    a path picked to close one state's residual may be covered over by those that close the
    others')."""
    covered = {s: sum(supplies[p].get(s, 0.0) * x for p, x in given.items()) for s in needed}
    for p in reversed(order):
        slack = [
            (covered[s] - needed[s]) / per
            for s, per in supplies[p].items()
            if s in needed and per > _EPS  # (a hop after one that finds nothing stores none)
        ]
        cut = min(max(min(slack, default=0.0), 0.0), given[p])
        if cut <= _EPS:
            continue
        given[p] -= cut
        for s, per in supplies[p].items():
            if s in covered:
                covered[s] -= per * cut


def jaqpot(
    paths: Sequence[InputPath], budget: float, needed: Mapping[str, float] | None = None
) -> Allocation:
    """JAQPOT: the freshness cover first (`needed` refresh rates), then GrePP on the rest."""
    covering = cover(paths, needed or {}, budget)
    if covering is None:
        # (Freshness cannot be met: throughput alone, reported as infeasible.)
        return allocation(paths, grepp(paths, budget), feasible=False)
    reserved = sum(covering.values())
    extra = grepp(paths, max(budget - reserved, 0.0), covering)
    total = {s: covering.get(s, 0.0) + extra.get(s, 0.0) for s in {*covering, *extra}}
    return allocation(paths, total, reserved=reserved)


def refresh_rates(
    paths: Sequence[InputPath], freshness: Mapping[str, float]
) -> dict[str, float] | None:
    """The refresh rate each susceptible state needs for the streams' freshness predicates
    (`freshness`: the oldest a row of a stream may be in an output, in units of time).

    A row of stream I stays in its leaf state ``rows / λ`` and in each susceptible state on its
    path ``|S_j| / R_j``. Splitting what is left of F^I over the path's susceptible states in
    proportion to their rows gives each the same rate, ``Σ_j |S_j| / slack``; a state holding
    rows of several streams takes the largest (the digest's reading of Lemma 1). None: some
    F^I is shorter than its leaf residence alone (no allocation can meet it).
    """
    rates: dict[str, float] = {}
    for p in paths:
        if p.stream not in freshness or p.rate <= 0:  # (no new row of it to keep fresh)
            continue
        states = [h for h in p.hops if h.own_state is not None]
        if not states:
            continue
        residence = p.rows / p.rate if p.rate > 0 else math.inf
        slack = freshness[p.stream] - residence
        if slack <= 0:
            return None
        need = sum(h.own_rows for h in states) / slack
        for h in states:
            assert h.own_state is not None
            rates[h.own_state] = max(rates.get(h.own_state, 0.0), need)
    return rates
