"""BiStream's elastic scale-out and scale-in: the two-phase scaling protocol (Lin et al., §5).

BiStream's resource manager watches each group of store units independently (a side of the join
biclique, or one ContRand subgroup of it: run one controller per group). Periodically it asks
every unit of the group for its memory load volume MLV(p_i) and computes the group's load

    τ = Σ_i MLV(p_i) / (k·C)

for k homogeneous units of capacity C. The group is overloaded when τ > T_h and underloaded when
τ < T_l. To ignore short bursts, a decision is only acted on once it has been made N consecutive
times (the paper counts identical successive decisions and resets the count on any other). It
then changes the number of units by Eq. 7,

    Δ = Σ_i MLV(p_i) / (Ψ·C) − k = (τ/Ψ − 1)·k,   Ψ ∈ (T_l, T_h),

Ψ being the load the group should carry after the change (paper's experiment: T_h = 0.8,
T_l = 0.3, Ψ = 0.6, N = 3; at k = 8 and τ = 0.9 it adds 4 units).

Adapted to micro-batches: a check is one committed batch (the batch id is the clock), and a
unit's *load* is ``MLV / C``, the fraction of its capacity in use, e.g. rows stored in the unit
over the rows a unit may hold. Any per-unit level normalised so that 1.0 is a full unit works the
same (a unit's share of the batch's store work over what one task can take per batch, say).
The paper leaves the rounding of Δ open; here the group gets ``⌈Σ load / Ψ⌉`` units (so the load
after the change is at most Ψ), clamped to [min_units, max_units].

Scaling without loss or duplication. For full-history state, removed units' data must be
redistributed to the remaining ones and added units must receive their share (``migrate=True``,
the paper's scaling phase). For windowed state nothing moves (§6.4): added units take new stores,
and drained units receive no new stores from ``batch_effective`` on but stay probed until all
their data has expired; only then are they released. While units drain, τ counts their load in
the sum but not in k: it is the load the store-receiving units settle at once the drained data
has expired, so a scale-in is not repeated just because the drained data has not aged out yet.

Example:
    >>> c = ElasticController("left", 8, max_units=32)
    >>> [c.observe(b, {u: 0.9 for u in range(8)}) for b in range(2)]
    [None, None]
    >>> step = c.observe(2, {u: 0.9 for u in range(8)})  # third consecutive overload
    >>> step.added, len(step.units_after), step.batch_effective
    ((8, 9, 10, 11), 12, 3)
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass

from streamjoin.adapt import _codec

if t.TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

Verdict = t.Literal["out", "in", "hold"]
"""One check's reading: ``out`` when τ > T_h (overloaded), ``in`` when τ < T_l (underloaded),
else ``hold``."""

_VERDICTS: tuple[Verdict, ...] = t.get_args(Verdict)
_KIND = "elastic-controller"
_VERSION = 1
# Eq. 7 in floating point: 4 units at load 1.05 give 4.2/0.6 = 7.000000000000001, whose ceiling
# would add a fourth unit where three bring the load to Ψ exactly.
_ROUNDING_SLACK = 1e-9


@dataclass(frozen=True, slots=True)
class ScaleStep:
    """A confirmed change of a group's store units.

    Attributes:
        batch_effective: first batch whose stores follow `units_after` (the deciding batch + 1).
        side: the group's label (a join side, or side and subgroup).
        added: new unit ids; they receive stores from `batch_effective` on.
        drained: unit ids that receive no stores from `batch_effective` on.
        units_after: the store-receiving unit ids from `batch_effective` on, ascending.
        migrate: True for full-history state: the runtime must move the drained units' data to
            `units_after` and rebalance onto the added units. False for windowed state: nothing
            moves, drained units stay probed until their data expires.
        load: τ at the confirming check.
    """

    batch_effective: int
    side: str
    added: tuple[int, ...]
    drained: tuple[int, ...]
    units_after: tuple[int, ...]
    migrate: bool
    load: float


class ElasticController:
    """The 2PS resource manager for one group of store units (module docstring).

    Call `observe` once per committed batch, in batch order. Unit ids are never reused: a slice
    written to a unit under an old epoch keeps meaning that unit.

    Args:
        side: label of the group, copied into each `ScaleStep`.
        units: the initial store-receiving units: a count k (ids 0..k−1) or the ids.
        max_units: most store-receiving units the group may have.
        high: T_h, overload threshold on τ.
        low: T_l, underload threshold on τ.
        target: Ψ, the load after a change, ``low < target < high``.
        confirmations: N, identical consecutive verdicts needed to act (1 acts at once).
        min_units: fewest store-receiving units the group may have (at least 1).
        migrate: True for full-history state (see `ScaleStep.migrate`).
    """

    __slots__ = (
        "_active",
        "_confirmations",
        "_draining",
        "_high",
        "_last_batch",
        "_low",
        "_max_units",
        "_migrate",
        "_min_units",
        "_next_id",
        "_side",
        "_streak",
        "_streak_verdict",
        "_target",
    )

    def __init__(
        self,
        side: str,
        units: int | Iterable[int],
        *,
        max_units: int,
        high: float = 0.8,
        low: float = 0.3,
        target: float = 0.6,
        confirmations: int = 3,
        min_units: int = 1,
        migrate: bool = False,
    ) -> None:
        ids = tuple(range(units)) if isinstance(units, int) else tuple(sorted(units))
        if len(set(ids)) != len(ids) or any(u < 0 for u in ids):
            msg = f"unit ids must be distinct and >= 0, got {ids}"
            raise ValueError(msg)
        if not 0.0 < low < target < high:
            msg = f"thresholds must satisfy 0 < low < target < high, got {low}, {target}, {high}"
            raise ValueError(msg)
        if confirmations < 1:
            msg = f"confirmations must be >= 1, got {confirmations}"
            raise ValueError(msg)
        if not 1 <= min_units <= len(ids) <= max_units:
            msg = (
                f"need 1 <= min_units <= units <= max_units, "
                f"got {min_units} <= {len(ids)} <= {max_units}"
            )
            raise ValueError(msg)
        self._side = side
        self._high, self._low, self._target = float(high), float(low), float(target)
        self._confirmations = confirmations
        self._min_units, self._max_units = min_units, max_units
        self._migrate = migrate
        self._active: set[int] = set(ids)
        self._draining: dict[int, int] = {}  # unit id -> first batch without stores
        self._next_id = max(ids) + 1
        self._streak_verdict: Verdict = "hold"
        self._streak = 0
        self._last_batch: int | None = None

    @property
    def side(self) -> str:
        """The group's label."""
        return self._side

    @property
    def units(self) -> tuple[int, ...]:
        """The store-receiving unit ids, ascending."""
        return tuple(sorted(self._active))

    @property
    def draining(self) -> tuple[int, ...]:
        """Units that take no more stores but still hold unexpired data, ascending."""
        return tuple(sorted(self._draining))

    @property
    def streak(self) -> tuple[Verdict, int]:
        """The current verdict and how many consecutive checks made it."""
        return self._streak_verdict, self._streak

    def wanted(self, unit_loads: Mapping[int, float]) -> int:
        """The units that bring `unit_loads` to the target load (Eq. 7), within the bounds."""
        want = math.ceil(math.fsum(unit_loads.values()) / self._target - _ROUNDING_SLACK)
        return min(max(want, self._min_units), self._max_units)

    def interrupt(self) -> None:
        """A check that counts for neither direction: the next streak starts again."""
        self._streak_verdict, self._streak = "hold", 0

    @property
    def last_batch(self) -> int | None:
        """The last batch observed, or None before the first."""
        return self._last_batch

    def load(self, unit_loads: Mapping[int, float]) -> float:
        """τ: the summed load of every reported unit over the number of store-receiving units."""
        return math.fsum(unit_loads.values()) / len(self._active)

    def observe(self, batch: int, unit_loads: Mapping[int, float]) -> ScaleStep | None:
        """One check (the requesting phase) after a committed batch.

        Args:
            batch: the batch id; strictly greater than the previous call's.
            unit_loads: load of every store-receiving unit, and of the draining units that still
                hold data. A draining unit reported at 0, or no longer reported, is released.

        Returns:
            The step to take from ``batch + 1`` on, or None.
        """
        self._check(batch, unit_loads)
        self._last_batch = batch
        for unit in [u for u in self._draining if unit_loads.get(u, 0.0) == 0.0]:
            del self._draining[unit]
        tau = self.load(unit_loads)
        verdict: Verdict = "out" if tau > self._high else "in" if tau < self._low else "hold"
        if verdict == self._streak_verdict:
            self._streak += 1
        else:
            self._streak_verdict, self._streak = verdict, 1
        if verdict == "hold" or self._streak < self._confirmations:
            return None
        self._streak_verdict, self._streak = "hold", 0
        want = self.wanted(unit_loads)
        k = len(self._active)
        if (verdict == "out" and want <= k) or (verdict == "in" and want >= k):
            return None  # clamped: nothing left to add (or remove)
        added = tuple(range(self._next_id, self._next_id + max(want - k, 0)))
        self._next_id += len(added)
        # Drain the least-loaded units: least data to migrate, or least to wait for.
        by_load = sorted(self._active, key=lambda u: (unit_loads[u], -u))
        drained = tuple(sorted(by_load[: max(k - want, 0)]))
        self._active.difference_update(drained)
        self._active.update(added)
        if not self._migrate:
            self._draining.update(dict.fromkeys(drained, batch + 1))
        return ScaleStep(batch + 1, self._side, added, drained, self.units, self._migrate, tau)

    def _check(self, batch: int, unit_loads: Mapping[int, float]) -> None:
        if self._last_batch is not None and batch <= self._last_batch:
            msg = f"batch {batch} observed after batch {self._last_batch}: observe in batch order"
            raise ValueError(msg)
        unknown = set(unit_loads) - self._active - set(self._draining)
        if unknown:
            msg = f"{self._side}: loads reported for unknown units {sorted(unknown)} in {batch}"
            raise ValueError(msg)
        missing = self._active - set(unit_loads)
        if missing:
            msg = f"{self._side}: no load reported for units {sorted(missing)} in batch {batch}"
            raise ValueError(msg)
        bad = {u: v for u, v in unit_loads.items() if not (v >= 0.0 and math.isfinite(v))}
        if bad:
            msg = f"{self._side}: loads must be finite and >= 0, got {bad} in batch {batch}"
            raise ValueError(msg)

    def to_dict(self) -> dict[str, t.Any]:
        """Configuration and state as a JSON-able dict (`from_dict` restores it exactly)."""
        return {
            "kind": _KIND,
            "version": _VERSION,
            "side": self._side,
            "high": self._high,
            "low": self._low,
            "target": self._target,
            "confirmations": self._confirmations,
            "min_units": self._min_units,
            "max_units": self._max_units,
            "migrate": self._migrate,
            "units": list(self.units),
            "draining": [[u, self._draining[u]] for u in self.draining],
            "next_id": self._next_id,
            "streak_verdict": self._streak_verdict,
            "streak": self._streak,
            "last_batch": self._last_batch,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, t.Any]) -> ElasticController:
        """The controller `to_dict` wrote, ready to observe the batch after `last_batch`."""
        _codec.check_kind(data, _KIND, _VERSION)
        units = _codec.get_ints(data, "units")
        c = cls(
            _codec.get_str(data, "side"),
            units,
            max_units=_codec.get_int(data, "max_units"),
            high=_codec.get_float(data, "high"),
            low=_codec.get_float(data, "low"),
            target=_codec.get_float(data, "target"),
            confirmations=_codec.get_int(data, "confirmations"),
            min_units=_codec.get_int(data, "min_units"),
            migrate=_codec.get_bool(data, "migrate"),
        )
        draining: dict[int, int] = {}
        for item in _codec.get_list(data, "draining"):
            pair = _codec.get_ints({"draining": item}, "draining")
            if len(pair) != 2:
                msg = f"state key 'draining' needs [unit, batch] pairs, got {item!r}"
                raise ValueError(msg)
            draining[pair[0]] = pair[1]
        c._draining = draining
        c._next_id = _codec.get_int(data, "next_id")
        verdict = _codec.get_str(data, "streak_verdict")
        if verdict not in _VERDICTS:
            msg = f"state key 'streak_verdict' must be one of {_VERDICTS}, got {verdict!r}"
            raise ValueError(msg)
        c._streak_verdict = verdict
        c._streak = _codec.get_int(data, "streak")
        c._last_batch = _codec.get_opt_int(data, "last_batch")
        return c

    def __repr__(self) -> str:
        return (
            f"ElasticController({self._side!r}, units={list(self.units)}, "
            f"draining={list(self.draining)}, streak={self.streak})"
        )
