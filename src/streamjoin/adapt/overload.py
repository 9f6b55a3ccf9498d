"""Overload control for a query's join directions: JAQPOT's monitor → analyse → act loop
(§4.4 of the paper; `adapt.jaqpot` decides), adapted to micro-batches.

- **Monitor.** Each committed batch reports, per join direction (a stream's rows probing the
  other side), the rows that arrived, the rows that probed, the pairs they found and the rows
  of the partner state, and the batch's time against its trigger. Windowed averages over the
  last `window` batches give λ (arrivals per second), ρ_h = pairs per probing row, and μ, the
  probes a second the engine served: probes over the busy time of the batches.
- **Analyse.** The budget per second is μ scaled to what keeps a batch within its trigger (or
  the job's explicit figure). When arrivals would need more probes than the budget, JAQPOT
  splits it (freshness first when predicates are given). A new split is worked out only when
  a statistic moved by more than ε since the last analysis.
- **Act.** The new split replaces the one in force only if its predicted output beats it by
  more than `gain` (p in the paper); it applies from the next batch. When the budget covers
  every arrival again, the controller returns to exact processing by itself.

A direction's *allowance* is the fraction of its arriving rows that probe (1.0: exact).
Rows that do not probe are still stored, so later partners find them: every pair emitted is a
true pair, and the skipped probes are the only loss. Starved directions keep a trickle of
`explore` so that their productivity stays measured (the paper is silent on this; the digest's
§5.2 notes the need).
"""

from __future__ import annotations

import dataclasses
import typing as t
from collections import deque
from dataclasses import dataclass, field

from streamjoin.adapt.jaqpot import Hop, InputPath, jaqpot, refresh_rates

if t.TYPE_CHECKING:
    from collections.abc import Mapping

Mode = t.Literal["exact", "shed"]
Policy = t.Literal["jaqpot", "uniform"]


@dataclass(frozen=True, slots=True)
class DirectionStats:
    """One join direction in one batch: rows that arrived, rows that probed, pairs found."""

    arrived: int
    probed: int
    pairs: int


@dataclass(frozen=True, slots=True)
class BatchStats:
    """What a committed batch tells the controller."""

    batch: int
    seconds: float
    """Wall time of the batch."""
    interval: float
    """Event or trigger time the batch covered (seconds): arrivals per second are per this."""
    directions: dict[str, DirectionStats]


@dataclass(frozen=True, slots=True)
class Decision:
    """What the runtime applies from batch `batch` on."""

    batch: int
    allowances: dict[str, float]
    """Per direction, the fraction of arriving rows that probe (1.0 everywhere: exact)."""
    predicted_output: float
    """Pairs a second the split is expected to produce."""
    budget: float
    """Probes a second the split may spend."""
    demand: float
    """Probes a second exact processing would need."""
    feasible: bool = True
    """False when the freshness predicates cannot be met within the budget."""

    @property
    def exact(self) -> bool:
        """Whether every arriving row probes."""
        return all(a >= 1.0 for a in self.allowances.values())


@dataclass
class OverloadController:
    """The loop for one query's directions (one direction per input stream of a two-way join).

    Args:
        directions: the directions' names (a stream each).
        mode: ``exact`` (overload shows as lag and a warning, never as shed probes) or
            ``shed``.
        budget: probes a second (None: measured, as what fits the trigger).
        freshness: per direction's stream, the oldest a row may be in an output (seconds):
            JAQPOT's predicates. A chain's combinations (`routes`' hops) are the states a
            starved direction leaves stale; their refresh rates are covered first.
        window: batches averaged.
        epsilon: relative change of a statistic that triggers a new analysis.
        gain: relative gain in predicted output a new split must bring to be applied.
        explore: the allowance a starved direction keeps, to stay measured.
        policy: ``jaqpot`` (the budget to the most productive directions first) or
            ``uniform`` (load shedding's view: every direction the same fraction).
        pairs_cost: whether a pair found costs a unit of work like a probe (the paper counts
            probes alone). In a micro-batch engine a probe's pairs are most of its work: each
            is built, shuffled and written. The pairs then form a second hop of each path.
    """

    directions: tuple[str, ...]
    mode: Mode = "exact"
    budget: float | None = None
    freshness: dict[str, float] = field(default_factory=dict)
    window: int = 5
    epsilon: float = 0.05
    gain: float = 0.05
    explore: float = 0.01
    policy: Policy = "jaqpot"
    pairs_cost: bool = False
    routes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per direction, where its pairs go on to probe (a chain's upper levels, each named by
    the combinations that probe there), its input path's later hops; none: its pairs are the
    query's. The batches' figures carry each hop's probes and pairs as a direction's."""
    residence: dict[str, float] = field(default_factory=dict)
    """Seconds a row stays in each direction's and hop's state (its window; a combination's,
    the shortest of its inputs'): with the rates, the states' rows (JAQPOT's |S| = λT)."""
    _history: deque[BatchStats] = field(default_factory=deque, init=False, repr=False)
    _analysed: dict[str, float] = field(default_factory=dict, init=False, repr=False)
    decision: Decision | None = field(default=None, init=False)
    """The split in force (None: exact, nothing decided yet)."""

    def observe(self, stats: BatchStats) -> Decision | None:
        """Take batch `stats`; a new decision for the next batch, or None to keep the one in
        force."""
        self._history.append(stats)
        while len(self._history) > self.window:
            self._history.popleft()
        figures = self._figures()
        if figures is None:
            return None
        if self._analysed and not self._moved(figures):
            return None
        self._analysed = figures
        proposal = self._analyse(stats.batch + 1, figures)
        current = self.decision
        if current is not None and current.exact == proposal.exact and not proposal.exact:
            # The split in force judged on today's figures, not on those it was chosen with:
            # as a window fills, each probe finds more pairs and an old split overruns.
            work, output = self._judge(current.allowances, figures)
            overruns = work > proposal.budget * (1 + self.epsilon)
            better = proposal.predicted_output > output * (1 + self.gain)
            if not overruns and not better and current.feasible == proposal.feasible:
                return None
        if current is None and proposal.exact:
            self.decision = proposal
            return None  # (already exact)
        self.decision = proposal
        return proposal

    def split(
        self, arrivals: Mapping[str, float], productivity: Mapping[str, float], budget: float
    ) -> dict[str, float]:
        """The allowances for a batch whose directions' `arrivals` are known (its rows, in the
        unit of time `budget` is for), by the pairs a probe finds and the `budget` of a
        decision: the budget then bounds this batch's work, not the average batch's (a rate
        that steps up is met in the batch it arrives in). Exact when the budget covers it."""
        figures = {f"rate:{d}": float(arrivals.get(d, 0.0)) for d in self.directions}
        figures |= {f"rho:{d}": float(productivity.get(d, 0.0)) for d in self._probing}
        return self._analyse(0, figures, budget).allowances

    def latest(self) -> tuple[float, dict[str, float]] | None:
        """The budget (work a second) and the pairs a probe found per direction and hop, as of
        the last analysis (within ε of the figures now): what a batch's own arrivals are split
        by (`split`); None before the first."""
        figures = self._analysed
        if not figures:
            return None
        budget = self.budget if self.budget is not None else figures["mu"]
        return budget, {d: figures.get(f"rho:{d}", 0.0) for d in self._probing}

    def outputs_per_probe(self, direction: str, productivity: Mapping[str, float]) -> float:
        """The query's rows a probe of `direction` yields along its path, by `productivity`
        (pairs a probe per direction and hop)."""
        out = productivity.get(direction, 0.0)
        for hop in self.routes.get(direction, ()):
            out *= productivity.get(hop, 0.0)
        return out

    @property
    def _probing(self) -> tuple[str, ...]:
        """The directions and the hops their pairs go on through."""
        hops = [h for d in self.directions for h in self.routes.get(d, ())]
        return (*self.directions, *dict.fromkeys(h for h in hops if h not in self.directions))

    def productivity(self, direction: str) -> float:
        """Pairs per probe of `direction` over the batches averaged (0 where none probed)."""
        figures = self._figures()
        return figures.get(f"rho:{direction}", 0.0) if figures else 0.0

    def _figures(self) -> dict[str, float] | None:
        """Windowed averages: per direction λ (rows/s), ρ_h (pairs per probe); μ (work/s: probes,
        and pairs with `pairs_cost`)."""
        span = sum(s.interval for s in self._history)
        busy = sum(s.seconds for s in self._history)
        if span <= 0 or busy <= 0:
            return None
        out: dict[str, float] = {}
        work = 0
        ends = {d for d in self.directions if not self.routes.get(d)}  # (its pairs: the query's)
        ends |= {r[-1] for r in self.routes.values() if r}
        for d in self._probing:
            rows = [s.directions[d] for s in self._history if d in s.directions]
            arrived = sum(r.arrived for r in rows)
            probed = sum(r.probed for r in rows)
            pairs = sum(r.pairs for r in rows)
            work += probed + (pairs if self.pairs_cost and d in ends else 0)
            if d in self.directions:
                out[f"rate:{d}"] = arrived / span
            out[f"rho:{d}"] = pairs / probed if probed else 0.0
        # μ: work served per second. A batch keeps up with its trigger when the work a second
        # of arrivals needs is at most that.
        out["mu"] = work / busy
        return out

    def _moved(self, figures: Mapping[str, float]) -> bool:
        for key, value in figures.items():
            old = self._analysed.get(key, 0.0)
            if abs(value - old) > self.epsilon * max(abs(old), 1e-9):
                return True
        return False

    def _hops(self, direction: str, figures: Mapping[str, float]) -> tuple[Hop, ...]:
        """A direction as a path: its probe, the hops its pairs go on through, and with
        `pairs_cost` the query's rows it writes (a hop of productivity 1 whose every input
        costs a unit)."""
        rows = self._held(figures) if self.freshness else {}
        # (A hop's probing rows, the combinations, are stored in its state: h.)
        later = (
            Hop(figures.get(f"rho:{h}", 0.0), h, rows.get(h, 0.0))
            for h in self.routes.get(direction, ())
        )
        hops = (Hop(figures.get(f"rho:{direction}", 0.0)), *later)
        return (*hops, Hop(1.0)) if self.pairs_cost else hops

    def _paths(self, figures: Mapping[str, float]) -> list[InputPath]:
        out = []
        for d in self.directions:
            rate = figures[f"rate:{d}"]
            out.append(InputPath(d, rate, self._hops(d, figures), rate * self.residence.get(d, 0)))
        return out

    def _held(self, figures: Mapping[str, float]) -> dict[str, float]:
        """Rows each hop's state holds when every row probes: what reaches it a second over
        the directions routed through it, times its residence."""
        rates: dict[str, float] = {}
        for d in self.directions:
            rate = figures[f"rate:{d}"] * figures.get(f"rho:{d}", 0.0)
            for hop in self.routes.get(d, ()):
                rates[hop] = rates.get(hop, 0.0) + rate
                rate *= figures.get(f"rho:{hop}", 0.0)
        return {h: r * self.residence.get(h, 0.0) for h, r in rates.items()}

    def _judge(
        self, allowances: Mapping[str, float], figures: Mapping[str, float]
    ) -> tuple[float, float]:
        """The work a second and the pairs a second of `allowances` at `figures`."""
        work = output = 0.0
        for p in self._paths(figures):
            spent = allowances.get(p.stream, 1.0) * p.capacity
            work += spent
            output += spent * p.productivity
        return work, output

    def _analyse(
        self, batch: int, figures: Mapping[str, float], budget: float | None = None
    ) -> Decision:
        paths = self._paths(figures)
        demand = sum(p.capacity for p in paths)
        if budget is None:
            budget = self.budget if self.budget is not None else figures["mu"]
        if self.mode == "exact" or budget >= demand:
            exact = {d: 1.0 for d in self.directions}
            output = sum(p.productivity * p.capacity for p in paths)
            return Decision(batch, exact, output, budget, demand)
        if self.policy == "uniform":
            share = budget / demand
            output = sum(p.productivity * p.capacity * share for p in paths)
            uniform = {d: share for d in self.directions}
            return Decision(batch, uniform, output, budget, demand)
        needed = refresh_rates(paths, self.freshness) if self.freshness else {}
        if needed is None:  # (a predicate shorter than its stream's own window: none can)
            chosen = dataclasses.replace(jaqpot(paths, budget), feasible=False)
        else:
            chosen = jaqpot(paths, budget, needed)
        allowances = {}
        for p in paths:
            share = chosen.resources.get(p.stream, 0.0) / p.capacity if p.capacity else 1.0
            allowances[p.stream] = min(max(share, self.explore), 1.0)
        return Decision(batch, allowances, chosen.output, budget, demand, chosen.feasible)
