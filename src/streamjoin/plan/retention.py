"""How long a query needs each input's rows: a row with event time ``< W - retain`` can no
longer be in its results. A stream's state keeps the loosest bound over the job's queries."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from streamjoin.errors import UnsupportedError
from streamjoin.plan.classify import classify_predicate
from streamjoin.plan.multiway import MultiwayPlan

if t.TYPE_CHECKING:
    from streamjoin.model import Query, StreamDef
    from streamjoin.plan.parts import ColumnBound
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


Use = tuple["int | None", "ColumnBound | None"]
"""How one query needs a stream's rows: their event-time retention (None: unbounded) and,
where that is None, the column that lets a row go instead (`column_expiry`)."""


@dataclass(frozen=True, slots=True)
class ColumnExpiry:
    """A stream's rows, which event times keep for good, leave its state by a column: a row is
    dead once the watermark passes its ``column + offset_us`` (every query that event times do
    not bound says so) and, where other queries bound it by event time, its ``ts < W -
    retain_us`` (None: no such query)."""

    column: str
    """The stream's column (unqualified)."""
    offset_us: int
    retain_us: int | None


def stream_expiry(stream: StreamDef, uses: list[Use]) -> ColumnExpiry | None:
    """The `ColumnExpiry` of `stream` from its queries' `uses`: when every use that event times
    leave unbounded lets a row go by one TIMESTAMP column of it (the loosest offset); else None
    (rows event times keep are kept for good)."""
    unbounded = [bound for keep, bound in uses if keep is None]
    if not unbounded or any(b is None for b in unbounded):
        return None
    columns = {t.cast("ColumnBound", b).column.split(".")[-1].strip("`").lower() for b in unbounded}
    if len(columns) != 1:
        return None
    (name,) = columns
    column = stream.column(name)
    if column is None or column.type.name != "TIMESTAMP":
        return None
    timed = [keep for keep, _ in uses if keep is not None]
    return ColumnExpiry(
        column.name,
        max(t.cast("ColumnBound", b).offset_us for b in unbounded),
        max(timed) if timed else None,
    )


def column_expiry(
    plan: QueryPlan, timestamps: t.Collection[str]
) -> tuple[ColumnBound | None, ColumnBound | None]:
    """Per side of an inner two-way join: the TIMESTAMP column (of `timestamps`, qualified) its
    rows expire by where the event-time window leaves them unbounded (`side_retention` None)
    but a column of theirs bounds the other side's event time (``b.ts <= a.expires``,
    `plan.parts.ColumnBound`): a row can meet no row still to come once the watermark passes
    its ``column + offset``. Its stream keeps it (no event-time bound), but the join's index
    need not (`QueryPlan.expiry`)."""
    if plan.query.outer is not None:
        return None, None
    stamped = {c.replace("`", "").lower() for c in timestamps}
    out: list[ColumnBound | None] = []
    for side, keep in enumerate(side_retention(plan)):
        bounds = [
            b
            for b in plan.parts.bounds
            if b.side == side and b.column.replace("`", "").lower() in stamped
        ]
        out.append(min(bounds, key=lambda b: b.offset_us) if keep is None and bounds else None)
    return out[0], out[1]


def column_lag(
    query: Query,
    side: int,
    times: tuple[str | None, ...],
    lags: tuple[int | None, ...],
    source: str,
) -> int | None:
    """How far behind the watermark the column of input `side` that `query`'s groups are
    windowed by may be in a result still to come, where it bounds the other input's event time,
    ``o.ts <= c + off`` (`sql.rowgroups`; `times`: the inputs' event-time columns, `lags`:
    theirs, `plan.physical.side_lags`); None without bound. A new result pairs a row on time
    (event time at least W): either the other input's row is new, and ``c >= W - off``, or
    this input's is, and the other's trails it by at most its lag L, so ``c >= W - L - off``:
    the lag is ``off + max(0, L)``.

    Raises:
        UnsupportedError: a multi-way or outer join.
    """
    agg = query.windowed
    assert agg is not None
    if query.multiway or query.outer is not None:
        msg = (
            f"query {query.name}: groups per row of a keyed input, complete when the watermark "
            f"passes {agg.window.time}, need a two-way inner join (this one is "
            f"{'multi-way' if query.multiway else 'outer'})"
        )
        text = agg.window.time.split(".", 1)[1]
        raise UnsupportedError(msg, line=query.line, col=1, text=text, source=source)
    parts = classify_predicate(query.predicate, query.left.alias, query.right.alias, *times)
    offsets = [b.offset_us for b in parts.bounds if b.side == side and b.column == agg.window.time]
    other = lags[1 - side]
    if not offsets or other is None:
        return None
    return min(offsets) + max(0, other)
