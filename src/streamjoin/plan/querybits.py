"""Query-set bits: which members of a shared join a row of it belongs to (AJoin).

A shared join (`plan.shared`, `plan.shared_multiway`) outputs every column its members select or
test (`Columns`). Over those columns, `query_bits` is a BIGINT whose bit i says that the row
passes member i's conditions beyond the shared join's, each distinct condition tested once
whatever the number of members that use it; `side_filter` is what an input's row must pass for
some member to select it, when that is short enough to test inside the join.
"""

from __future__ import annotations

import functools
import typing as t
from decimal import Decimal, InvalidOperation

import sqlglot
from sqlglot import exp

if t.TYPE_CHECKING:
    from streamjoin.model import Job


def mask(bits: int) -> str:
    """A set of bits (0 to 63) as a BIGINT literal."""
    if bits < 1 << 63:
        return f"{bits}L"
    signed = bits - (1 << 64)
    return "shiftleft(1L, 63)" if signed == -(1 << 63) else f"({signed}L)"


SIDE_FILTER_TERMS = 16
"""The most conditions a side's filter in the shared join may hold (`side_filter`)."""
_RANGES: dict[type[exp.Expr], t.Callable[[t.Iterable[Decimal]], Decimal]] = {
    exp.GT: min,
    exp.GTE: min,
    exp.LT: max,
    exp.LTE: max,
}


def with_aliases(sql: str, aliases: t.Mapping[str, str]) -> str:
    """`sql` with each input's alias (the keys, lower case) replaced by the shared join's."""
    return _with_aliases(sql, tuple(sorted(aliases.items())))


@functools.lru_cache(maxsize=65536)
def _with_aliases(sql: str, aliases: tuple[tuple[str, str], ...]) -> str:
    # (Kept: a hundred queries from a few templates rename the same conjuncts again and again,
    # each a parse and a print of SQL.)
    renamed = dict(aliases)
    tree = sqlglot.parse_one(sql, dialect="spark")
    for col in tree.find_all(exp.Column):
        if col.table.lower() in renamed:
            col.set("table", exp.to_identifier(renamed[col.table.lower()]))
    return tree.sql(dialect="spark")


def numeric_columns(job: Job, inputs: t.Iterable[tuple[str, str]]) -> frozenset[str]:
    """The numeric columns of `inputs` (stream, alias), as ``alias.column``."""
    return frozenset(
        exp.column(c.name, table=alias).sql(dialect="spark")
        for stream, alias in inputs
        for c in job.stream(stream).columns
        if c.type.category == "numeric"
    )


def loosest(conds: t.Collection[str], numeric: t.Collection[str]) -> str | None:
    """The one condition that holds whenever any of `conds` does, if they all compare one
    `numeric` column with a number the same way (``x > 5``, ``x > 7``: ``x > 5``). (Only a
    numeric column: a string compared with numbers is cast to each literal's type, and casts
    to different types do not keep the order.)"""
    parsed = [sqlglot.parse_one(c, dialect="spark") for c in conds]
    first = parsed[0]
    pick = _RANGES.get(type(first))
    if pick is None:
        return None
    bounds = {}
    for c, node in zip(conds, parsed, strict=True):
        if type(node) is not type(first) or node.this != first.this:
            return None
        if not isinstance(node.this, exp.Column) or not isinstance(node.expression, exp.Literal):
            return None
        if not node.expression.is_number or node.this.sql(dialect="spark") not in numeric:
            return None
        try:
            bounds[Decimal(node.expression.name)] = c
        except InvalidOperation:
            return None
    return bounds[pick(bounds)]


def side_filter(sets: t.Sequence[frozenset[str]], numeric: t.Collection[str] = ()) -> str | None:
    """What a side's row must pass for some member to select it, as a short condition, or
    None: some member takes every row, or the members' selections are too many to test
    in the join (Spark repeats a join's conditions for every slice of state it reads).
    `numeric`: the side's numeric columns (`loosest`)."""
    if not all(sets):
        return None
    if all(len(one) == 1 for one in sets):
        one = loosest(sorted({c for one in sets for c in one}), numeric)
        if one is not None:
            return one
    distinct = sorted(set(sets), key=sorted)
    if sum(len(one) for one in distinct) > SIDE_FILTER_TERMS:
        return None
    return " OR ".join(f"({' AND '.join(sorted(one))})" for one in distinct)


class Columns:
    """A shared join's output columns, one per distinct expression over its inputs' aliases
    (`tables`)."""

    def __init__(self, tables: t.Collection[str]) -> None:
        self.tables = set(tables)
        self.names: dict[str, str] = {}

    def name(self, text: str) -> str:
        """The output column of expression `text`."""
        return self.names.setdefault(text, f"_sjc{len(self.names)}")

    def over(self, cond: str) -> str:
        """`cond` over the join's columns: each input's column replaced by the output column
        that carries it."""
        tree = sqlglot.parse_one(cond, dialect="spark")
        if isinstance(tree, exp.Column):  # (a boolean column: the root itself is replaced)
            tree = exp.Paren(this=tree)
        for col in list(tree.find_all(exp.Column)):
            if col.table in self.tables:
                col.replace(exp.column(self.name(col.sql(dialect="spark"))))
        return tree.sql(dialect="spark")


def query_bits(conds: t.Sequence[t.Collection[str]]) -> str:
    """The query-set bits of a row: ``all & ~(CASE WHEN c THEN 0 ELSE mask(c) END | ...)``
    where mask(c) holds the members whose conditions include c. Each distinct condition is
    tested once; a NULL clears its members' bits, as a NULL predicate drops a pair."""
    masks: dict[str, int] = {}
    for i, own in enumerate(conds):
        for c in own:
            masks[c] = masks.get(c, 0) | 1 << i
    every = mask((1 << len(conds)) - 1)
    if not masks:
        return every
    failed = " | ".join(f"CASE WHEN {c} THEN 0L ELSE {mask(m)} END" for c, m in masks.items())
    return f"{every} & ~({failed})"
