"""A two-way query's partitioning scheme, batch by batch: the policies that change it — pure.

The runtime routes rows under the scheme in force (`runtime.routing`) and counts the rows each
unit received; `next_scheme` takes those counts and returns the scheme for the next batch:

- join matrix: Squall's doubling rule reshapes (n, m) (`MatrixController`);
- join biclique: BiStream's two thresholds add or remove units per side (`ElasticController`);
- range: equi-depth bounds from a batch's quantiles (of its rows, or a sample of the join
  operator's), taken while there are none or its ranges' rows are uneven;
- the automatic hash path: left once one unit stands out, for the window's time bucket as part
  of the key (where the state spans more than two buckets, `bucket_gain`) or for the scheme the
  cost formulas rank cheapest (`partition.candidates`); and taken again once the rows per key
  hash have been even for `EVEN_CHECKS` checks in a row (`_back_to_hash_if_even`).

A scheme's parameters (``params``) are JSON-able, so the manifest carries them from batch to
batch; `scheme_from_params` and `params_of` convert them to and from `partition` schemes.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass, field, replace

from streamjoin.adapt.elastic import ElasticController
from streamjoin.adapt.matrix import DEFAULT_WARMUP, MatrixController
from streamjoin.partition import (
    BicliqueScheme,
    ContRandScheme,
    HashScheme,
    MatrixScheme,
    RangeScheme,
    Scheme,
    Stats,
    candidates,
    optimal_shape,
)

if t.TYPE_CHECKING:
    from streamjoin.plan import QueryPlan

UNIT_ROWS = 1_000_000
"""Default capacity of a biclique unit, in stored rows (the query option ``unit_rows``)."""
MAX_UNITS = 256
WARMUP = DEFAULT_WARMUP
"""Rows a controller sees before its first decision (Squall's default)."""
HOT_CANDIDATES = 8.0
"""Candidates of the hot key per delta row above which its window's time bucket joins the key."""
EVEN_CHECKS = 2
"""Skew checks in a row that must find the keys even before a query the skew check moved off
hash returns to it (one even batch between hot ones would move the state twice for nothing)."""
COUNTERS = frozenset({"even"})
"""Keys of a scheme's ``params`` that count checks between batches and place no row (an index
built for a placement outlives their changes)."""
NOISE_SIGMAS = 4.0
"""Standard deviations of a unit's share of evenly hashed rows that chance alone may add (an
estimate: rows of one key go together, so few keys spread wider)."""


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
        left, right = _biclique_split(units)
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


def next_scheme(qp: QueryPlan, state: SchemeState, seen: BatchCounts) -> SchemeState:
    """The scheme for the batch after `seen.batch`, by the policy of the scheme in force (the
    query options ``adapt``, ``partitioning`` and ``unit_rows`` steer them)."""
    warmup = WARMUP
    name = state.params.get("name")
    adapt = qp.query.option("adapt", "true") == "true"
    forced = qp.query.option("partitioning", "auto")
    if state.params.get("moved") and seen.key_units is not None:
        state = _back_to_hash_if_even(qp, state, seen)
        if not state.params.get("moved"):  # (back on hash: the batch's counts were the scheme's)
            return state
    if name == "matrix" and adapt:
        return _reshape_matrix(qp, state, seen, warmup)
    if name == "biclique" and adapt and seen.units is not None:
        return _scale_biclique(qp, state, seen.batch, seen.units)
    if name == "range" and seen.quantiles:
        if state.params.get("bounds") and not _ranges_uneven(seen.units):
            return state  # (new bounds move the join operator's rows: only where they pay)
        bounds = sorted({float(x) for x in seen.quantiles if x is not None})
        return replace(state, params={**state.params, "bounds": bounds})
    if forced == "auto" and name == "hash" and seen.units is not None and adapt:
        return _leave_hash_if_skewed(qp, state, seen, warmup)
    return state


def _reshape_matrix(
    qp: QueryPlan, state: SchemeState, seen: BatchCounts, warmup: int
) -> SchemeState:
    """Squall's doubling rule: once a side has doubled since the last decision, move to the
    shape of least ILF for the new totals."""
    params = state.params
    if state.controller:
        ctl = MatrixController.from_dict(state.controller)
    else:
        shape = (int(params["n"]), int(params["m"]))
        ctl = MatrixController(shape[0] * shape[1], start=shape, warmup=warmup)
    step = ctl.observe(seen.batch, seen.left_rows, seen.right_rows)
    state = replace(state, controller=ctl.to_dict())
    if step is None:
        return state
    n, m = step.new_shape
    params = {**params, "n": n, "m": m}
    note = {"batch": step.batch_effective, "scheme": describe(qp, params), "ilf": step.ilf_new}
    return replace(state, params=params, history=(*state.history, note))


def _scale_biclique(qp: QueryPlan, state: SchemeState, batch: int, units: UnitStats) -> SchemeState:
    """BiStream's elastic scaling, per side: a side whose units hold more than T_h of their
    capacity (`unit_rows` rows) for N batches in a row gets units added, one under T_l
    gets units removed (Eq. 7). Rows are routed when read, so added units fill and removed
    ones empty at the next batch: no unit has to drain."""
    params = state.params
    capacity = float(qp.query.option("unit_rows") or UNIT_ROWS)
    counts = {"left": int(params["left"]), "right": int(params["right"])}
    offsets = {"left": 0, "right": counts["left"]}
    saved = state.controller.get("elastic", {})
    elastic: dict[str, t.Any] = {}
    history = list(state.history)
    for side in ("left", "right"):
        k = counts[side]
        # Units are Spark tasks, not machines: never fewer than the query asked for (fewer
        # would cut parallelism to save nothing), more when its units fill up.
        floor = _biclique_split(int(params.get("units", 2)))[0 if side == "left" else 1]
        ctl = (
            ElasticController.from_dict(saved[side])
            if side in saved
            else ElasticController(side, k, max_units=max(MAX_UNITS, k), min_units=min(floor, k))
        )
        loads = {u: units.store[offsets[side] + u] / capacity for u in range(k)}
        step = ctl.observe(batch, loads)
        if step is not None:
            counts[side] = len(step.units_after)
            ctl = ElasticController(
                side,
                counts[side],
                max_units=max(MAX_UNITS, counts[side]),
                min_units=min(floor, counts[side]),
            )
            history.append({"batch": step.batch_effective, "side": side, "units": counts[side]})
        elastic[side] = ctl.to_dict()
    return SchemeState(
        params={**params, "left": counts["left"], "right": counts["right"]},
        controller={**state.controller, "elastic": elastic},
        history=tuple(history),
    )


def _leave_hash_if_skewed(
    qp: QueryPlan, state: SchemeState, seen: BatchCounts, warmup: int
) -> SchemeState:
    """Hash partitioning while the keys are even; once one unit's input stands out, the
    window's time bucket joins the keys if the query has one (a hot key's rows spread over
    the buckets of their event times, and each meets only the rows of its own and the
    neighbouring buckets), else the cheapest scheme by the cost formulas for the observed
    statistics (from the next batch), unless one task probed the whole batch (a scheme would
    spread no work, only copy rows: hash stays until batches need several tasks)."""
    assert seen.units is not None  # (`next_scheme` calls this with counts only)
    loads = seen.units.per_unit
    if sum(loads) < warmup or len(loads) < 2:
        return state
    j, top = len(loads), hot_share(loads)
    delta = (seen.left_rows, seen.right_rows)
    stats = Stats(
        left_rows=seen.state_rows[0],
        right_rows=seen.state_rows[1],
        left_delta=delta[0],
        right_delta=delta[1],
        top_key_share=min(1.0, top),
        units=j,
    )
    best = candidates(bool(qp.parts.equi), None, stats)[0].scheme
    params = state.params
    timed = qp.query.option("time_buckets", "auto") == "auto"
    gain = bucket_gain(qp, seen.state_span_us, seen.state_rows)
    can_bucket = timed and gain > 0 and not params.get("time_bucket")
    # A delta row meets, on average, top * top * (the other side's stored and new rows) of
    # the hot key, every one a candidate checked against the window; time buckets cut
    # `gain` of them (all but the rows of two buckets) for one more probe row per delta row.
    hot = top * top * (sum(seen.state_rows) + sum(delta)) / 2 * gain >= HOT_CANDIDATES
    if can_bucket and (hot or not isinstance(best, HashScheme)):
        params = {**params, "time_bucket": True}
    elif not isinstance(best, HashScheme) and not seen.one_task:
        params = {**params_of(best), "units": j, "time_bucket": bool(params.get("time_bucket"))}
    else:
        return state
    params["moved"] = True
    note = {"batch": seen.batch + 1, "scheme": describe(qp, params), "skew": top}
    return replace(state, params=params, history=(*state.history, note))


RANGE_SPREAD = 1.5
"""A range query takes new bounds once its busiest range's rows exceed this times the mean."""


def _ranges_uneven(units: UnitStats | None) -> bool:
    """Whether a range query's rows per range (stored, else probing) call for new bounds."""
    if units is None:
        return True
    loads = units.store if any(units.store) else units.probe
    return bool(loads) and max(loads) > RANGE_SPREAD * sum(loads) / len(loads)


def hot_share(loads: t.Sequence[int]) -> float:
    """The share of the rows that one hot key carries, from rows per hash unit `loads`: one
    hot key puts share = top + (1 - top) / J on its unit; solve for top. Even keys still
    spread a batch's rows unevenly by chance (a binomial's deviation): a share within
    `NOISE_SIGMAS` of it is no hot key (0.0), or a live stream's small batches would move a
    query off hash by chance (and shuffle the state every batch under the new scheme)."""
    total, j = sum(loads), len(loads)
    if total == 0 or j < 2:
        return 0.0
    share = max(loads) / total
    noise = NOISE_SIGMAS * math.sqrt((1 / j) * (1 - 1 / j) / total)
    return (share - 1 / j) / (1 - 1 / j) if share - 1 / j > noise else 0.0


def _back_to_hash_if_even(qp: QueryPlan, state: SchemeState, seen: BatchCounts) -> SchemeState:
    """A query the skew check moved off hash (``moved``) goes back to it, its keys' hash units
    as many as before, once the batch's rows per key hash (`seen.key_units`) have been, for
    `EVEN_CHECKS` checks in a row, such that the rule that leaves hash would keep it: the
    scheme's copies and the time buckets' second probe cost more than hash where no key stands
    out. A check too small to tell changes nothing."""
    assert seen.key_units is not None
    loads = seen.key_units
    if sum(loads) < WARMUP or len(loads) < 2:
        return state
    j = len(loads)
    plain = SchemeState({**initial_params(qp, j), "units": j})
    # (Judged as a batch of several tasks: one task's batch would keep hash for a hot key too,
    # and a query whose batches straddle one task's rows would come back and leave again.)
    keys = replace(seen, units=UnitStats(loads, (0,) * j), one_task=False)
    stays = _leave_hash_if_skewed(qp, plain, keys, WARMUP) is plain
    even = int(state.params.get("even", 0)) + 1 if stays else 0
    if even < EVEN_CHECKS:
        return replace(state, params={**state.params, "even": even})
    note = {"batch": seen.batch + 1, "scheme": describe(qp, plain.params), "skew": 0.0}
    return replace(plain, history=(*state.history, note))


def bucket_gain(
    qp: QueryPlan, spans: tuple[int | None, int | None], rows: tuple[int, int] = (0, 0)
) -> float:
    """The share of a key's stored rows that keying by the window's time bucket spares a
    delta row: it meets at most two buckets' rows (its window, one bucket wide, overlaps two),
    so of a side whose rows span `span` of event time it still meets ``2 * width / span``;
    nothing is spared where they span two buckets or less (a short window's state: the window
    and the watermark's delay). Each side's share weighs by its stored rows (a delta row meets
    the other side's); a side of unknown span counts as all spared. 0 without a time band."""
    if qp.time_band is None:
        return 0.0
    width = qp.time_band.width
    gains = [1.0 if s is None else max(0.0, 1.0 - 2 * width / max(s, 1)) for s in spans]
    weights = rows if sum(rows) > 0 else (1, 1)
    return sum(g * w for g, w in zip(gains, weights, strict=True)) / sum(weights)


def describe(qp: QueryPlan, params: t.Mapping[str, t.Any]) -> str:
    """The scheme of `params` in words."""
    scheme = scheme_from_params(params)
    units = int(params.get("units", 1))
    text = scheme.describe() if scheme is not None else f"hash on {units} units"
    if params.get("time_bucket") and qp.time_band is not None:
        text += f", keyed by event-time bucket too ({qp.time_band.width / 1e6:g} s)"
    return text


def _biclique_split(units: int) -> tuple[int, int]:
    """Left and right units of a biclique over `units` places."""
    half = max(1, units // 2)
    return half, max(1, units - half)


def _pow2_floor(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p
