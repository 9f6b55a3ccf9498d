"""Range partitioning for band joins: a row is stored in the range holding its band value and
probes every range the band reaches (BiStream §3 notes that band joins need a range-aware probe
fan-out); the bounds are equi-depth over a sample, so a hot value fills one range alone."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from streamjoin.partition.scheme import (
    Places,
    RowSql,
    Scheme,
    Side,
    _bigint,
    _check_count,
    _lit,
    _need,
)

_MARGIN = 1e-9
"""Relative widening of a probe interval, so that rounding in however the runtime writes the
band predicate (``abs(b.x - a.x) <= c``, ``a.x BETWEEN b.x - c AND b.x + c``) never loses a pair.
Widening only adds ranges to a probe; a row is stored in one range, so it stays exactly once."""


def range_index_sql(x: str, bounds: tuple[float, ...]) -> str:
    """SQL for the range of ``x``: the number of bounds ``b`` with ``x >= b``, as a binary search.

    Range 0 is ``x < bounds[0]``, range i is ``bounds[i-1] <= x < bounds[i]``, the last range is
    ``x >= bounds[-1]``. The nested CASE evaluates ``log2(len(bounds)+1)`` comparisons per row.
    """

    def search(first: int, last: int) -> str:  # the answer lies in [first, last]
        if first == last:
            return str(first)
        mid = (first + last + 1) // 2  # compare with the bound that opens range `mid`
        return (
            f"CASE WHEN {x} >= {_lit(bounds[mid - 1])} "
            f"THEN {search(mid, last)} ELSE {search(first, mid - 1)} END"
        )

    return search(0, len(bounds))


def range_of(x: float, bounds: tuple[float, ...]) -> int:
    """The range id of value `x` in Python (what :func:`range_index_sql` computes)."""
    return bisect.bisect_right(bounds, x)


@dataclass(frozen=True, slots=True)
class RangeScheme(Scheme):
    """Range partitioning for band joins ``right.value - left.value ∈ [lo, hi]``.

    ``len(bounds)+1`` ranges (see :func:`range_index_sql`). A row is stored in the range holding
    its value; a left row with value v probes the ranges overlapping ``[v+lo, v+hi]``, a right row
    with value w those overlapping ``[w-hi, w-lo]`` (each widened by a relative 1e-9 against
    rounding). Content-sensitive: equi-depth bounds (:func:`range_bounds`) balance the stored
    rows, but one hot value still lands in one range.
    """

    name: ClassVar[str] = "range"
    bounds: tuple[float, ...]
    lo: float
    hi: float

    def __post_init__(self) -> None:
        for b in self.bounds:
            if not math.isfinite(b):
                msg = f"range bounds must be finite, got {b!r}"
                raise ValueError(msg)
        for a, b in zip(self.bounds, self.bounds[1:], strict=False):
            if not a < b:
                msg = f"range bounds must be strictly increasing, got {a!r} then {b!r}"
                raise ValueError(msg)
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)):
            msg = f"band limits must be finite, got [{self.lo!r}, {self.hi!r}]"
            raise ValueError(msg)
        if self.lo > self.hi:
            msg = f"band lo must be <= hi, got lo={self.lo!r} > hi={self.hi!r}"
            raise ValueError(msg)

    def places(self) -> int:
        """len(bounds) + 1 ranges."""
        return len(self.bounds) + 1

    def units(self, side: Side) -> int:
        """Every range stores both sides."""
        return len(self.bounds) + 1

    def store(self, side: Side, row: RowSql) -> Places:
        """The range holding the row's value."""
        value = _need(row.value, "band value", "range")
        at = _bigint(range_index_sql(f"CAST({value} AS DOUBLE)", self.bounds))
        return Places(at, at)

    def probe_interval(self, side: Side) -> tuple[float, float]:
        """(a, b): a row of `side` with value v probes the ranges overlapping ``[v+a, v+b]``."""
        return (self.lo, self.hi) if side == "left" else (-self.hi, -self.lo)

    def probe(self, side: Side, row: RowSql) -> Places:
        """The ranges overlapping the band around the row's value."""
        value = _need(row.value, "band value", "range")
        a, b = self.probe_interval(side)
        v = f"CAST({value} AS DOUBLE)"
        margin = f"({_lit(_MARGIN)} * (abs({v}) + {_lit(abs(a) + abs(b) + 1.0)}))"
        low = range_index_sql(f"({v} + {_lit(a)} - {margin})", self.bounds)
        high = range_index_sql(f"({v} + {_lit(b)} + {margin})", self.bounds)
        return Places(_bigint(low), _bigint(high))

    def describe(self) -> str:
        """E.g. ``range 4 ranges, band [-0.5, 0.5]``."""
        return f"range {self.places()} ranges, band [{self.lo:g}, {self.hi:g}]"


def range_bounds(sample_values: Iterable[float], units: int) -> tuple[float, ...]:
    """Equi-depth range bounds from a sample: at most ``units - 1`` strictly increasing values.

    Walks the distinct sample values in order and closes a range once it holds its share of the
    rows not yet placed (``remaining / ranges left``); the next distinct value becomes a bound.
    A hot value therefore fills one range alone and the other ranges split the rest evenly. A
    sample with few distinct values gives fewer ranges; an empty one gives none (one range).

    >>> range_bounds([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], 4)
    (3.0, 5.0, 7.0)
    >>> range_bounds([1.0] * 6 + [2.0, 3.0, 4.0, 5.0], 3)
    (2.0, 4.0)
    """
    _check_count("range units", units)
    values = sorted(sample_values)
    for x in values:
        if not math.isfinite(x):
            msg = f"range sample values must be finite, got {x!r}"
            raise ValueError(msg)
    distinct = sorted(Counter(values).items())
    bounds: list[float] = []
    remaining, held = len(values), 0
    for value, count in distinct:
        if held and held * (units - len(bounds)) >= remaining:
            bounds.append(value)  # the open range is full: `value` opens the next one
            remaining -= held
            held = 0
            if len(bounds) == units - 1:
                break
        held += count
    return tuple(bounds)
