"""How a query over windowed groups of single streams runs (`model.groups`): each input's rows
go to a buffer of their own as a batch reads them, and a window's groups are computed from the
buffer once the watermark passes its end (a lag of 0: every row still to come is at or above
the watermark). Two inputs' groups of the windows a batch closes are joined then, in that batch:
the join's condition matches their windows, so no pair waits for a later batch.

A stream's rows joined with one stream's groups (Nexmark q7: each bid whose price is its
window's highest) pair in the batch a group closes, with the rows kept in the stream's state:
the condition must bound a row's event time by the groups' window (`RowsPlan`), so that every
row a group may pair with has arrived when it closes, and a row is kept until the last group it
may pair with has closed."""

from __future__ import annotations

from dataclasses import dataclass

from streamjoin.errors import UnsupportedError
from streamjoin.model import GroupQuery, StreamGroup
from streamjoin.model.aggregate import WINDOW
from streamjoin.plan.aggregate import GroupBuffer, columns_read
from streamjoin.plan.classify import classify_predicate


@dataclass(frozen=True, slots=True)
class RowsPlan:
    """How a stream's rows meet the groups they join (`GroupQuery.rows`): a row with event time
    ts pairs only with groups whose window ends at e with ``ts - e`` in ``[lo_us, hi_us]``."""

    lo_us: int
    hi_us: int

    @property
    def lag_us(self) -> int:
        """How long after its end a group waits: until the watermark passes ``e + hi``, so that
        every row that may pair with it has arrived (a row still to come has ``ts >= W``)."""
        return max(0, self.hi_us + 1)

    @property
    def retain_us(self) -> int:
        """How long the stream keeps a row: a group still to close ends after ``W - lag``, so
        it pairs with rows from ``W - lag + lo`` on."""
        return self.lag_us - self.lo_us

    def least(self, closed: int | None) -> int | None:
        """The oldest event time a row pairing with a group of a window ending after `closed`
        may have (None: any)."""
        return None if closed is None else closed + self.lo_us


def rows_plan(query: GroupQuery) -> RowsPlan | None:
    """The bounds `query`'s condition puts on its rows' event time against the end of its
    groups' window (None: the query joins no stream's rows).

    Raises:
        UnsupportedError: the condition does not bound the rows' event time on both sides by a
            column of the groups' window (``window_start`` or ``window_end``).
    """
    rows = query.rows
    if rows is None:
        return None
    assert query.on is not None
    (group,) = query.inputs
    size = group.aggregation.window.size_us
    lows, highs = [], []
    for item in group.select:
        bound = window_bound(item.sql)
        w = None
        if bound is not None:
            parts = classify_predicate(query.on, rows.alias, group.name, rows.time, item.alias)
            w = parts.window  # (the window column minus the row's time, in [lo, hi])
        if w is None:
            continue
        shift = size if bound == "start" else 0  # (e = start + size)
        if w.hi_us is not None:
            lows.append(-w.hi_us - shift)
        if w.lo_us is not None:
            highs.append(-w.lo_us - shift)
    if not lows or not highs:
        msg = (
            f"query {query.name!r}: the condition must bound {rows.alias}.{rows.time} on both "
            f"sides by the window of {group.name!r} (e.g. {rows.alias}.{rows.time} BETWEEN "
            f"{group.name}.window_end - INTERVAL '10' SECOND AND {group.name}.window_end, with "
            "window_end in its SELECT list): a row then waits only for the groups it may meet"
        )
        raise UnsupportedError(msg, line=query.line, col=1, text=f"JOIN ({group.name})")
    return RowsPlan(max(lows), min(highs))


def window_bound(sql: str) -> str | None:
    """``start`` or ``end`` when `sql` is that bound of a group's window, else None."""
    for bound in ("start", "end"):
        if sql.lower() in (f"{WINDOW}.{bound}", f"`{WINDOW}`.`{bound}`"):
            return bound
    return None


@dataclass(frozen=True, slots=True)
class GroupQueryPlan:
    """A group query: a buffer per input (`inputs[i]` for `query.inputs[i]`)."""

    query: GroupQuery
    inputs: tuple[GroupBuffer, ...]
    rows: RowsPlan | None = None

    @property
    def name(self) -> str:
        """The query's name."""
        return self.query.name

    def rows_sql(self, i: int, view: str, last: str | None = None) -> str:
        """Spark SQL of input `i`'s rows to buffer, from its stream's rows of a batch in
        `view`: the columns its groups read, under their buffer names (and `last`, SQL of one
        more column after them, where given)."""
        group, buffer = self.query.inputs[i], self.inputs[i]
        items = [f"{sql} AS `{name}`" for sql, name in buffer.columns] + ([last] if last else [])
        sql = f"SELECT {', '.join(items)} FROM {view} AS `{group.alias}`"
        return sql if group.where is None else f"{sql} WHERE {group.where}"

    def output_sql(self, views: tuple[str, ...], rows: str | None = None) -> str:
        """Spark SQL of the query's rows from its inputs' groups (in `views`, input order) and
        the relation of its stream's rows (`rows`, when it joins them)."""
        if self.query.rows is not None:
            assert rows is not None
            # (Tumbling windows of the rows' own stream have at most one group a row: the side
            # to broadcast. Spark, which cannot size the groups (rows of an RDD), would
            # broadcast the rows' files of the whole reach.)
            group = self.query.inputs[0]
            small = group.stream == self.query.rows.stream and self.inputs[0].window.tumbling
            return _joined(self.query, (*views, rows), broadcast=small)
        if len(views) == 1:
            return f"SELECT * FROM {views[0]}"
        return _joined(self.query, views)


def spark_sql(query: GroupQuery, views: dict[str, str]) -> str:
    """The query as one Spark SQL statement over its streams (`views`, by stream name, each
    with its watermark): what Spark's own streaming runs for it, in append mode."""
    parts = []
    for g in query.inputs:
        w = g.aggregation.window
        window = f"window({w.time}, '{w.size_us} microseconds', '{w.slide_us} microseconds')"
        items = ", ".join(f"{s.sql} AS `{s.alias}`" for s in g.select)
        sql = f"SELECT {items} FROM {views[g.stream]} AS `{g.alias}`"
        sql += f" WHERE {g.where}" if g.where else ""
        sql += f" GROUP BY {', '.join([window, *g.aggregation.keys])}"
        having = g.aggregation.having
        parts.append(sql + (f" HAVING {having}" if having else ""))
    if query.rows is not None:
        return _joined(query, (f"({parts[0]})", views[query.rows.stream]))
    if len(parts) == 1:
        return parts[0]
    return _joined(query, tuple(f"({p})" for p in parts))


def _joined(query: GroupQuery, relations: tuple[str, ...], *, broadcast: bool = False) -> str:
    """The query's rows from its two inputs (`relations`: its groups in input order, then its
    stream's rows), joined; with `broadcast`, the first input (groups) broadcast."""
    names = [g.name for g in query.inputs] + ([query.rows.alias] if query.rows else [])
    items = ", ".join(f"{s.sql} AS `{s.alias}`" for s in query.select)
    a, b = (f"{r} AS `{n}`" for r, n in zip(relations, names, strict=True))
    hint = f"/*+ BROADCAST(`{names[0]}`) */ " if broadcast else ""
    return f"SELECT {hint}{items} FROM {a} JOIN {b} ON ({query.on})"


def plan_group_query(query: GroupQuery) -> GroupQueryPlan:
    """The buffers of `query`'s inputs, named by the query (and the input's alias when it
    joins two)."""
    rows = rows_plan(query)
    lag = 0 if rows is None else rows.lag_us
    buffers = []
    for group in query.inputs:
        name = query.name if len(query.inputs) == 1 else f"{query.name}.{group.name}"
        buffers.append(_buffer(name, group, query.signature, lag))
    return GroupQueryPlan(query, tuple(buffers), rows)


def _buffer(name: str, group: StreamGroup, meaning: str, lag: int) -> GroupBuffer:
    agg = group.aggregation
    columns = columns_read(agg, group.select)  # (WHERE runs before the buffer)
    return GroupBuffer(name, agg, group.select, columns, lag, meaning, group.stream)
