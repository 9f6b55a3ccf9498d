"""How a query over windowed groups of single streams runs (`model.groups`): each input's rows
go to a buffer of their own as a batch reads them, and a window's groups are computed from the
buffer once the watermark passes its end (a lag of 0: every row still to come is at or above
the watermark). Two inputs' groups of the windows a batch closes are joined then, in that batch:
the join's condition matches their windows, so no pair waits for a later batch."""

from __future__ import annotations

from dataclasses import dataclass

from streamjoin.model import GroupQuery, StreamGroup
from streamjoin.plan.aggregate import GroupBuffer, columns_read


@dataclass(frozen=True, slots=True)
class GroupQueryPlan:
    """A group query: a buffer per input (`inputs[i]` for `query.inputs[i]`)."""

    query: GroupQuery
    inputs: tuple[GroupBuffer, ...]

    @property
    def name(self) -> str:
        """The query's name."""
        return self.query.name

    def rows_sql(self, i: int, view: str) -> str:
        """Spark SQL of input `i`'s rows to buffer, from its stream's rows of a batch in
        `view`: the columns its groups read, under their buffer names."""
        group, buffer = self.query.inputs[i], self.inputs[i]
        items = ", ".join(f"{sql} AS `{name}`" for sql, name in buffer.columns)
        sql = f"SELECT {items} FROM {view} AS `{group.alias}`"
        return sql if group.where is None else f"{sql} WHERE {group.where}"

    def output_sql(self, views: tuple[str, ...]) -> str:
        """Spark SQL of the query's rows from its inputs' groups (in `views`, input order)."""
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
    if len(parts) == 1:
        return parts[0]
    return _joined(query, tuple(f"({p})" for p in parts))


def _joined(query: GroupQuery, relations: tuple[str, ...]) -> str:
    """The query's rows from its two inputs' groups (`relations`, input order), joined."""
    (a, b), items = query.inputs, ", ".join(f"{s.sql} AS `{s.alias}`" for s in query.select)
    return (
        f"SELECT {items} FROM {relations[0]} AS `{a.name}` JOIN {relations[1]} AS `{b.name}` "
        f"ON ({query.on})"
    )


def plan_group_query(query: GroupQuery) -> GroupQueryPlan:
    """The buffers of `query`'s inputs, named by the query (and the input's alias when it
    joins two)."""
    buffers = []
    for group in query.inputs:
        name = query.name if len(query.inputs) == 1 else f"{query.name}.{group.name}"
        buffers.append(_buffer(name, group, query.signature))
    return GroupQueryPlan(query, tuple(buffers))


def _buffer(name: str, group: StreamGroup, meaning: str) -> GroupBuffer:
    agg = group.aggregation
    columns = columns_read(agg, group.select)  # (WHERE runs before the buffer)
    return GroupBuffer(name, agg, group.select, columns, 0, meaning, group.stream)
