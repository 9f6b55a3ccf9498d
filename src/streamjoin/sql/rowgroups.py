"""Groups per row of a keyed input: a GROUP BY (or a top-N's PARTITION BY) with neither a window
nor an event time, holding the whole ``PRIMARY KEY`` of one input.

Such a group holds the results of one row of that input (its key fixes the row), so it is
complete once no later result can pair with that row. A join that bounds the other input's
event time by a column of the row (``b.ts BETWEEN a.ts AND a.expires``: Nexmark's auctions)
says when: once the watermark passes the row's ``expires`` (and the join's offsets,
`plan.physical.window_lag`). Without such a column, the row's own event time does, as when the
event time is a key. Either way the group gets a window of one instant on that column
(`POINT_US`), which the watermark closes as it passes; the column is not a key, so the output
is the groups as written.
"""

from __future__ import annotations

from sqlglot import exp

from streamjoin.model import EventWindow
from streamjoin.model.aggregate import POINT_US
from streamjoin.plan.classify import classify_predicate
from streamjoin.sql.resolve import Resolver, identifier


def row_window(
    parts: list[exp.Expr], resolver: Resolver, predicate: str | None
) -> EventWindow | None:
    """The window of groups by `parts` (qualified in place) when they hold a keyed input's
    whole key, over the join `predicate` (qualified Spark SQL; None: no join condition);
    None where no input's key is among them."""
    columns = [p for p in parts if isinstance(p, exp.Column)]
    for col in columns:
        resolver.qualify(col)
    held = {(c.table.lower(), c.name.lower()) for c in columns}
    for i, side in enumerate(resolver.sides):
        key = side.stream.key
        if not key or any((side.alias.lower(), k.lower()) not in held for k in key):
            continue
        bound = _bounding_column(i, resolver, predicate)
        if bound is not None:
            return EventWindow(bound, POINT_US, POINT_US)
        if side.stream.event_time is not None:
            time = exp.Column(this=identifier(side.stream.event_time), table=identifier(side.alias))
            return EventWindow(time.sql(dialect="spark"), POINT_US, POINT_US)
    return None


def _bounding_column(side: int, resolver: Resolver, predicate: str | None) -> str | None:
    """A TIMESTAMP column of input `side` that bounds the other input's event time in a
    two-way join's `predicate` (``b.ts <= a.expires``), if any."""
    if predicate is None or len(resolver.sides) != 2:
        return None
    left, right = resolver.sides
    parts = classify_predicate(
        predicate, left.alias, right.alias, left.stream.event_time, right.stream.event_time
    )
    for bound in parts.bounds:
        if bound.side != side:
            continue
        col: exp.Expr = exp.maybe_parse(bound.column, dialect="spark")
        if isinstance(col, exp.Column):
            typ = resolver.column_type(col)
            if typ is not None and typ.name == "TIMESTAMP":
                return bound.column
    return None
