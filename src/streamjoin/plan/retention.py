"""How long a query needs each input's rows: a row with event time ``< W - retain`` can no
longer be in its results. A stream's state keeps the loosest bound over the job's queries."""

from __future__ import annotations

import typing as t

from streamjoin.plan.multiway import MultiwayPlan

if t.TYPE_CHECKING:
    from streamjoin.plan.classify import ColumnBound
    from streamjoin.plan.physical import QueryPlan


def side_retention(plan: QueryPlan | MultiwayPlan) -> tuple[int | None, ...]:
    """Per input of one query (in the order written): a row of it with event time
    ``< W - retain`` can no longer be in the query's results (None: always can)."""
    if isinstance(plan, MultiwayPlan):
        return plan.retain_us
    w = plan.parts.window
    timed = w is not None and plan.left_time is not None and plan.right_time is not None
    # A left row waits for right rows: they arrive no earlier than W when the right side
    # has a watermark, so the left row is needed while l.ts >= W - hi.
    left = w.hi_us if timed and w else None
    right = -w.lo_us if timed and w and w.lo_us is not None else None
    return (left, right)


def query_retention(plan: QueryPlan | MultiwayPlan) -> dict[str, int | None]:
    """How long one query needs each stream it reads kept: a stored row of the stream with
    event time ``< W - retain`` can no longer be in its results (None: always can). A stream
    that the query reads twice gets the looser bound. A stream's state keeps the loosest bound
    over the job's queries (`StreamPlan.retain_us`)."""
    uses: dict[str, list[int | None]] = {}
    for side, keep in zip(plan.query.sides, side_retention(plan), strict=True):
        uses.setdefault(side.stream, []).append(keep)
    return {stream: loosest(keeps) for stream, keeps in uses.items()}


def loosest(keeps: list[int | None]) -> int | None:
    """The loosest of several retention bounds (None, never dead, is the loosest)."""
    return None if any(k is None for k in keeps) else max(t.cast("list[int]", keeps))


def column_expiry(plan: QueryPlan) -> tuple[ColumnBound | None, ColumnBound | None]:
    """Per side of an inner two-way join: the column its rows expire by where the event-time
    window leaves them unbounded (`side_retention` None) but a column of theirs bounds the
    other side's event time (``b.ts <= a.expires``, `plan.classify.ColumnBound`): a row can
    meet no row still to come once the watermark passes its ``column + offset``. Its stream
    keeps it (no event-time bound), but the join's index need not."""
    if plan.query.outer is not None:
        return None, None
    out: list[ColumnBound | None] = []
    for side, keep in enumerate(side_retention(plan)):
        bounds = [b for b in plan.parts.bounds if b.side == side]
        out.append(min(bounds, key=lambda b: b.offset_us) if keep is None and bounds else None)
    return out[0], out[1]
