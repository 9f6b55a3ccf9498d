"""What a join predicate's classification finds (`plan.classify`): equality keys, value
bands, the event-time window, the columns that bound the other side's event time, and the
residual. Bands and windows are stated as ``right - left ∈ [lo, hi]``."""

from __future__ import annotations

from dataclasses import dataclass

from streamjoin.plan.grouping import binary_sql


@dataclass(frozen=True, slots=True)
class EquiKey:
    """``left_sql = right_sql`` with each side's expression over one side only."""

    left_sql: str
    right_sql: str

    def describe(self) -> str:
        """Human form, e.g. ``a.k = b.k``."""
        return binary_sql(self.left_sql, "=", self.right_sql)


@dataclass(frozen=True, slots=True)
class Band:
    """``right_sql - left_sql ∈ [lo, hi]`` (numeric columns, or event times in microseconds)."""

    left_sql: str
    right_sql: str
    lo: float
    hi: float
    temporal: bool = False
    split: int = 1
    """Buckets a band's span is cut into: its range reaches at most ``split + 1`` buckets."""

    @property
    def width(self) -> float:
        """Bucket width: a band of width w spans at most ``split + 1`` buckets of w / split."""
        span = self.hi - self.lo
        return span / self.split if span > 0 else 1.0

    def describe(self) -> str:
        """Human form, e.g. ``b.y - (a.x - a.z) in [-1, 1]``."""
        difference = binary_sql(self.right_sql, "-", self.left_sql)
        return f"{difference} in [{self.lo:g}, {self.hi:g}]"


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """``right.ts - left.ts ∈ [lo_us, hi_us]`` on the event-time columns; None = unbounded."""

    lo_us: int | None
    hi_us: int | None

    def describe(self) -> str:
        """Human form, e.g. ``b.ts - a.ts in [-10s, +5s]``."""

        def fmt(v: int | None, inf: str) -> str:
            return inf if v is None else f"{v / 1e6:+g}s"

        return f"[{fmt(self.lo_us, '-inf')}, {fmt(self.hi_us, '+inf')}]"

    def band(self, left_time: str, right_time: str, split: int = 1) -> Band:
        """The window as a band in microseconds between the qualified event-time columns
        `left_time` and `right_time` (both bounds set), its span cut into `split` buckets."""
        assert self.lo_us is not None and self.hi_us is not None
        return Band(
            f"unix_micros({left_time})",
            f"unix_micros({right_time})",
            float(self.lo_us),
            float(self.hi_us),
            temporal=True,
            split=split,
        )


@dataclass(frozen=True, slots=True)
class ColumnBound:
    """``other.ts <= column + offset_us``: the other side's event time is bounded by a column of
    side `side` (0 left, 1 right), as ``b.ts BETWEEN a.ts AND a.expires`` bounds b.ts by
    ``a.expires``. A row of that side can meet no row arriving once the watermark passes its
    ``column + offset_us``."""

    side: int
    column: str
    offset_us: int


@dataclass(frozen=True, slots=True)
class PredicateParts:
    """The classified conjuncts of one join predicate."""

    equi: tuple[EquiKey, ...]
    bands: tuple[Band, ...]
    window: TimeWindow | None
    residual: tuple[str, ...]
    """The other conjuncts, each in parentheses when it binds more loosely than AND (an OR), so
    that ``" AND ".join(residual)`` means what they mean together."""
    ors: tuple[EquiKey, ...] = ()
    """The equalities of the first conjunct that is an OR of equalities between the sides
    (``a.k = b.k OR a.id = b.id``), in order: a pair meets through any of them (the conjunct
    stays in `residual`)."""
    bounds: tuple[ColumnBound, ...] = ()
    """Each side's columns that bound the other side's event time from above."""
