"""The automatic hash path's skew rules: when a query leaves hash, and when it comes back — pure.

A query starts on hash partitioning by its equality key. Once one unit's input stands out (a
hot key), it leaves hash from the next batch: for the window's time bucket as part of the key
where its state spans more than two buckets (`bucket_gain`), or for the scheme the cost
formulas rank cheapest (`partition.candidates`). It comes back once the rows per key hash have
been even for `EVEN_CHECKS` checks in a row (`back_to_hash_if_even`), and for twice as many
after each return (`even_checks_needed`): a key that hovers at the leaving level would otherwise
move the query's state off hash and back every few checks.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import replace

from streamjoin.adapt.schemestate import (
    BatchCounts,
    SchemeState,
    UnitStats,
    describe,
    initial_params,
    params_of,
)
from streamjoin.partition import HashScheme, Stats, candidates

if t.TYPE_CHECKING:
    from streamjoin.plan import QueryPlan

HOT_CANDIDATES = 8.0
"""Candidates of the hot key per delta row above which its window's time bucket joins the key."""
EVEN_CHECKS = 2
"""Skew checks in a row that must find the keys even before a query the skew check moved off
hash returns to it (one even batch between hot ones would move the state twice for nothing)."""
MAX_EVEN_CHECKS = 32
"""The most even checks a return waits for, however often the query came back before."""
NOISE_SIGMAS = 4.0
"""Standard deviations of a unit's share of evenly hashed rows that chance alone may add (an
estimate: rows of one key go together, so few keys spread wider)."""


def leave_hash_if_skewed(
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
        bucket = bool(params.get("time_bucket"))
        kept = {"returns": params["returns"]} if "returns" in params else {}
        params = {**params_of(best), "units": j, "time_bucket": bucket, **kept}
    else:
        # (Calm only where the rule itself would keep hash: a hot key that one task's small
        # batches keep on hash is still hot, as `back_to_hash_if_even` judges it.)
        return _calm(state) if isinstance(best, HashScheme) else state
    params.pop("calm", None)
    params["moved"] = True
    note = {"batch": seen.batch + 1, "scheme": describe(qp, params), "skew": top}
    return replace(state, params=params, history=(*state.history, note))


def even_checks_needed(returns: int) -> int:
    """Even checks in a row before a query that came back to hash `returns` times since it
    last stayed calm returns again: `EVEN_CHECKS`, doubled by each return (a flapping route's
    damping), at most `MAX_EVEN_CHECKS`."""
    return min(MAX_EVEN_CHECKS, EVEN_CHECKS << min(returns, 8))


def _calm(state: SchemeState) -> SchemeState:
    """A query back on hash (its ``returns`` counted) that a check found calm: once it has
    stayed so for as many checks as its next return would wait for, its returns are forgotten
    (a hot key that comes much later is a new one, not the old key hovering)."""
    params = state.params
    returns = int(params.get("returns", 0))
    if not returns or params.get("moved"):
        return state
    calm = int(params.get("calm", 0)) + 1
    if calm < even_checks_needed(returns):
        return replace(state, params={**params, "calm": calm})
    forgotten = {k: v for k, v in params.items() if k not in ("calm", "returns")}
    return replace(state, params=forgotten)


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


def back_to_hash_if_even(
    qp: QueryPlan, state: SchemeState, seen: BatchCounts, warmup: int
) -> SchemeState:
    """A query the skew check moved off hash (``moved``) goes back to it, its keys' hash units
    as many as before, once the batch's rows per key hash (`seen.key_units`) have been, for
    `even_checks_needed` checks in a row, such that the rule that leaves hash would keep it:
    the scheme's copies and the time buckets' second probe cost more than hash where no key
    stands out. A check too small to tell changes nothing."""
    assert seen.key_units is not None
    loads = seen.key_units
    if sum(loads) < warmup or len(loads) < 2:
        return state
    j = len(loads)
    plain = SchemeState({**initial_params(qp, j), "units": j})
    # (Judged as a batch of several tasks: one task's batch would keep hash for a hot key too,
    # and a query whose batches straddle one task's rows would come back and leave again.)
    keys = replace(seen, units=UnitStats(loads, (0,) * j), one_task=False)
    stays = leave_hash_if_skewed(qp, plain, keys, warmup) is plain
    even = int(state.params.get("even", 0)) + 1 if stays else 0
    returns = int(state.params.get("returns", 0))
    if even < even_checks_needed(returns):
        return replace(state, params={**state.params, "even": even})
    note = {"batch": seen.batch + 1, "scheme": describe(qp, plain.params), "skew": 0.0}
    params = {**plain.params, "returns": returns + 1}
    return SchemeState(params, history=(*state.history, note))


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
