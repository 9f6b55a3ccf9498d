"""Predicted per-batch cost of each partitioning scheme, and the ranked list to choose from.

The cost model, and what it assumes:

- **A batch takes as long as its busiest unit** (a Spark stage ends with its slowest task). The
  primary cost is ``max_unit_input``: the tuples the busiest unit reads in one batch, that is its
  stored state of both sides (which the delta's probes scan or hash) plus the delta rows routed to
  it (each (row, place) copy once, whether it is stored there, probes there, or both). For the
  matrix this is Squall's ILF over state + delta (§3.3); for the biclique it is BiStream's
  per-unit input ``In(R_{k,i})`` (§4) with rates replaced by batch sizes.
- **Join work and output are not modelled**: they depend on the predicate's selectivity, which
  the statistics do not carry. Content-insensitive schemes (matrix, biclique) spread them
  evenly in expectation (Squall §1.5), content-sensitive ones concentrate them with the input.
- **Tags are uniform**: every ``pmod(tag, k)`` choice is uniform and independent of the key.
- **Keys hash uniformly except one hot key** carrying ``top_key_share`` of the rows of *both*
  sides (the worst case: the hot keys coincide). A hash unit holding the hot key reads
  ``top_key_share + (1 - top_key_share)/units`` of everything.
- **Range partitioning** sees the value distribution through ``Stats.value_sample`` (both sides
  pooled, or evenly spaced quantiles such as ``DataFrame.approxQuantile`` gives), assumed
  representative of state and delta alike; without a sample a uniform spread is assumed.
- ``moved_bytes`` is the bytes of delta copies shuffled per batch (BiStream's intermediate
  bandwidth, Eq. 5 and 6); ``stored_bytes`` the live state with its replicas (Squall's J·ILF,
  BiStream Eq. 1 and 2). Neither enters the ranking except as the tie-break.
- Migration cost of switching schemes is not part of an estimate (``adapt/`` weighs it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from streamjoin.partition.cost import (
    bandwidth_biclique,
    bandwidth_matrix,
    ilf,
    memory_biclique,
    memory_matrix,
    optimal_shape,
)
from streamjoin.partition.ranges import RangeScheme, range_bounds, range_of
from streamjoin.partition.scheme import (
    BicliqueScheme,
    ContRandScheme,
    HashScheme,
    MatrixScheme,
    Scheme,
    Side,
)


@dataclass(frozen=True, slots=True)
class Stats:
    """What the driver knows about one join when it picks a scheme.

    Attributes:
        left_rows: live state tuples of the left side (R).
        right_rows: live state tuples of the right side (S).
        left_delta: left rows per batch.
        right_delta: right rows per batch.
        left_size: bytes per left tuple.
        right_size: bytes per right tuple.
        top_key_share: fraction (0..1) of rows carrying the most frequent equality-key value;
            0 means unknown or uniform.
        units: available parallel units (Spark tasks).
        value_sample: band values of both sides pooled (a sample, or evenly spaced quantiles),
            for the range scheme's bounds and load; empty = unknown.
    """

    left_rows: float
    right_rows: float
    left_delta: float
    right_delta: float
    left_size: float = 1.0
    right_size: float = 1.0
    top_key_share: float = 0.0
    units: int = 1
    value_sample: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("left_rows", "right_rows", "left_delta", "right_delta"):
            x = getattr(self, name)
            if not (math.isfinite(x) and x >= 0):
                msg = f"{name} must be a finite number >= 0, got {x!r}"
                raise ValueError(msg)
        for name in ("left_size", "right_size"):
            x = getattr(self, name)
            if not (math.isfinite(x) and x > 0):
                msg = f"{name} must be a finite number > 0, got {x!r}"
                raise ValueError(msg)
        if not 0.0 <= self.top_key_share <= 1.0:
            msg = f"top_key_share must be within [0, 1], got {self.top_key_share!r}"
            raise ValueError(msg)
        if not isinstance(self.units, int) or self.units < 1:
            msg = f"units must be an integer >= 1, got {self.units!r}"
            raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class Estimate:
    """The predicted cost of one batch under one scheme.

    Attributes:
        scheme: the scheme, with its parameters.
        max_unit_input: tuples the busiest unit reads per batch (stored state + delta copies).
        stored_bytes: total state bytes, replicas included.
        moved_bytes: bytes of delta copies shuffled per batch.
        reason: one line on where the cost comes from.
    """

    scheme: Scheme
    max_unit_input: float
    stored_bytes: float
    moved_bytes: float
    reason: str

    @property
    def cost(self) -> tuple[float, float]:
        """The ranking key: busiest unit first, then bytes moved."""
        return (self.max_unit_input, self.moved_bytes)


# --------------------------------------------------------------------------- per scheme


def _hot(q: float, share: float) -> float:
    """Fraction of rows in a key bucket holding `share` of the key space and the hot key."""
    return q + (1.0 - q) * share


def _stored_once(st: Stats) -> float:
    return memory_biclique(st.left_rows, st.right_rows, st.left_size, st.right_size)


def _hash(s: HashScheme, st: Stats) -> Estimate:
    f = _hot(st.top_key_share, 1.0 / s.n_units)
    total = st.left_rows + st.right_rows + st.left_delta + st.right_delta
    moved = st.left_size * st.left_delta + st.right_size * st.right_delta
    why = f"busiest bucket holds {f:.1%} of all rows (hot key {st.top_key_share:.0%})"
    return Estimate(s, f * total, _stored_once(st), moved, why)


def _matrix(s: MatrixScheme, st: Stats) -> Estimate:
    load = ilf(st.left_rows + st.left_delta, st.right_rows + st.right_delta, s.n, s.m)
    stored = memory_matrix(st.left_rows, st.right_rows, s.n, s.m, st.left_size, st.right_size)
    moved = bandwidth_matrix(st.left_size * st.left_delta, st.right_size * st.right_delta, s.n, s.m)
    why = f"each cell reads 1/{s.n} of left and 1/{s.m} of right, whatever the skew (ILF)"
    return Estimate(s, load, stored, moved, why)


def _biclique_numbers(st: Stats, left: int, right: int) -> tuple[float, float]:
    left_load = (st.left_rows + st.left_delta) / left + st.right_delta
    right_load = (st.right_rows + st.right_delta) / right + st.left_delta
    moved = bandwidth_biclique(
        st.left_size * st.left_delta, st.right_size * st.right_delta, left, right
    )
    return max(left_load, right_load), moved


def _biclique(s: BicliqueScheme, st: Stats) -> Estimate:
    load, moved = _biclique_numbers(st, s.left_units, s.right_units)
    why = "state stored once and spread evenly; every unit sees the other side's whole delta"
    return Estimate(s, load, _stored_once(st), moved, why)


def _group_sizes(units: int, groups: int) -> list[int]:
    q, r = divmod(units, groups)
    return [q + 1] * r + [q] * (groups - r)


def _contrand_side(q: float, units: int, groups: int, rows: float, probes: float) -> float:
    """Busiest unit of one side: the hot key's subgroup (a key picks a subgroup ∝ its size)."""
    return max(
        _hot(q, size / units) * (rows / size + probes) for size in set(_group_sizes(units, groups))
    )


def _mean_fanout(units: int, groups: int) -> float:
    """Expected size of a key's subgroup: sizes weighted by the chance a key picks them."""
    return sum(size * size for size in _group_sizes(units, groups)) / units


def _contrand_numbers(st: Stats, left: int, right: int, d: int, e: int) -> tuple[float, float]:
    q = st.top_key_share
    left_load = _contrand_side(q, left, d, st.left_rows + st.left_delta, st.right_delta)
    right_load = _contrand_side(q, right, e, st.right_rows + st.right_delta, st.left_delta)
    moved = st.left_size * st.left_delta * (1 + _mean_fanout(right, e))
    moved += st.right_size * st.right_delta * (1 + _mean_fanout(left, d))
    return max(left_load, right_load), moved


def _contrand(s: ContRandScheme, st: Stats) -> Estimate:
    load, moved = _contrand_numbers(st, s.left_units, s.right_units, s.d, s.e)
    why = (
        f"state stored once; a key's rows spread over a subgroup of ~{s.left_units / s.d:g} left "
        f"/ ~{s.right_units / s.e:g} right units, probes go to that subgroup only"
    )
    return Estimate(s, load, _stored_once(st), moved, why)


def _range_cover(
    s: RangeScheme, sample: tuple[float, ...], side: Side
) -> tuple[list[float], float]:
    """Per range, the fraction of `side`'s rows stored or probing there; and mean copies per row."""
    k = s.places()
    lo, hi = s.probe_interval(side)
    diff = [0] * (k + 1)
    copies = 0
    for v in sample:
        at, first, last = (range_of(x, s.bounds) for x in (v, v + lo, v + hi))
        diff[first] += 1
        diff[last + 1] -= 1
        copies += last - first + 1
        if not first <= at <= last:
            diff[at] += 1
            diff[at + 1] -= 1
            copies += 1
    cover, running = [], 0
    for i in range(k):
        running += diff[i]
        cover.append(running / len(sample))
    return cover, copies / len(sample)


def _range(s: RangeScheme, st: Stats) -> Estimate:
    k = s.places()
    state = st.left_rows + st.right_rows
    if st.value_sample:
        n = len(st.value_sample)
        share = [0.0] * k
        for v in st.value_sample:
            share[range_of(v, s.bounds)] += 1.0 / n
        left_cover, left_copies = _range_cover(s, st.value_sample, "left")
        right_cover, right_copies = _range_cover(s, st.value_sample, "right")
        load = max(
            share[i] * state + left_cover[i] * st.left_delta + right_cover[i] * st.right_delta
            for i in range(k)
        )
        why = f"{k} ranges from a {n}-value sample; busiest range computed on the sample"
    else:
        # Uniform values, equi-depth ranges: a band of width w covers 1 + w/width ranges.
        inner = len(s.bounds) - 1
        width = (s.bounds[-1] - s.bounds[0]) / inner if inner > 0 else math.inf
        fan = min(float(k), 1.0 + (s.hi - s.lo) / width if width > 0 else float(k))
        apart = 0.0 if s.lo <= 0.0 <= s.hi else 1.0  # stored outside the probed ranges
        f = _hot(st.top_key_share, 1.0 / k)
        cover = min(1.0, f + (fan - 1.0 + apart) / k)
        load = f * state + cover * (st.left_delta + st.right_delta)
        left_copies = right_copies = fan + apart
        why = f"{k} ranges, values assumed uniform: a probe covers ~{fan:.2g} ranges"
    moved = st.left_size * st.left_delta * left_copies + st.right_size * st.right_delta * (
        right_copies
    )
    return Estimate(s, load, _stored_once(st), moved, why)


def estimate(scheme: Scheme, stats: Stats) -> Estimate:
    """The predicted cost of one batch under `scheme` (see the module docstring for the model)."""
    if isinstance(scheme, HashScheme):
        return _hash(scheme, stats)
    if isinstance(scheme, MatrixScheme):
        return _matrix(scheme, stats)
    if isinstance(scheme, BicliqueScheme):
        return _biclique(scheme, stats)
    if isinstance(scheme, ContRandScheme):
        return _contrand(scheme, stats)
    if isinstance(scheme, RangeScheme):
        return _range(scheme, stats)
    msg = f"no cost model for scheme {scheme.describe()!r}"
    raise TypeError(msg)


# --------------------------------------------------------------------------- candidates


def _splits(units: int) -> Iterator[int]:
    """Left-unit counts to try for a biclique of `units` units (all of them up to 256)."""
    if units <= 256:
        yield from range(1, units)
        return
    step = units / 128
    yield from sorted({max(1, min(units - 1, round(i * step))) for i in range(1, 128)})


def _group_counts(units: int) -> list[int]:
    """Subgroup counts to try: powers of two up to `units`, and `units` itself (pure hash)."""
    counts, g = [], 1
    while g <= units:
        counts.append(g)
        g *= 2
    return sorted({*counts, units})


def _best_biclique(st: Stats) -> BicliqueScheme:
    left = min(_splits(st.units), key=lambda k: _biclique_numbers(st, k, st.units - k))
    return BicliqueScheme(left, st.units - left)


def _best_contrand(st: Stats) -> ContRandScheme | None:
    """The best hybrid ContRand over `units` (pure random is the biclique, left out here)."""
    best: tuple[tuple[float, float], ContRandScheme] | None = None
    for left in _splits(st.units):
        right = st.units - left
        for d in _group_counts(left):
            for e in _group_counts(right):
                if d == 1 and e == 1:
                    continue
                cost = _contrand_numbers(st, left, right, d, e)
                if best is None or cost < best[0]:
                    best = (cost, ContRandScheme(left, right, d, e))
    return None if best is None else best[1]


def _best_matrix(st: Stats) -> MatrixScheme:
    cells = 1 << (st.units.bit_length() - 1)  # the largest power of two <= units
    n, m = optimal_shape(
        st.left_rows + st.left_delta,
        st.right_rows + st.right_delta,
        cells,
        st.left_size,
        st.right_size,
    )
    return MatrixScheme(n, m)


def candidates(has_equi: bool, band: tuple[float, float] | None, stats: Stats) -> list[Estimate]:
    """Every applicable scheme at its best parameters for `stats.units`, cheapest batch first.

    Hash and contrand need an equality key (`has_equi`); range needs a band ``right.value -
    left.value ∈ [lo, hi]`` and a value sample (``stats.value_sample``) to place its equi-depth
    bounds; matrix (at the ILF-optimal shape over the largest power of two <= units) always
    applies, and so does the biclique (random routing, at the best split of the units between
    the sides) from two units on. Every candidate uses at most `stats.units` places.
    Ranked by ``(max_unit_input, moved_bytes)``; ties keep the order hash, range, contrand,
    biclique, matrix.

    >>> best = candidates(True, None, Stats(1e6, 1e6, 1e4, 1e4, units=8))[0]
    >>> best.scheme.describe()
    'hash on 8 units'
    """
    schemes: list[Scheme] = []
    if has_equi:
        schemes.append(HashScheme(stats.units))
    if band is not None and stats.value_sample:
        bounds = range_bounds(stats.value_sample, stats.units)
        schemes.append(RangeScheme(bounds, band[0], band[1]))
    if has_equi:
        hybrid = _best_contrand(stats)
        if hybrid is not None:
            schemes.append(hybrid)
    if stats.units >= 2:  # a biclique needs a unit per side
        schemes.append(_best_biclique(stats))
    schemes.append(_best_matrix(stats))
    return sorted((estimate(s, stats) for s in schemes), key=lambda e: e.cost)
