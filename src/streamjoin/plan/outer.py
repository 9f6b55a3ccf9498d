"""How an outer join emits the rows of a preserved side that found no partner.

With the ON condition's time window ``right.ts - left.ts ∈ [lo, hi]``, a left row can still
meet right rows with ``ts <= l.ts + hi``; every right row still to come is on time, so has
``ts >= W``. Once ``l.ts < W - hi`` the left row can never match again: in the batch that moves
the watermark there, it is joined against the right rows its window covers, and emitted with
NULLs if none matches (a right row symmetrically, with ``-lo``). Each preserved row is so
decided exactly once, in the batch whose horizon passes it, never before and never also
matched. The other side's rows must then still be stored: its state is kept for the window's
whole width (``hi - lo``) behind the horizon.

Without a window bounded on both sides, an unmatched row could match at any time and would
never be emitted: such an outer join is refused, unless its ``ttl`` option gives the window (a
row waits that long for a partner: `sql.query`).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamjoin.errors import UnsupportedError
from streamjoin.model import Job, OuterJoin, Query
from streamjoin.plan.classify import classify_predicate
from streamjoin.plan.parts import Band, TimeWindow


@dataclass(frozen=True, slots=True)
class OuterPlan:
    """One outer join: its query (as the batch's join runs it) and its ON condition's window."""

    query: Query
    window: TimeWindow
    """``right.ts - left.ts ∈ [lo, hi]``, both bounds set."""
    band: Band | None = None
    """A band of the ON condition whose buckets find a row's partners, when it has no equality
    key to hash on (the narrowest value band, else the time window)."""

    @property
    def outer(self) -> OuterJoin:
        """The query's outer join."""
        assert self.query.outer is not None
        return self.query.outer

    @property
    def name(self) -> str:
        """The query's name."""
        return self.query.name

    def lag(self, index: int) -> int:
        """How far behind the watermark a row of input `index` (0 left, 1 right) may still
        match: it is dead once its event time is below ``W - lag``."""
        assert self.window.hi_us is not None and self.window.lo_us is not None
        # (A row whose partners are all later than itself waits for them; one whose partners
        # are all earlier is decided as it arrives: no wait below zero.)
        return max(self.window.hi_us if index == 0 else -self.window.lo_us, 0)

    @property
    def width(self) -> int:
        """How long the other side is kept behind a preserved row's decision."""
        return self.lag(0) + self.lag(1)

    def dead_below(self, index: int, watermark: int | None) -> int | None:
        """The event time below which rows of input `index` can no longer match, after a batch
        that leaves the global watermark at `watermark` (None: no row is dead yet)."""
        return None if watermark is None else watermark - self.lag(index)

    def retention(self) -> dict[str, int]:
        """What the outer join needs each stream's state to keep behind the watermark: a
        preserved side's rows until they are decided, the other side's a window's width
        beyond (see the module docstring)."""
        keep: dict[str, int] = {}
        sides = self.query.sides
        for i in (0, 1):
            if self.outer.preserves(i):
                mine, other = sides[i].stream, sides[1 - i].stream
                keep[mine] = max(keep.get(mine, 0), self.lag(i))
                keep[other] = max(keep.get(other, 0), self.lag(i) + self.lag(1 - i))
        return keep


def plan_outer(job: Job, query: Query) -> OuterPlan:
    """The plan of an outer join `query` (two inputs).

    Raises:
        UnsupportedError: the ON condition has no time window bounded on both sides, or the
            query groups by a window on a side whose rows may be NULL.
    """
    outer = query.outer
    assert outer is not None
    left, right = job.stream(query.left.stream), job.stream(query.right.stream)
    parts = classify_predicate(
        outer.on, query.left.alias, query.right.alias, left.event_time, right.event_time
    )
    window = parts.window
    text = f"{outer.kind.upper()} JOIN"
    if (
        window is None
        or window.lo_us is None
        or window.hi_us is None
        or left.event_time is None
        or right.event_time is None
    ):
        msg = (
            f"query {query.name}: a {outer.kind} outer join emits a row without a partner once "
            "the watermark passes its window, so its ON condition needs a time window bounded "
            "on both sides (b.ts BETWEEN a.ts - INTERVAL ... AND a.ts + INTERVAL ...) over "
            "streams with watermarks; a full-history outer join could never emit one, unless "
            "WITH (ttl = '1 hour') bounds how long a row waits for a partner"
        )
        raise UnsupportedError(msg, line=query.line, col=1, text=text, source=job.source)
    agg = query.windowed
    if agg is not None:
        alias = agg.window.source[0]
        index = 0 if alias == query.left.alias.lower() else 1
        if outer.kind == "full" or not outer.preserves(index):
            msg = (
                f"query {query.name}: GROUP BY window({agg.window.time}) over a {outer.kind} "
                f"outer join: {alias}'s event time is NULL in the rows without a partner; "
                "window by a preserved side's event time"
            )
            raise UnsupportedError(msg, line=query.line, col=1, text=text, source=job.source)
    band = None
    if not parts.equi:
        band = min(parts.bands, key=lambda b: b.width) if parts.bands else None
        if band is None:
            times = (
                f"{query.left.alias}.{left.event_time}",
                f"{query.right.alias}.{right.event_time}",
            )
            band = window.band(*times)
    return OuterPlan(query, window, band)
