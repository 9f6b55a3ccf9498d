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
- :class:`~streamjoin.partition.ranges.RangeScheme` (in :mod:`.ranges`): range partitioning on a
  band value, probing every range the band reaches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
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
