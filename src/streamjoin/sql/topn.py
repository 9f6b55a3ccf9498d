"""Top-N queries: ``SELECT cols FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY window(...),
keys ORDER BY ...) AS rn FROM a JOIN b ON ...) WHERE rn <= N`` into a join query and a `TopN`."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from streamjoin.model import EventWindow, SelectItem, TopN
from streamjoin.model.aggregate import POINT_US
from streamjoin.model.intervals import whole_number
from streamjoin.sql.aggregate import is_event_time, is_window, window_of
from streamjoin.sql.dialect import node_error
from streamjoin.sql.positions import Statement
from streamjoin.sql.resolve import Resolver
from streamjoin.sql.rowgroups import row_window

_USAGE = (
    "SELECT cols FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY window(<event time>, "
    "'<size>'), keys ORDER BY ...) AS rn FROM a JOIN b ON ...) WHERE rn <= N"
)
_OUTER_CLAUSES = frozenset({"expressions", "from_", "where"})


@dataclass
class Ranked:
    """The inner SELECT of a top-N query (its ranking item taken out) and what the outer
    SELECT keeps of it."""

    outer: exp.Select
    inner: exp.Select
    over: exp.Window
    limit: int
    rank: str
    """The ranking item's name (which the outer SELECT may not pick)."""
    kept: list[tuple[str, str]] = field(default_factory=list)
    """Per outer item: the inner item's alias and the output name (set by `keep`)."""

    def keep(self, stmt: Statement) -> None:
        """Match the outer SELECT's columns with the inner items (its stars expanded).

        Raises:
            UnsupportedError: an outer item that is not a column of the subquery.
        """
        names = {i.alias_or_name.lower() for i in self.inner.expressions}
        for item in self.outer.expressions:
            column = item.this if isinstance(item, exp.Alias) else item
            if (
                not isinstance(column, exp.Column)
                or column.table
                or column.name.lower() not in names
            ):
                msg = f"select a column of the subquery ({', '.join(sorted(names))})"
                if isinstance(column, exp.Column) and column.name.lower() == self.rank.lower():
                    msg = (
                        "selecting the rank is not supported: the rows come in their order's place"
                    )
                raise node_error(stmt, item, msg, unsupported=True)
            self.kept.append((column.name, item.alias_or_name))

    def top(self, stmt: Statement, resolver: Resolver, predicate: str | None = None) -> TopN:
        """The `TopN`, its PARTITION BY and ORDER BY qualified by `resolver`; a PARTITION BY
        holding a keyed input's key is per row of it, over the join `predicate`
        (`sql.rowgroups`)."""
        parts = list(self.over.args.get("partition_by") or [])
        windows = [p for p in parts if is_window(p) or is_event_time(p, resolver)]
        row = None if windows else row_window(parts, resolver, predicate)
        if row is not None:
            return TopN(row, *self._keys_and_order(stmt, resolver, parts, None), self.limit)
        if len(windows) != 1:
            msg = (
                "a top-N over a stream partitions by one event-time window (or an input's event "
                "time, or the whole PRIMARY KEY of an input), to know when a group is complete: "
                f"{_USAGE}"
            )
            raise node_error(stmt, self.over, msg, unsupported=True)
        window = _partition_window(stmt, windows[0], resolver)
        return TopN(window, *self._keys_and_order(stmt, resolver, parts, windows[0]), self.limit)

    def _keys_and_order(
        self, stmt: Statement, resolver: Resolver, parts: list[exp.Expr], window: exp.Expr | None
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The PARTITION BY keys but `window`, and the ORDER BY terms, qualified."""
        keys = []
        for p in parts:
            if p is not window:
                resolver.qualify(p)
                keys.append(p.sql(dialect="spark"))
        order = self.over.args.get("order")
        if order is None:
            raise node_error(stmt, self.over, f"ROW_NUMBER() needs an ORDER BY: {_USAGE}")
        terms = []
        for term in order.expressions:
            resolver.qualify(term)
            desc = bool(term.args.get("desc"))
            nulls_first = term.args.get("nulls_first")
            first = (not desc) if nulls_first is None else bool(nulls_first)
            written = term.this.sql(dialect="spark")
            direction = "DESC" if desc else "ASC"
            terms.append(f"{written} {direction} NULLS {'FIRST' if first else 'LAST'}")
        return tuple(keys), tuple(terms)

    def select(self, items: tuple[SelectItem, ...]) -> tuple[SelectItem, ...]:
        """The query's output: the inner `items` the outer SELECT keeps, under its names."""
        by_alias = {i.alias.lower(): i for i in items}
        return tuple(SelectItem(by_alias[inner.lower()].sql, name) for inner, name in self.kept)


def unwrap_ranked(stmt: Statement, select: exp.Select) -> Ranked | None:
    """The top-N around a join, if `select` is one; the inner SELECT loses its ranking item.
    Its outer columns are matched by `Ranked.keep` once the inner stars are expanded.

    Raises:
        JobError: a subquery in FROM that is not a top-N of a join, or a top-N written other
            than as ``WHERE rn <= N``.
    """
    from_ = select.args.get("from_")
    if from_ is None or not isinstance(from_.this, exp.Subquery):
        return None
    inner = from_.this.this
    ranks = [
        item
        for item in (inner.expressions if isinstance(inner, exp.Select) else [])
        if isinstance(item, exp.Alias) and isinstance(item.this, exp.Window)
    ]
    if not isinstance(inner, exp.Select) or len(ranks) != 1:
        msg = f"a subquery in FROM is supported only as a top-N: {_USAGE}"
        raise node_error(stmt, from_.this, msg, unsupported=True)
    for arg, value in select.args.items():
        if value and arg not in _OUTER_CLAUSES:
            msg = f"a top-N's outer SELECT only picks columns and filters the rank: {_USAGE}"
            raise node_error(stmt, select, msg, unsupported=True)
    rank, over = ranks[0], ranks[0].this
    if not isinstance(over.this, exp.RowNumber):
        msg = f"of the window functions, only ROW_NUMBER() is supported: {_USAGE}"
        raise node_error(stmt, over, msg, unsupported=True)
    limit = _limit(stmt, select, rank.alias)
    inner.set("expressions", [i for i in inner.expressions if i is not rank])
    return Ranked(select, inner, over, limit, rank.alias)


def _limit(stmt: Statement, select: exp.Select, rank: str) -> int:
    """N of ``WHERE rn <= N`` (also ``rn < N + 1`` and ``rn = 1``)."""
    where = select.args.get("where")
    cond = where.this if where is not None else None
    bound = None
    if isinstance(cond, (exp.LTE, exp.LT, exp.EQ)):
        left, right = cond.this, cond.expression
        if (
            isinstance(left, exp.Column)
            and left.name.lower() == rank.lower()
            and isinstance(right, exp.Literal)
            and right.is_int
        ):
            n = whole_number(right.this)
            if n is not None:
                bound = {exp.LTE: n, exp.LT: n - 1, exp.EQ: n if n == 1 else None}[type(cond)]
    if bound is None or bound < 1:
        msg = f"a top-N keeps the first rows of each group: WHERE {rank} <= N, N >= 1"
        raise node_error(stmt, cond if cond is not None else select, msg, unsupported=True)
    return bound


def _partition_window(stmt: Statement, node: exp.Expr, resolver: Resolver) -> EventWindow:
    if is_window(node):
        assert isinstance(node, exp.Anonymous)
        return window_of(stmt, node, resolver)
    resolver.qualify(node)
    return EventWindow(node.sql(dialect="spark"), POINT_US, POINT_US)
