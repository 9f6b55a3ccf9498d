"""Queries over windowed groups of single streams (`model.groups`): ``SELECT ... FROM s [WHERE
...] GROUP BY window(...), keys``, in Spark's form or Flink's ``TABLE(TUMBLE(...))``, the
join of two such subqueries on their window (Nexmark q8's shape), and a stream joined with one
(Nexmark q7's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp
from sqlglot.tokenizer_core import Token

from streamjoin.errors import UnsupportedError
from streamjoin.model import GroupQuery, SelectItem, StreamDef, StreamGroup, StreamRows
from streamjoin.plan.classify import conjuncts
from streamjoin.plan.groups import rows_plan, window_bound
from streamjoin.sql.aggregate import parse_aggregation
from streamjoin.sql.dialect import SPAN_KEY, node_error, span
from streamjoin.sql.positions import Statement
from streamjoin.sql.relations import check_clauses, select_items, stream_side
from streamjoin.sql.resolve import Resolver, identifier
from streamjoin.sql.tvf import Tvf, apply_tvf

_JOIN_USAGE = (
    "FROM (SELECT ..., window_start AS ws FROM TABLE(TUMBLE(...)) GROUP BY window_start, "
    "window_end, ...) a JOIN (SELECT ...) b ON a.ws = b.ws AND ..."
)


def is_group_query(select: exp.Select) -> bool:
    """Whether `select` groups one stream (no join), or joins a grouped subquery with another
    or with a stream."""
    from_ = select.args.get("from_")
    if from_ is None:
        return False
    joins = select.args.get("joins") or []
    if not joins:
        return select.args.get("group") is not None and isinstance(from_.this, exp.Table)
    relations = [from_.this, *(j.this for j in joins)]
    grouped = [_grouped(r) for r in relations]
    return any(grouped) and all(
        g or isinstance(r, exp.Table) for r, g in zip(relations, grouped, strict=True)
    )


def parse_group_query(
    stmt: Statement,
    tokens: list[Token],
    select: exp.Select,
    streams: Sequence[StreamDef],
    tvfs: Mapping[int, Tvf],
    head: tuple[str, str],
) -> GroupQuery:
    """The `GroupQuery` of `select` (`is_group_query`), named and sunk as `head` says.

    Raises:
        JobError: a group over a stream without an event time, an ungrouped column, a join
            of groups that does not match their windows; UnsupportedError: shapes not run.
    """
    name, sink = head
    joins = select.args.get("joins") or []
    if not joins:
        group = _stream_group(stmt, tokens, select, streams, tvfs, None)
        return GroupQuery(name, sink, (group,), group.select, line=stmt.line)
    if len(joins) != 1:
        msg = f"a join of grouped streams joins two of them: {_JOIN_USAGE}"
        raise node_error(stmt, joins[1].this, msg, unsupported=True)
    join = joins[0]
    if join.side or join.kind not in ("", "INNER"):
        msg = f"a join of grouped streams is an inner join: {_JOIN_USAGE}"
        raise node_error(stmt, join, msg, unsupported=True)
    for arg, value in select.args.items():
        if value and arg not in ("expressions", "from_", "joins", "where"):
            msg = f"the outer SELECT of a join of grouped streams picks and filters: {_JOIN_USAGE}"
            raise node_error(stmt, select, msg, unsupported=True)
    relations = [select.args["from_"].this, join.this]
    groups, rows = [], None
    for sub in relations:
        if not _grouped(sub):
            rows = _stream_rows(stmt, sub, streams)
            continue
        if not sub.alias:
            raise node_error(stmt, sub, "name the grouped subquery: (SELECT ...) AS a")
        groups.append(_stream_group(stmt, tokens, sub.this, streams, tvfs, sub.alias))
    names = [g.name for g in groups] + ([rows[0]] if rows else [])
    if names[0].lower() == names[1].lower():
        raise node_error(stmt, join.this, f"two inputs are called {names[0]!r}; alias one")
    conditions = [c for c in (join.args.get("on"), _where(select)) if c is not None]
    if not conditions:
        raise node_error(stmt, join, f"the join needs an ON condition: {_JOIN_USAGE}")
    named = [(g.name, g.select) for g in groups] + ([rows[:2]] if rows else [])
    for node in [*conditions, *select.expressions]:
        for found in node.find_all(exp.AggFunc, exp.Window):
            msg = f"a join of grouped streams joins their groups' rows as they are: {_JOIN_USAGE}"
            raise node_error(stmt, found, msg, unsupported=True)
    for condition in conditions:
        qualify_outputs(stmt, condition, named)
    on = exp.and_(*conditions)
    for item in select.expressions:
        qualify_outputs(stmt, item, named)
    items = select_items(stmt, select)
    if rows is None:
        _check_windows(stmt, on, *groups)
        return GroupQuery(name, sink, tuple(groups), items, on.sql(dialect="spark"), stmt.line)
    query = GroupQuery(
        name, sink, tuple(groups), items, on.sql(dialect="spark"), stmt.line, rows[2]
    )
    try:
        rows_plan(query)
    except UnsupportedError as e:
        raise node_error(stmt, on, e.message, unsupported=True) from None
    return query


def _stream_rows(
    stmt: Statement, relation: exp.Expr, streams: Sequence[StreamDef]
) -> tuple[str, list[SelectItem], StreamRows]:
    """A stream joined with groups: its alias, its columns as the query's inputs list them,
    and the `StreamRows`.

    Raises:
        JobError: an unknown stream, or one without an event time.
    """
    side = stream_side(stmt, relation, streams)
    mark = side.stream.watermark
    if mark is None:
        msg = (
            f"stream {side.stream.name!r} joins groups by its event time, and declares none "
            "(WATERMARK FOR ...)"
        )
        raise node_error(stmt, relation, msg)
    columns = [SelectItem(f"{side.alias}.{c.name}", c.name) for c in side.stream.columns]
    return side.alias, columns, StreamRows(side.alias, side.stream.name, mark.column)


def _grouped(relation: exp.Expr) -> bool:
    return (
        isinstance(relation, exp.Subquery)
        and isinstance(relation.this, exp.Select)
        and relation.this.args.get("group") is not None
        and not relation.this.args.get("joins")
    )


def _where(select: exp.Select) -> exp.Expr | None:
    where = select.args.get("where")
    return None if where is None else where.this


def _stream_group(
    stmt: Statement,
    tokens: list[Token],
    select: exp.Select,
    streams: Sequence[StreamDef],
    tvfs: Mapping[int, Tvf],
    output: str | None,
) -> StreamGroup:
    """One stream's groups: ``SELECT items FROM s [WHERE ...] GROUP BY window(...), keys``."""
    relation = select.args["from_"].this
    where = span(relation)
    tvf = tvfs.get(where[0]) if where else None
    if tvf is not None:
        apply_tvf(stmt, select, tvf)
    check_clauses(stmt, tokens, select)
    side = stream_side(stmt, relation, streams)
    resolver = Resolver(stmt, (side,), windowed=True)
    condition = _where(select)
    if condition is not None:
        Resolver(stmt, (side,)).qualify(condition)  # (rows are filtered before their window)
    for item in select.expressions:
        resolver.qualify(item)
    aggregation = parse_aggregation(stmt, select, resolver)
    assert aggregation is not None  # (a GROUP BY, by `is_group_query`)
    return StreamGroup(
        alias=side.alias,
        stream=side.stream.name,
        aggregation=aggregation,
        select=select_items(stmt, select),
        where=None if condition is None else condition.sql(dialect="spark"),
        output=output or side.alias,
    )


def qualify_outputs(
    stmt: Statement, root: exp.Expr, inputs: Sequence[tuple[str, Sequence[SelectItem]]]
) -> None:
    """Rewrite each column under `root` to ``name.column``, a column of one of the subqueries
    `inputs` (each its name and SELECT list).

    Raises:
        JobError: a column no input has, or two have.
    """
    for col in list(root.find_all(exp.Column)):
        table = col.table.lower()
        owners = [
            (name, item)
            for name, items in inputs
            if not table or name.lower() == table
            for item in items
            if item.alias.lower() == col.name.lower()
        ]
        if len(owners) != 1:
            listing = "; ".join(f"{n}: {', '.join(i.alias for i in items)}" for n, items in inputs)
            what = "ambiguous" if owners else "unknown"
            msg = f"{what} column {col.sql(dialect='spark')!r} (columns of {listing})"
            raise node_error(stmt, col, msg)
        name, item = owners[0]
        where = span(col)
        col.set("this", identifier(item.alias))
        col.set("table", identifier(name))
        if where is not None:
            col.meta[SPAN_KEY] = where


def _check_windows(stmt: Statement, on: exp.Expr, a: StreamGroup, b: StreamGroup) -> None:
    """`on` equates a bound of `a`'s window with the same bound of `b`'s, and the windows are
    alike: each pair the join makes is then of one window's groups, both closed in one batch."""
    wa, wb = a.aggregation.window, b.aggregation.window
    if (wa.size_us, wa.slide_us) != (wb.size_us, wb.slide_us):
        msg = f"the joined groups' windows differ ({wa.time} and {wb.time}); use the same window"
        raise node_error(stmt, on, msg, unsupported=True)
    bounds = {g.name.lower(): _bounds(g) for g in (a, b)}
    for node in conjuncts(on):
        if not isinstance(node, exp.EQ):
            continue
        sides = [node.this, node.expression]
        if not all(isinstance(c, exp.Column) for c in sides):
            continue
        found = [bounds.get(c.table.lower(), {}).get(c.name.lower()) for c in sides]
        if found[0] is not None and found[0] == found[1] and sides[0].table != sides[1].table:
            return
    msg = (
        "a join of grouped streams must match their windows, so that each window's pairs are "
        f"emitted when it closes: {_JOIN_USAGE}"
    )
    raise node_error(stmt, on, msg, unsupported=True)


def _bounds(group: StreamGroup) -> dict[str, str]:
    """The group's output columns that are its window's start or end, and which."""
    return {
        item.alias.lower(): bound
        for item in group.select
        if (bound := window_bound(item.sql)) is not None
    }
