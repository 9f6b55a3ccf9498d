"""The reference of a query over windowed groups of single streams (`model.groups`), by brute
force.

9. A group query's input takes its stream's on-time rows that satisfy its WHERE, and groups
   them as in 7, emitted as in 8 with a lag of 0 (a window ending at e in the first batch after
   which ``W >= e``). A query of one input outputs its groups. A query joining two inputs pairs
   every group of one with every group of the other and keeps the pairs its ON condition holds
   for; a pair arrives in its groups' batch (checked: both groups arrive in the same one, as
   the condition matches their windows). A query joining a stream's rows with one input's
   groups pairs every group with every on-time row of the stream and keeps the pairs its ON
   condition holds for; a pair arrives in its group's batch (checked: the row arrived by
   then, as the condition bounds its event time by the group's window).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp

from streamjoin.model import GroupQuery, SelectItem
from streamjoin.plan.groups import plan_group_query
from streamjoin.reference.aggregate import aggregate_results
from streamjoin.reference.evaluate import compile_expression

Rows = Sequence[Mapping[str, object]]


def group_query_results(
    query: GroupQuery,
    rows: Mapping[str, Rows],
    arrived: Mapping[str, Sequence[int]],
    watermarks: Sequence[int | None],
    final: bool,
) -> list[tuple[tuple[object, ...], int]]:
    """The query's rows and the batch each arrives in, from each stream's on-time rows (`rows`,
    by stream, with the batch each arrived in: `arrived`)."""
    plan = plan_group_query(query)
    outputs = []
    for group, buffer in zip(query.inputs, plan.inputs, strict=True):
        keep = compile_expression(group.where) if group.where is not None else None
        names = [_column(sql) for sql, _ in buffer.columns]
        buffered = []
        for row, batch in zip(rows[group.stream], arrived[group.stream], strict=True):
            env = {group.alias: row}
            if keep is not None and keep(env) is not True:
                continue
            buffered.append((tuple(row[n] for n in names), batch))
        outputs.append(aggregate_results(buffer, buffered, watermarks, final))
    if query.rows is not None:
        return _rows_joined(query, outputs[0], rows, arrived)
    if len(outputs) == 1:
        return outputs[0]
    a, b = query.inputs
    assert query.on is not None
    on = compile_expression(query.on)
    items = [compile_expression(s.sql) for s in query.select]
    joined = []
    for left, left_batch in outputs[0]:
        for right, right_batch in outputs[1]:
            env = {a.name: _named(a.select, left), b.name: _named(b.select, right)}
            if on(env) is not True:
                continue
            if left_batch != right_batch:
                msg = f"groups of one pair emitted in batches {left_batch} and {right_batch}"
                raise AssertionError(msg)
            joined.append((tuple(f(env) for f in items), left_batch))
    return joined


def _rows_joined(
    query: GroupQuery,
    groups: Sequence[tuple[tuple[object, ...], int]],
    rows: Mapping[str, Rows],
    arrived: Mapping[str, Sequence[int]],
) -> list[tuple[tuple[object, ...], int]]:
    """`query`'s pairs of its one input's groups (each with its batch) and its stream's rows."""
    assert query.rows is not None and query.on is not None
    (g,), mine = query.inputs, query.rows
    on = compile_expression(query.on)
    items = [compile_expression(s.sql) for s in query.select]
    joined = []
    for values, batch in groups:
        named = _named(g.select, values)
        for row, row_batch in zip(rows[mine.stream], arrived[mine.stream], strict=True):
            env = {g.name: named, mine.alias: row}
            if on(env) is not True:
                continue
            if row_batch > batch:
                msg = f"a group emitted in batch {batch} pairs with a row of batch {row_batch}"
                raise AssertionError(msg)
            joined.append((tuple(f(env) for f in items), batch))
    return joined


def _named(select: Sequence[SelectItem], values: tuple[object, ...]) -> dict[str, object]:
    return {item.alias.lower(): value for item, value in zip(select, values, strict=True)}


def _column(sql: str) -> str:
    col: exp.Expr = sqlglot.parse_one(sql, dialect="spark")
    assert isinstance(col, exp.Column)
    return col.name.lower()
