"""A two-way query's partitioning scheme, batch by batch: the policies that change it — pure.

The runtime routes rows under the scheme in force (`runtime.routing`) and counts the rows each
unit received; `next_scheme` takes those counts and returns the scheme for the next batch:

- join matrix: Squall's doubling rule reshapes (n, m) (`MatrixController`);
- join biclique: BiStream's two thresholds add or remove units per side (`ElasticController`);
- range: equi-depth bounds from a batch's quantiles (of its rows, or a sample of the join
  operator's), taken while there are none or its ranges' rows are uneven;
- the automatic hash path: left for a hot key and taken again once it has passed
  (`adapt.hashskew`).

The scheme's state, as the manifest carries it, is `adapt.schemestate`'s.
"""

from __future__ import annotations

import typing as t
from dataclasses import replace

from streamjoin.adapt.elastic import ElasticController
from streamjoin.adapt.hashskew import back_to_hash_if_even, leave_hash_if_skewed
from streamjoin.adapt.matrix import DEFAULT_WARMUP, MatrixController
from streamjoin.adapt.schemestate import (
    BatchCounts,
    SchemeState,
    UnitStats,
    biclique_split,
    describe,
)

if t.TYPE_CHECKING:
    from streamjoin.plan import QueryPlan

UNIT_ROWS = 1_000_000
"""Default capacity of a biclique unit, in stored rows (the query option ``unit_rows``)."""
MAX_UNITS = 256
WARMUP = DEFAULT_WARMUP
"""Rows a controller sees before its first decision (Squall's default)."""


def next_scheme(qp: QueryPlan, state: SchemeState, seen: BatchCounts) -> SchemeState:
    """The scheme for the batch after `seen.batch`, by the policy of the scheme in force (the
    query options ``adapt``, ``partitioning`` and ``unit_rows`` steer them)."""
    warmup = WARMUP
    name = state.params.get("name")
    adapt = qp.query.option("adapt", "true") == "true"
    forced = qp.query.option("partitioning", "auto")
    if state.params.get("moved") and seen.key_units is not None:
        state = back_to_hash_if_even(qp, state, seen, warmup)
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
        return leave_hash_if_skewed(qp, state, seen, warmup)
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
        floor = biclique_split(int(params.get("units", 2)))[0 if side == "left" else 1]
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


RANGE_SPREAD = 1.5
"""A range query takes new bounds once its busiest range's rows exceed this times the mean."""


def _ranges_uneven(units: UnitStats | None) -> bool:
    """Whether a range query's rows per range (stored, else probing) call for new bounds."""
    if units is None:
        return True
    loads = units.store if any(units.store) else units.probe
    return bool(loads) and max(loads) > RANGE_SPREAD * sum(loads) / len(loads)
