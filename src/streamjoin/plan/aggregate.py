"""How a ``GROUP BY window(...)`` query runs: its join writes the columns the groups need to a
buffer, and a window is aggregated once, from the buffer, when no later join result can fall
into it.

When a window closes: a join result arrives in the batch of its last-arriving row, which was
on time, so its event time is at least W (the global watermark the batch started with). The
window's time column belongs to one input, whose rows trail the last-arriving one's by at most
the join's time windows allow: its `lag` (the same bound that keeps that input's state, see
`plan.retention.query_retention`). So after a batch that leaves the watermark at W, every result
still to come has ``time >= W - lag``, and each window ending at or before ``W - lag`` is
complete. A join whose windows do not bound the lag (a full-history join) never closes one, and
is refused.

The buffer keeps the joined rows of the open windows, as the join produced them, in units of a
batch (or, where its aggregates merge from partial ones, a row per pane and key: `partials`);
a closing window reads only the units whose rows may be in it, and a unit is dropped once
every window its rows are in has closed. Buffering the rows, not running totals, keeps every
aggregate exact (count(DISTINCT)) at the price of their bytes until the window closes.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from streamjoin.errors import UnsupportedError
from streamjoin.model import Aggregation, EventWindow, Query, SelectItem, TopN
from streamjoin.model.aggregate import WINDOW

END = "_sj_window_end"
"""The column of a group's window end, beside its SELECT items, until the group is chosen."""
AFTER, UPTO = "_sj_after", "_sj_upto"
"""The columns of held rows that carry the bounds of the window ends a close writes
(`GroupBuffer.held_sql`)."""


def _text(micros: int | None) -> str | None:
    return None if micros is None else str(micros)


@dataclass(frozen=True, slots=True)
class GroupBuffer:
    """Rows buffered per batch until their windows close, then grouped: a GROUP BY or top-N
    query's joined rows (`AggregatePlan`), or one stream's rows (`plan.groups`)."""

    name: str
    """The buffer's name in the manifest (its query's, or ``query.alias`` for a stream's)."""
    windowed: Aggregation | TopN
    """The GROUP BY or top-N over the rows."""
    select: tuple[SelectItem, ...]
    """The items of each group (or kept row), over the qualified columns."""
    columns: tuple[tuple[str, str], ...]
    """Each qualified column the groups read (``a.k``) and its name in the buffer."""
    lag_us: int
    """How far the window's time column of a row still to come may trail the watermark."""
    meaning: str
    """What a buffered row is (its query's signature): a changed query starts a new buffer."""
    time_stream: str
    """The stream whose event time the windows are of."""

    @property
    def window(self) -> EventWindow:
        """The event-time window of its groups."""
        return self.windowed.window

    @property
    def time_column(self) -> str:
        """The buffer column of the window's event time."""
        return dict(self.columns)[self.window.time]

    @property
    def buffer_signature(self) -> str:
        """What the buffer's rows mean: the query's signature and the buffered columns (a
        changed query, or SELECT list, starts a buffer of its own)."""
        text = repr((self.meaning, self.columns))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def closed_below(self, watermark: int | None) -> int | None:
        """The end at or before which every window is complete, after a batch that leaves the
        global watermark at `watermark` (None: no window is)."""
        return None if watermark is None else watermark - self.lag_us

    def first_needed(self, closed: int) -> int:
        """The oldest event time a window ending after `closed` may hold: buffered rows older
        than it are in closed windows only."""
        return closed - self.window.size_us + 1

    def group_sql(self, view: str, after: int | None, upto: int | None) -> str:
        """Spark SQL over the buffer `view`: the query's groups of the windows ending in
        ``(after, upto]`` (None: unbounded), its SELECT items and the window end (`END`)."""
        first = None if after is None else self.first_needed(after)
        return self._sql(view, _text(after), _text(upto), (first, upto))

    def held_sql(self, view: str) -> str:
        """`group_sql` over held rows (`view`) that lie in the windows' reach and carry the
        bounds as columns, `AFTER` and `UPTO` (micros; the least and greatest long for none):
        one text for every batch, so its plan is made once."""
        return self._sql(view, AFTER, UPTO, None)

    def _sql(
        self,
        view: str,
        after: str | None,
        upto: str | None,
        rows: tuple[int | None, int | None] | None,
    ) -> str:
        """The groups of the windows ending in ``(after, upto]`` (SQL of micros, None:
        unbounded) from `view`, whose rows are kept to event times in `rows` (``[first, upto)``,
        None: the rows carry the bounds, `held_sql`)."""
        agg = self.windowed
        if isinstance(agg, TopN):
            return self._top_sql(agg, view, after, upto, rows)
        items = tuple(self.rename(s.sql) for s in self.select)
        having = None if agg.having is None else self.rename(agg.having)
        return self.grouped_sql(view, after, upto, rows, items, having)

    def grouped_sql(
        self,
        view: str,
        after: str | None,
        upto: str | None,
        rows: tuple[int | None, int | None] | None,
        items: tuple[str, ...],
        having: str | None,
    ) -> str:
        """`_sql` of a GROUP BY whose SELECT items (in order) and HAVING over `view`'s
        columns are `items` and `having` (`plan.partials` merges them from pane rows)."""
        agg, window = self.windowed, self.window
        assert isinstance(agg, Aggregation)
        time = self.time_column
        carried = [AFTER, UPTO] if rows is None else []
        selected = [f"{sql} AS `{s.alias}`" for sql, s in zip(items, self.select, strict=True)]
        selected += [f"window.end AS {END}", *carried]
        where = []
        if rows is not None and rows[0] is not None:
            where.append(f"{time} >= timestamp_micros({rows[0]})")
        if rows is not None and rows[1] is not None:
            where.append(f"{time} < timestamp_micros({rows[1]})")
        sizes = f"'{window.size_us} microseconds', '{window.slide_us} microseconds'"
        group = [f"window({time}, {sizes})", *(self.rename(k) for k in agg.keys), *carried]
        sql = f"SELECT {', '.join(selected)} FROM {view}"
        if where:
            sql += f" WHERE {' AND '.join(where)}"
        sql += f" GROUP BY {', '.join(group)}"
        if having is not None:
            sql += f" HAVING {having}"
        ends = []
        if after is not None:
            ends.append(f"unix_micros({END}) > {after}")
        if upto is not None:
            ends.append(f"unix_micros({END}) <= {upto}")
        out = ", ".join([*(f"`{s.alias}`" for s in self.select), END])
        return f"SELECT {out} FROM ({sql})" + (f" WHERE {' AND '.join(ends)}" if ends else "")

    def _top_sql(
        self,
        top: TopN,
        view: str,
        after: str | None,
        upto: str | None,
        rows: tuple[int | None, int | None] | None,
    ) -> str:
        """The first rows of each window and key: every row put in each window holding it
        (starts the multiples of the slide, as Spark's), then ranked."""
        size, slide = top.window.size_us, top.window.slide_us
        ts = f"unix_micros({self.time_column})"
        last = f"({ts} - pmod({ts}, {slide}))"
        reach = -(-size // slide) - 1
        starts = f"explode(sequence({last} - {reach * slide}, {last}, CAST({slide} AS BIGINT)))"
        first, below = (None, None) if rows is None else rows
        where = [f"{ts} < {below}"] if below is not None else []
        where += [f"{ts} >= {first}"] if first is not None else []
        sql = f"SELECT *, {starts} AS _sj_start FROM {view}"
        if where:
            sql += f" WHERE {' AND '.join(where)}"
        ends = [f"_sj_start + {size} > {ts}"]
        ends += [f"_sj_start + {size} > {after}"] if after is not None else []
        ends += [f"_sj_start + {size} <= {upto}"] if upto is not None else []
        keys = ", ".join(["_sj_start", *(self.rename(k) for k in top.keys)])
        order = ", ".join(self._rename_order(o) for o in top.order)
        ranked = (
            f"SELECT *, ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY {order}) AS _sj_rank "
            f"FROM ({sql}) WHERE {' AND '.join(ends)}"
        )
        items = [f"{self.rename(s.sql)} AS `{s.alias}`" for s in self.select]
        items.append(f"timestamp_micros(_sj_start + {size}) AS {END}")
        return f"SELECT {', '.join(items)} FROM ({ranked}) WHERE _sj_rank <= {top.limit}"

    def _rename_order(self, term: str) -> str:
        """An ordering term (``b.x DESC NULLS LAST``) over the buffer's columns."""
        tree: exp.Expr = sqlglot.parse_one(f"SELECT 1 ORDER BY {term}", dialect="spark")
        ordered = tree.args["order"].expressions[0]
        ordered.set("this", exp.maybe_parse(self.rename(ordered.this.sql(dialect="spark"))))
        return str(ordered.sql(dialect="spark"))

    def rename(self, sql: str) -> str:
        """`sql` (over the query's qualified columns) over the buffer's column names."""
        names = dict(self.columns)

        def swap(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Column) and node.table.lower() != WINDOW:
                return exp.column(names[node.sql(dialect="spark")])
            return node

        tree: exp.Expr = exp.maybe_parse(sql, dialect="spark")
        return str(tree.transform(swap).sql(dialect="spark"))


@dataclass(frozen=True, slots=True)
class AggregatePlan(GroupBuffer):
    """One ``GROUP BY window`` (or top-N) query over a join: the joined columns it buffers and
    when its windows close."""

    query: Query
    """The query as written (its SELECT items over a group)."""

    @property
    def side(self) -> int:
        """The input whose event time the windows are of (its index in the query's sides)."""
        alias = self.window.source[0]
        return next(i for i, s in enumerate(self.query.sides) if s.alias.lower() == alias)

    def join_query(self) -> Query:
        """The query's join, selecting the buffered columns (what a batch's join produces)."""
        select = tuple(SelectItem(sql, name) for sql, name in self.columns)
        return dataclasses.replace(self.query, select=select)


def plan_aggregate(query: Query, lag: int | None, source: str = "<string>") -> AggregatePlan:
    """The plan of `query`'s GROUP BY, given how far its window's column may trail the
    watermark in a result still to come (`plan.physical.window_lag`).

    Raises:
        UnsupportedError: the window's column may trail without bound (a full-history join).
    """
    agg = query.windowed
    assert agg is not None
    window = agg.window
    columns = columns_read(agg, query.select)
    alias = window.source[0]
    side = next(s for s in query.sides if s.alias.lower() == alias)
    meaning = query.signature
    plan = AggregatePlan(query.name, agg, query.select, columns, 0, meaning, side.stream, query)
    alias = query.sides[plan.side].alias
    if lag is None:
        msg = (
            f"query {query.name}: GROUP BY window({window.time}, ...) over a join without a "
            f"time window bounding {alias!r} would never close a window (a result may pair a "
            f"row of {alias!r} with rows of any age); bound the join with "
            f"BETWEEN ... AND ... on the inputs' event times"
        )
        text = f"window({window.time}"
        raise UnsupportedError(msg, line=query.line, col=1, text=text, source=source)
    return dataclasses.replace(plan, lag_us=max(lag, 0))


def columns_read(
    agg: Aggregation | TopN, select: tuple[SelectItem, ...]
) -> tuple[tuple[str, str], ...]:
    """Every input column the groups read, in the order first met, with a buffer name."""
    texts = [agg.window.time, *agg.keys, *(s.sql for s in select)]
    if isinstance(agg, Aggregation) and agg.having is not None:
        texts.append(agg.having)
    if isinstance(agg, TopN):
        texts += [f"SELECT 1 ORDER BY {term}" for term in agg.order]
    seen: dict[str, str] = {}
    for text in texts:
        tree: exp.Expr = sqlglot.parse_one(text, dialect="spark")
        for col in tree.find_all(exp.Column):
            if col.table.lower() == WINDOW:
                continue
            sql = col.sql(dialect="spark")
            seen.setdefault(sql, f"_g{len(seen)}")
    return tuple(seen.items())
