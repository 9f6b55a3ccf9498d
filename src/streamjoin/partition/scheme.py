"""Partitioning schemes: where a row is stored and where it probes, as Spark SQL expressions.

A scheme numbers its *places* ``0 .. places()-1`` (cells of a join matrix, units of a join
biclique, buckets of a hash or range partitioning). For one row of one side it gives two
arithmetic progressions of places, as SQL expressions over that row's columns:

- :meth:`Scheme.store`: where the row is kept as state;
- :meth:`Scheme.probe`: where the row, arriving in a micro-batch delta, meets the other side's
  stored rows.

The runtime explodes ``sequence(start, stop, step)`` and joins a delta (exploded by ``probe``)
with the other side's state (exploded by ``store``) on the place plus the full predicate. Every
scheme satisfies the **exactly-once contract**: for a left row l and a right row r that can join,
``|probe(left, l) ∩ store(right, r)| == 1`` and ``|store(left, l) ∩ probe(right, r)| == 1``, so
each pair is produced once per direction of the delta rule.

The "random" choices of the papers are ``pmod(tag, k)`` over a per-tuple hash ``tag``, so routing
is deterministic under task retries and batch replays (never ``rand()``). The SQL uses only
``pmod``, ``least``, ``abs``, ``+ - *``, comparisons, ``CASE`` and ``CAST``; the pure reference
evaluator (``streamjoin.reference.compile_expression``) evaluates all of it.

Schemes, with their sources:

- :class:`HashScheme`: content-sensitive hash partitioning on the equality key (Squall's SHJ
  baseline; BiStream's hash routing).
- :class:`MatrixScheme`: Squall's (n, m) join matrix (Elseidy et al., VLDB 2014, §3.1–3.2).
- :class:`BicliqueScheme`: BiStream's join-biclique with random routing (Lin et al., SIGMOD 2015,
  §3.2.2).
- :class:`ContRandScheme`: BiStream's ContRand routing (§3.2.2, Algorithm 1), equi-joins only.
- :class:`RangeScheme`: range partitioning on a band value, probing every range the band reaches
  (BiStream §3 notes that band joins need a range-aware probe fan-out).
"""

from __future__ import annotations

import bisect
import math
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

Side = Literal["left", "right"]
"""A query joins left (alias a, stream R) with right (alias b, stream S)."""


@dataclass(frozen=True, slots=True)
class Places:
    """The meeting places (unit ids) of one row: ``start, start+step, ..., stop`` (inclusive)."""

    start: str
    """Spark SQL expression -> BIGINT."""
    stop: str
    """Spark SQL expression -> BIGINT (inclusive)."""
    step: int = 1


@dataclass(frozen=True, slots=True)
class RowSql:
    """SQL expressions over one row that a scheme routes by.

    Attributes:
        tag: a deterministic non-negative BIGINT per tuple (e.g. ``xxhash64(row, seed) &
            0x7fffffffffffffff``); every "random" choice is ``pmod(tag, k)``.
        key: a non-negative BIGINT hash of the equality key (hash and contrand need it), or None.
            Both sides must hash equal keys to equal values.
        value: the DOUBLE band value of this side (range needs it), or None.
    """

    tag: str
    key: str | None = None
    value: str | None = None


class Scheme(ABC):
    """A partitioning scheme: places numbered ``0 .. places()-1`` and per-row placement SQL."""

    __slots__ = ()

    name: ClassVar[str]

    @abstractmethod
    def places(self) -> int:
        """The number of distinct place ids; ids are ``0 .. places()-1``."""

    @abstractmethod
    def units(self, side: Side) -> int:
        """The number of processing units (places) that store `side`'s tuples."""

    @abstractmethod
    def store(self, side: Side, row: RowSql) -> Places:
        """Where a row of `side` is stored."""

    @abstractmethod
    def probe(self, side: Side, row: RowSql) -> Places:
        """Where a delta row of `side` probes the other side's stored rows."""

    @abstractmethod
    def describe(self) -> str:
        """A short human description, e.g. ``matrix 4×2 over 8 cells``."""


# --------------------------------------------------------------------------- SQL helpers


def _bigint(sql: str | int) -> str:
    return f"CAST({sql} AS BIGINT)"


def _lit(x: float) -> str:
    """A DOUBLE literal that Spark and the reference read back exactly."""
    return f"CAST({x!r} AS DOUBLE)"


def _need(value: str | None, what: str, scheme: str) -> str:
    if value is None:
        msg = f"the {scheme} scheme needs the row's {what} expression, got None"
        raise ValueError(msg)
    return value


def _check_count(what: str, value: int, low: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        msg = f"{what} must be an integer >= {low}, got {value!r}"
        raise ValueError(msg)


def _is_power_of_two(k: int) -> bool:
    return k >= 1 and k & (k - 1) == 0


def _other(side: Side) -> Side:
    return "right" if side == "left" else "left"


# --------------------------------------------------------------------------- hash


@dataclass(frozen=True, slots=True)
class HashScheme(Scheme):
    """Hash partitioning on the equality key: store = probe = ``pmod(key, units)``.

    One copy of every tuple and one probe place, but a hot key loads one unit with all its rows
    (the SHJ baseline that Squall §5.1 shows collapsing under Zipf skew). Equi-joins only.
    """

    name: ClassVar[str] = "hash"
    n_units: int

    def __post_init__(self) -> None:
        _check_count("hash units", self.n_units)

    def places(self) -> int:
        """`n_units` buckets."""
        return self.n_units

    def units(self, side: Side) -> int:
        """Both sides are stored in every bucket."""
        return self.n_units

    def _place(self, row: RowSql) -> Places:
        key = _need(row.key, "equality key", "hash")
        at = _bigint(f"pmod({key}, {self.n_units})")
        return Places(at, at)

    def store(self, side: Side, row: RowSql) -> Places:
        """The key's bucket."""
        return self._place(row)

    def probe(self, side: Side, row: RowSql) -> Places:
        """The key's bucket, where every stored row with an equal key lives."""
        return self._place(row)

    def describe(self) -> str:
        """E.g. ``hash on 8 units``."""
        return f"hash on {self.n_units} units"


# --------------------------------------------------------------------------- matrix


@dataclass(frozen=True, slots=True)
class MatrixScheme(Scheme):
    """Squall's (n, m) join matrix: n row partitions of R, m column partitions of S.

    Cell ``(i, j)`` has id ``i·m + j``. A left (R) row picks row ``i = pmod(tag, n)`` and is stored
    in, and probes, all m cells of that row; a right (S) row picks column ``j = pmod(tag, m)`` and
    uses all n cells of the column (Squall §3.2). Every (r, s) pair meets in exactly one cell
    whatever the predicate and the value distribution. n and m are powers of two, so row and
    column partitions nest dyadically across reshapes: the rows under 2n split those under n
    (Squall §4.2, checklist item 7), which keeps migrations local.
    """

    name: ClassVar[str] = "matrix"
    n: int
    m: int

    def __post_init__(self) -> None:
        for what, k in (("matrix rows n", self.n), ("matrix columns m", self.m)):
            _check_count(what, k)
            if not _is_power_of_two(k):
                msg = f"{what} must be a power of two, got {k}"
                raise ValueError(msg)

    def places(self) -> int:
        """n·m cells."""
        return self.n * self.m

    def units(self, side: Side) -> int:
        """Every cell stores both sides."""
        return self.n * self.m

    def store(self, side: Side, row: RowSql) -> Places:
        """A left row's matrix row (m cells) or a right row's matrix column (n cells)."""
        if side == "left":
            i = f"pmod({row.tag}, {self.n})"
            return Places(_bigint(f"{i} * {self.m}"), _bigint(f"{i} * {self.m} + {self.m - 1}"))
        j = f"pmod({row.tag}, {self.m})"
        return Places(_bigint(j), _bigint(f"{j} + {(self.n - 1) * self.m}"), self.m)

    def probe(self, side: Side, row: RowSql) -> Places:
        """The same cells as :meth:`store`: a cell stores what it joins."""
        return self.store(side, row)

    def describe(self) -> str:
        """E.g. ``matrix 4×2 over 8 cells``."""
        return f"matrix {self.n}×{self.m} over {self.n * self.m} cells"


# --------------------------------------------------------------------------- biclique family


def _layout(units: int, groups: int) -> tuple[int, int]:
    """(q, r): `groups` subgroups over `units`, the first r of size q+1, the rest of size q."""
    return units // groups, units % groups


def _subgroup(x: str, units: int, groups: int) -> tuple[str, str]:
    """SQL (first unit, size) of the subgroup holding unit ``x`` (``0 <= x < units``)."""
    q, r = _layout(units, groups)
    if r == 0:
        return f"({x} - pmod({x}, {q}))", str(q)
    big = r * (q + 1)
    start = (
        f"(CASE WHEN {x} < {big} THEN {x} - pmod({x}, {q + 1}) "
        f"ELSE {x} - pmod({x} - {big}, {q}) END)"
    )
    size = f"(CASE WHEN {x} < {big} THEN {q + 1} ELSE {q} END)"
    return start, size


@dataclass(frozen=True, slots=True)
class ContRandScheme(Scheme):
    """BiStream's ContRand routing over a join biclique (SIGMOD 2015 §3.2.2, Algorithm 1).

    Places ``0 .. left_units-1`` are the left (R) units, then ``left_units ..`` the right (S)
    units; each tuple is stored once, in a unit of its own side. The left units form d subgroups
    and the right units e subgroups, as equal in size as possible (sizes differ by at most one).
    A row's subgroup on either side is a function of its key only: the subgroup holding unit
    ``pmod(key, units)`` of that side, so a key picks a subgroup with probability proportional to
    its size and units stay evenly loaded. A row is stored at a "random" unit
    (``pmod(tag, size)``) of its own side's key subgroup (rand∘hash) and probes every unit of the
    other side's key subgroup, which holds every stored row with an equal key. ``d = left_units,
    e = right_units`` is pure hash routing; ``d = e = 1`` is pure random routing. Equi-joins only.
    """

    name: ClassVar[str] = "contrand"
    left_units: int
    right_units: int
    d: int
    e: int

    def __post_init__(self) -> None:
        _check_count("left_units", self.left_units)
        _check_count("right_units", self.right_units)
        _check_count("d (left subgroups)", self.d)
        _check_count("e (right subgroups)", self.e)
        if self.d > self.left_units:
            msg = f"d (left subgroups) must be <= left_units={self.left_units}, got {self.d}"
            raise ValueError(msg)
        if self.e > self.right_units:
            msg = f"e (right subgroups) must be <= right_units={self.right_units}, got {self.e}"
            raise ValueError(msg)

    def places(self) -> int:
        """left_units + right_units."""
        return self.left_units + self.right_units

    def units(self, side: Side) -> int:
        """The units of that side's partition of the biclique."""
        return self.left_units if side == "left" else self.right_units

    def _side(self, side: Side) -> tuple[int, int, int]:
        """(units, subgroups, first place id) of `side`."""
        if side == "left":
            return self.left_units, self.d, 0
        return self.right_units, self.e, self.left_units

    def _group(self, side: Side, key: str) -> tuple[str, str, int]:
        units, groups, offset = self._side(side)
        start, size = _subgroup(f"pmod({key}, {units})", units, groups)
        return start, size, offset

    def store(self, side: Side, row: RowSql) -> Places:
        """One unit of the row's own-side key subgroup, chosen by the tag."""
        key = _need(row.key, "equality key", "contrand")
        start, size, offset = self._group(side, key)
        if size == "1":
            at = f"{offset} + {start}"
        else:
            at = f"{offset} + {start} + pmod({row.tag}, {size})"
        return Places(_bigint(at), _bigint(at))

    def probe(self, side: Side, row: RowSql) -> Places:
        """Every unit of the other side's key subgroup."""
        key = _need(row.key, "equality key", "contrand")
        start, size, offset = self._group(_other(side), key)
        first = f"{offset} + {start}"
        return Places(_bigint(first), _bigint(f"{first} + {size} - 1"))

    def describe(self) -> str:
        """E.g. ``contrand biclique 4+4 units, 2+2 subgroups``."""
        return (
            f"contrand biclique {self.left_units}+{self.right_units} units, "
            f"{self.d}+{self.e} subgroups"
        )


@dataclass(frozen=True, slots=True)
class BicliqueScheme(Scheme):
    """BiStream's join-biclique with random routing (SIGMOD 2015 §3.2.2, Definition 1).

    Places ``0 .. left_units-1`` are left (R) units, then the right (S) units. A left row is
    stored once, at left unit ``pmod(tag, left_units)``, and probes all right units; a right row
    is stored at ``left_units + pmod(tag, right_units)`` and probes all left units. No replica is
    stored, any predicate works, and load is balanced whatever the value distribution; the price
    is that every unit of one side sees every delta row of the other.
    """

    name: ClassVar[str] = "biclique"
    left_units: int
    right_units: int

    def __post_init__(self) -> None:
        _check_count("left_units", self.left_units)
        _check_count("right_units", self.right_units)

    def places(self) -> int:
        """left_units + right_units."""
        return self.left_units + self.right_units

    def units(self, side: Side) -> int:
        """The units of that side's partition of the biclique."""
        return self.left_units if side == "left" else self.right_units

    def store(self, side: Side, row: RowSql) -> Places:
        """One unit of the row's own side, chosen by the tag."""
        if side == "left":
            at = f"pmod({row.tag}, {self.left_units})"
        else:
            at = f"{self.left_units} + pmod({row.tag}, {self.right_units})"
        return Places(_bigint(at), _bigint(at))

    def probe(self, side: Side, row: RowSql) -> Places:
        """Every unit of the other side."""
        if side == "left":
            return Places(_bigint(self.left_units), _bigint(self.places() - 1))
        return Places(_bigint(0), _bigint(self.left_units - 1))

    def describe(self) -> str:
        """E.g. ``biclique 4+4 units (random routing)``."""
        return f"biclique {self.left_units}+{self.right_units} units (random routing)"


# --------------------------------------------------------------------------- range

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
