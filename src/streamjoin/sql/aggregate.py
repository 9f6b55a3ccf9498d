"""``GROUP BY window(time, 'size'[, 'slide']), keys [HAVING ...]`` of a join query into an
`Aggregation`, with the checks Spark's analyzer would make, reported at the written text."""

from __future__ import annotations

from sqlglot import exp

from streamjoin.model import Aggregation, EventWindow
from streamjoin.model.aggregate import POINT_US, WINDOW
from streamjoin.model.intervals import unit_micros, whole_number
from streamjoin.sql.dialect import node_error
from streamjoin.sql.positions import Statement
from streamjoin.sql.relations import AGGREGATES
from streamjoin.sql.resolve import Resolver
from streamjoin.sql.rowgroups import row_window

_USAGE = (
    "GROUP BY window(<event time>, '<size>'[, '<slide>']), <keys> "
    "(or an input's event-time column among the keys, or the whole PRIMARY KEY of an input)"
)


def parse_aggregation(
    stmt: Statement, select: exp.Select, resolver: Resolver, predicate: str | None = None
) -> Aggregation | None:
    """The query's aggregation, its expressions qualified in place; None without GROUP BY.
    Groups holding a keyed input's key are per row of it (`sql.rowgroups`), over the join
    `predicate` (qualified Spark SQL, if any).

    Raises:
        JobError: no window or two, a window over a column that is not an event time, a size
            that is not a duration, a selected column neither grouped nor aggregated.
    """
    group = select.args.get("group")
    having = select.args.get("having")
    if group is None:
        if having is not None:
            raise node_error(stmt, having, "HAVING needs a GROUP BY")
        return None
    windows = [g for g in group.expressions if is_window(g)]
    if not windows:
        times = [g for g in group.expressions if is_event_time(g, resolver)]
        if len(times) == 1:
            # Grouping by an input's event time: a window of one instant, which the watermark
            # closes as it passes (the column stays a key, for SELECT).
            resolver.qualify(times[0])
            point = EventWindow(times[0].sql(dialect="spark"), POINT_US, POINT_US)
            return _grouped_by(stmt, select, resolver, point, list(group.expressions), having)
        if not times:
            row = row_window(list(group.expressions), resolver, predicate)
            if row is not None:
                return _grouped_by(stmt, select, resolver, row, list(group.expressions), having)
    if len(windows) != 1:
        what = "two windows" if windows else "no window"
        msg = (
            f"GROUP BY has {what}; a continuous aggregation groups by one event-time window, "
            f"emitted when the watermark closes it: {_USAGE}"
        )
        raise node_error(stmt, windows[1] if windows else group, msg, unsupported=True)
    window = window_of(stmt, windows[0], resolver)
    rest = [g for g in group.expressions if g is not windows[0]]
    return _grouped_by(stmt, select, resolver, window, rest, having)


def _grouped_by(
    stmt: Statement,
    select: exp.Select,
    resolver: Resolver,
    window: EventWindow,
    rest: list[exp.Expr],
    having: exp.Having | None,
) -> Aggregation:
    """The aggregation by `window` and the other GROUP BY expressions, `rest`."""
    keys = []
    for key in rest:
        if key.find(exp.AggFunc) is not None:
            raise node_error(stmt, key, "an aggregate cannot be a GROUP BY key")
        resolver.qualify(key)
        keys.append(key.sql(dialect="spark", comments=False))
    condition = None
    if having is not None:
        resolver.qualify(having.this)
        check_grouped(stmt, having.this, keys, "HAVING")
        condition = having.this.sql(dialect="spark", comments=False)
    for item in select.expressions:
        check_grouped(stmt, item.this if isinstance(item, exp.Alias) else item, keys, "SELECT")
    return Aggregation(window, tuple(keys), condition)


def is_event_time(node: exp.Expr, resolver: Resolver) -> bool:
    """Whether `node` is a column that is its input's event time."""
    if not isinstance(node, exp.Column):
        return False
    for side in resolver.sides:
        if node.table and side.alias.lower() != node.table.lower():
            continue
        if (side.stream.event_time or "").lower() == node.name.lower():
            return True
    return False


def is_window(node: exp.Expr) -> bool:
    """Whether `node` is a call of Spark's ``window`` function."""
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == WINDOW


def window_of(stmt: Statement, call: exp.Anonymous, resolver: Resolver) -> EventWindow:
    """The `EventWindow` of a ``window(time, size[, slide])`` call, its time qualified."""
    args = call.expressions
    if not 2 <= len(args) <= 3:
        msg = f"window takes an event time, a size and an optional slide: {_USAGE}"
        raise node_error(stmt, call, msg, unsupported=len(args) == 4)
    time = args[0]
    if not isinstance(time, exp.Column):
        raise node_error(stmt, time, f"the window's event time must be a column: {_USAGE}")
    resolver.qualify(time)
    side = next(s for s in resolver.sides if s.alias.lower() == time.table.lower())
    if (side.stream.event_time or "").lower() != time.name.lower():
        declared = side.stream.event_time
        why = f"its event time is {declared!r}" if declared else "it declares no WATERMARK"
        msg = (
            f"window over {time.sql(dialect='spark')}: windows close by the watermark, so they "
            f"need the stream's event-time column, and in stream {side.stream.name!r} {why}"
        )
        raise node_error(stmt, time, msg)
    size = _duration(stmt, args[1])
    slide = _duration(stmt, args[2]) if len(args) == 3 else size
    try:
        return EventWindow(time.sql(dialect="spark"), size, slide)
    except ValueError as err:
        raise node_error(stmt, call, str(err)) from None


def _duration(stmt: Statement, node: exp.Expr) -> int:
    """Microseconds of ``'10 seconds'`` or ``INTERVAL '10' SECOND``."""
    text = None
    if isinstance(node, exp.Literal) and node.is_string:
        text = node.this
    elif isinstance(node, exp.Interval) and node.unit is not None:
        text = f"{node.this.name} {node.unit.name}"
    parts = (text or "").split()
    micros = unit_micros(parts[1]) if len(parts) == 2 else None
    n = whole_number(parts[0]) if parts else None
    if micros is None or n is None or n <= 0:
        msg = "a window's size and slide are durations such as '10 seconds' or '1 minute'"
        raise node_error(stmt, node, msg)
    return n * micros


def check_grouped(stmt: Statement, node: exp.Expr, keys: list[str], clause: str) -> None:
    """Every column of `node` outside an aggregate is inside a grouping key or is the window;
    DISTINCT only in count, of one expression.

    Raises:
        JobError: a column neither grouped nor aggregated; UnsupportedError: another DISTINCT.
    """
    if type(node) in AGGREGATES:
        distinct = node.this if isinstance(node.this, exp.Distinct) else None
        if distinct is not None and (
            not isinstance(node, exp.Count) or len(distinct.expressions) != 1
        ):
            msg = "DISTINCT is supported in count(DISTINCT x), of one expression"
            raise node_error(stmt, node, msg, unsupported=True)
        return
    if node.sql(dialect="spark", comments=False) in keys:
        return
    if isinstance(node, exp.Column):
        if node.table.lower() != WINDOW:
            msg = (
                f"{clause}: {node.sql(dialect='spark')} is neither grouped nor aggregated; add "
                "it to GROUP BY or aggregate it (min, max, ...)"
            )
            raise node_error(stmt, node, msg)
        return
    for child in node.iter_expressions():
        check_grouped(stmt, child, keys, clause)
