"""A two-way query's partitioning scheme as the manifest carries it from batch to batch — pure.

A scheme's parameters (``params``) are JSON-able; `scheme_from_params` and `params_of` convert
them to and from `partition` schemes. `SchemeState` adds its controllers' state and its recent
changes; `BatchCounts` is what one batch tells the policies that change it (`adapt.schemes`).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from streamjoin.partition import (
    BicliqueScheme,
    ContRandScheme,
    MatrixScheme,
    RangeScheme,
    Scheme,
    optimal_shape,
)

if t.TYPE_CHECKING:
    from streamjoin.plan import QueryPlan

COUNTERS = frozenset({"even", "returns", "calm"})
"""Keys of a scheme's ``params`` that count checks between batches and place no row (an index
built for a placement outlives their changes)."""


@dataclass(frozen=True, slots=True)
class UnitStats:
    """Rows each place received in one batch: probing delta rows and stored rows read."""

    probe: tuple[int, ...]
    store: tuple[int, ...]
    row_bytes: float = 0.0
    """Mean bytes of a stored row of the query's streams (their state files' bytes / rows)."""

    @property
    def store_bytes(self) -> tuple[int, ...]:
        """State bytes each unit read: its stored rows at the mean bytes of a stored row."""
        return tuple(round(s * self.row_bytes) for s in self.store)

    @property
    def per_unit(self) -> tuple[int, ...]:
        """Input rows per unit (what one task of the join reads)."""
        return tuple(p + s for p, s in zip(self.probe, self.store, strict=True))

    @property
    def skew(self) -> float:
        """Max / mean input per unit (1.0 = perfectly even)."""
        loads = self.per_unit
        mean = sum(loads) / len(loads) if loads else 0.0
        return max(loads) / mean if mean else 1.0


@dataclass(frozen=True)
class SchemeState:
    """A query's scheme (``params``), its controllers' state and its recent changes."""

    params: dict[str, t.Any]
    controller: dict[str, t.Any] = field(default_factory=dict)
    history: tuple[dict[str, t.Any], ...] = ()


@dataclass(frozen=True)
class BatchCounts:
    """What one batch tells a query's policies."""

    batch: int
    left_rows: int
    right_rows: int
    units: UnitStats | None = None
    quantiles: t.Sequence[float] = ()
    state_rows: tuple[int, int] = (0, 0)
    state_span_us: tuple[int | None, int | None] = (None, None)
    """Per side, the event time that the stored rows this batch's rows could meet span, and
    its own (None: unknown)."""
    one_task: bool = False
    """Whether one task probed the batch's rows of every partition (a small batch): a scheme's
    placement spreads no work there, it only copies rows."""
    key_units: tuple[int, ...] | None = None
    """For a query the skew check moved off hash (``moved``), the batch's rows per hash unit
    of its equality key, as hash would have placed them (None: not counted this batch)."""


def scheme_from_params(params: t.Mapping[str, t.Any]) -> Scheme | None:
    """The scheme described by `params` (as stored in the manifest); None for the hash path."""
    name = params.get("name", "hash")
    if name == "hash":
        return None
    if name == "matrix":
        return MatrixScheme(int(params["n"]), int(params["m"]))
    if name == "biclique":
        return BicliqueScheme(int(params["left"]), int(params["right"]))
    if name == "contrand":
        return ContRandScheme(
            int(params["left"]), int(params["right"]), int(params["d"]), int(params["e"])
        )
    if name == "range":
        return RangeScheme(
            tuple(float(b) for b in params["bounds"]), float(params["lo"]), float(params["hi"])
        )
    msg = f"unknown partitioning scheme {name!r} in the manifest"
    raise ValueError(msg)


def params_of(scheme: Scheme) -> dict[str, t.Any]:
    """The manifest form of `scheme` (inverse of `scheme_from_params`)."""
    if isinstance(scheme, MatrixScheme):
        return {"name": "matrix", "n": scheme.n, "m": scheme.m}
    if isinstance(scheme, BicliqueScheme):
        return {"name": "biclique", "left": scheme.left_units, "right": scheme.right_units}
    if isinstance(scheme, ContRandScheme):
        return {
            "name": "contrand",
            "left": scheme.left_units,
            "right": scheme.right_units,
            "d": scheme.d,
            "e": scheme.e,
        }
    if isinstance(scheme, RangeScheme):
        return {"name": "range", "bounds": list(scheme.bounds), "lo": scheme.lo, "hi": scheme.hi}
    return {"name": "hash"}


def initial_params(qp: QueryPlan, units: int) -> dict[str, t.Any]:
    """The scheme a query starts with: the forced one, or the engine's default path."""
    forced = qp.query.option("partitioning", "auto")
    timed = qp.query.option("time_buckets", "auto") == "true"
    if forced in ("auto", "hash"):
        return {"name": "hash", "time_bucket": True} if timed else {"name": "hash"}
    if forced == "matrix":
        n, m = optimal_shape(1.0, 1.0, _pow2_floor(units))
        return {"name": "matrix", "n": n, "m": m}
    if forced == "biclique":
        left, right = biclique_split(units)
        return {"name": "biclique", "left": left, "right": right}
    if forced == "contrand":
        half = max(1, units // 2)
        return {
            "name": "contrand",
            "left": half,
            "right": max(1, units - half),
            "d": max(1, half // 2),
            "e": max(1, (units - half) // 2),
        }
    band = qp.band
    if band is None:  # the planner rejects this; kept for a hand-made plan
        msg = f"query {qp.query.name}: range partitioning needs a band predicate"
        raise ValueError(msg)
    return {"name": "range", "bounds": [], "lo": band.lo, "hi": band.hi}


def describe(qp: QueryPlan, params: t.Mapping[str, t.Any]) -> str:
    """The scheme of `params` in words."""
    scheme = scheme_from_params(params)
    units = int(params.get("units", 1))
    text = scheme.describe() if scheme is not None else f"hash on {units} units"
    if params.get("time_bucket") and qp.time_band is not None:
        text += f", keyed by event-time bucket too ({qp.time_band.width / 1e6:g} s)"
    return text


def biclique_split(units: int) -> tuple[int, int]:
    """Left and right units of a biclique over `units` places."""
    half = max(1, units // 2)
    return half, max(1, units - half)


def _pow2_floor(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p
