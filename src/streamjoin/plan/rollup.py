"""How a rollup runs (`model.aggregate.Rollup`): groups with no window over the rows a windowed
GROUP BY emits, kept as running partial aggregates per group.

Each batch that emits inner rows aggregates them per group into partials (count; sum and the
count of values summed; min; max), merges them into the groups' partials of the batches before
(a table under the checkpoint, written anew under the batch's id, so a replay overwrites it),
and writes the new values of the groups it touched: an updating result whose newest row per
group is the group's value so far. A batch with no inner rows writes nothing and keeps the
table. The table has a row per group ever seen: it is the rollup's state.
"""

from __future__ import annotations

import hashlib
import typing as t
from dataclasses import dataclass

from sqlglot import exp

from streamjoin.model import Query
from streamjoin.model.aggregate import Rollup

if t.TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class RollupPlan:
    """A query's rollup: its partial columns and the SQL of each step."""

    query: Query

    @property
    def rollup(self) -> Rollup:
        """The rollup of the query."""
        assert self.query.rollup is not None
        return self.query.rollup

    @property
    def name(self) -> str:
        """The query's name (its inner rows come under it)."""
        return self.query.name

    @property
    def state_name(self) -> str:
        """The name of its table of partials in the manifest."""
        return f"{self.query.name}.rollup"

    @property
    def signature(self) -> str:
        """What the table's rows mean: the query and its rollup (a change starts afresh)."""
        text = repr((self.query.signature, self.query.select, self.rollup))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def partial_sql(self, rows: str) -> str:
        """The partials per group of the inner rows in view `rows`."""
        keys = [f"{k} AS `_k{i}`" for i, k in enumerate(self.rollup.keys)]
        parts = [
            f"{call} AS `{name}`"
            for i, agg in enumerate(self._aggregates())
            for name, call, _ in _partials(i, agg)
        ]
        group = f" GROUP BY {', '.join(self.rollup.keys)}" if self.rollup.keys else ""
        alias = f"`{self.rollup.alias}`"
        return f"SELECT {', '.join([*keys, *parts])} FROM {rows} AS {alias}{group}"

    def merge_sql(
        self, before: str | None, partial: str, types: Mapping[str, str] | None = None
    ) -> str:
        """The partials of every group after the batch: `before`'s (None: no table yet)
        merged with the batch's `partial`, each cast to its type in `types` (Spark's SQL
        name, by partial column), which a sum of sums would widen: a DECIMAL(p, s)'s sum is a
        DECIMAL(p + 10, s), so the table's, and the output's, type would change every batch."""
        keys = [f"`_k{i}`" for i in range(len(self.rollup.keys))]
        types = types or {}
        merged = [
            f"CAST({merge}(`{name}`) AS {types[name]}) AS `{name}`"
            if merge == "sum" and name in types  # (a min or a max keeps its type)
            else f"{merge}(`{name}`) AS `{name}`"
            for i, agg in enumerate(self._aggregates())
            for name, _, merge in _partials(i, agg)
        ]
        rows = (
            partial
            if before is None
            else f"(SELECT * FROM {before} UNION ALL SELECT * FROM {partial})"
        )
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        return f"SELECT {', '.join([*keys, *merged])} FROM {rows}{group}"

    def output_sql(self, table: str, partial: str) -> str:
        """The rollup's rows of the groups the batch touched (those in `partial`), from the
        merged `table`."""
        trees = self._trees()
        finals = {id(agg): _final(i, agg) for i, agg in enumerate(_calls(trees))}
        renames = {k: f"t.`_k{i}`" for i, k in enumerate(self.rollup.keys)}

        def swap(node: exp.Expr) -> exp.Expr:
            if id(node) in finals:
                return exp.maybe_parse(finals[id(node)], dialect="spark")
            text = node.sql(dialect="spark")
            if text in renames:  # (a key, a column or any expression: its stored value)
                return exp.maybe_parse(renames[text], dialect="spark")
            return node

        items = []
        for item, tree in zip(self.rollup.select, trees, strict=True):
            value = tree.transform(swap, copy=False).sql(dialect="spark")
            items.append(f"{value} AS `{item.alias}`")
        touched = " AND ".join(f"t.`_k{i}` <=> p.`_k{i}`" for i in range(len(self.rollup.keys)))
        sql = f"SELECT {', '.join(items)} FROM {table} AS t"
        if touched:
            sql += f" LEFT SEMI JOIN {partial} AS p ON {touched}"
        return sql

    def _trees(self) -> list[exp.Expr]:
        """The SELECT items' expressions, parsed afresh."""
        return [exp.maybe_parse(s.sql, dialect="spark") for s in self.rollup.select]

    def _aggregates(self) -> list[exp.AggFunc]:
        """Every aggregate call of the SELECT list, in order (one partial set each)."""
        return _calls(self._trees())


def _calls(trees: list[exp.Expr]) -> list[exp.AggFunc]:
    return [node for tree in trees for node in tree.find_all(exp.AggFunc)]


def _partials(i: int, call: exp.AggFunc) -> list[tuple[str, str, str]]:
    """Aggregate call `i`'s partial columns: (name, the call over the rows, its merge)."""
    arg = call.this
    text = arg.sql(dialect="spark") if arg is not None else "*"
    if isinstance(call, exp.Count):
        return [(f"_c{i}", f"count({text})", "sum")]
    if isinstance(call, (exp.Sum, exp.Avg)):
        return [(f"_s{i}", f"sum({text})", "sum"), (f"_n{i}", f"count({text})", "sum")]
    kind = "min" if isinstance(call, exp.Min) else "max"
    return [(f"_m{i}", f"{kind}({text})", kind)]


def _final(i: int, call: exp.AggFunc) -> str:
    """Aggregate call `i`'s value from its merged partials (as the call over all rows gives
    it: NULL where no value was aggregated, avg a DOUBLE)."""
    if isinstance(call, exp.Count):
        return f"t.`_c{i}`"
    if isinstance(call, exp.Sum):
        return f"CASE WHEN t.`_n{i}` > 0 THEN t.`_s{i}` END"
    if isinstance(call, exp.Avg):
        return f"CASE WHEN t.`_n{i}` > 0 THEN CAST(t.`_s{i}` AS DOUBLE) / t.`_n{i}` END"
    return f"t.`_m{i}`"
