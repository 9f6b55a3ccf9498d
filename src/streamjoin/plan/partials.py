"""A windowed GROUP BY's buffer as partial aggregates (`plan.aggregate.GroupBuffer`): where
every aggregate of its SELECT items and HAVING is a count, sum, min, max or avg (no DISTINCT, no
FILTER) and every key is a column, a batch's rows are folded into one row per pane (the
slide-long stretch of event time its rows fall in) and key before they are buffered, and a
closing window merges its panes' rows (a sum of the counts, a min of the mins, ...). A window
then reads, writes and holds a row per pane and key a batch instead of every row.

A pane's row carries the greatest event time of its rows as its time: every window of a row is
a window of its pane's (the size is a multiple of the slide, so a window holds whole panes), so
the time selects the same windows, and every bound the buffer keeps by event time (the rows a
close reads, a unit's range, a pane let go) holds for the row as for the rows it folds. Folding
is exact for counts, mins and maxes; a floating sum or avg adds in another order. Where a merge
types a result differently (a decimal sum widens), the runtime casts it to the type of the
result over the rows (`PartialBuffer._typed`); it folds a buffer only where the merged groups
have the types the groups of its rows have (an avg of decimals, summed as a double, does not)."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from sqlglot import exp

from streamjoin.model import Aggregation
from streamjoin.model.aggregate import WINDOW
from streamjoin.plan.aggregate import AFTER, UPTO, GroupBuffer

_PARTIALS = "_sj_p"
"""The prefix of a pane row's partial aggregate columns (``_sj_p0``, ...)."""
FOLDED = f"{_PARTIALS}0"
"""A column every folded row has (its first partial aggregate), and a buffer's rows do not."""


@dataclass(frozen=True, slots=True)
class PartialBuffer:
    """`buffer`'s rows folded per pane and key, and its groups merged from them."""

    buffer: GroupBuffer
    keys: tuple[str, ...]
    """The buffer columns of the GROUP BY's keys."""
    parts: tuple[str, ...]
    """Each partial aggregate over a batch's rows (SQL over the buffer's columns); its column
    is `_PARTIALS` and its index."""
    select: tuple[str, ...]
    """Each SELECT item (in order) merged from the partial columns (SQL)."""
    having: str | None
    summed: tuple[int, ...]
    """The partials that are sums: a merge of decimal sums types wider (`_typed`)."""

    def fold_sql(self, view: str, *batch: str) -> str:
        """Spark SQL of the rows of `view` (a batch's buffer rows) folded into one row per
        pane and key: the greatest event time, the keys and the partial aggregates (and the
        columns `batch`, kept last and grouped by: rows of several units' batches)."""
        time, slide = self.buffer.time_column, self.buffer.window.slide_us
        micros = f"unix_micros({time})"
        pane = f"({micros} - pmod({micros}, {slide}))"
        # (A key that is the time column itself is grouped by: its greatest is itself.)
        items = [f"max({time}) AS {time}", *(k for k in self.keys if k != time)]
        items += [f"{sql} AS {_PARTIALS}{i}" for i, sql in enumerate(self.parts)]
        group = ", ".join([pane, *self.keys, *batch])
        return f"SELECT {', '.join([*items, *batch])} FROM {view} GROUP BY {group}"

    def group_sql(
        self, view: str, after: int | None, upto: int | None, types: dict[str, str]
    ) -> str:
        """`GroupBuffer.group_sql` of the pane rows in `view`, of column `types`."""
        first = None if after is None else self.buffer.first_needed(after)
        ends = (None if after is None else str(after), None if upto is None else str(upto))
        return self.buffer.grouped_sql(view, *ends, (first, upto), *self._typed(types))

    def held_sql(self, view: str, types: dict[str, str]) -> str:
        """`GroupBuffer.held_sql` of the pane rows held in `view`, of column `types`."""
        return self.buffer.grouped_sql(view, AFTER, UPTO, None, *self._typed(types))

    def _typed(self, types: dict[str, str]) -> tuple[tuple[str, ...], str | None]:
        """The SELECT items and HAVING, each merged sum of decimals cast to its partial's
        type (a sum's type over the rows: its merge would widen it again)."""

        def cast(sql: str) -> str:
            for i in self.summed:
                kind = types[f"{_PARTIALS}{i}"]
                if kind.startswith("decimal"):
                    sql = sql.replace(
                        f"SUM({_PARTIALS}{i})", f"CAST(SUM({_PARTIALS}{i}) AS {kind})"
                    )
            return sql

        having = None if self.having is None else cast(self.having)
        return tuple(cast(sql) for sql in self.select), having


def partial_buffer(buffer: GroupBuffer) -> PartialBuffer | None:
    """`buffer` folded per pane and key, or None where its groups cannot be merged from
    partial aggregates: a top-N, a window whose size is not a multiple of its slide, a key that
    is not a column, an aggregate other than count, sum, min, max and avg (a DISTINCT or a
    FILTER in one), or none at all (folding would only drop repeated rows)."""
    agg, window = buffer.windowed, buffer.window
    if not isinstance(agg, Aggregation) or window.size_us % window.slide_us != 0:
        return None
    names = dict(buffer.columns)
    keys = []
    for key in agg.keys:
        tree: exp.Expr = exp.maybe_parse(key, dialect="spark")
        if not isinstance(tree, exp.Column) or tree.table.lower() == WINDOW:
            return None
        keys.append(names[tree.sql(dialect="spark")])
    parts: list[str] = []
    summed: set[int] = set()
    texts = [item.sql for item in buffer.select]
    texts += [] if agg.having is None else [agg.having]
    merged = [_merged(buffer.rename(text), set(keys), (parts, summed)) for text in texts]
    if any(m is None for m in merged):
        return None
    done = tuple(t.cast("str", m) for m in merged)
    select, having = done[: len(buffer.select)], (done[-1] if agg.having is not None else None)
    if not parts:  # (no aggregate: a row per pane and key is a row per distinct row)
        return None
    keyed = tuple(dict.fromkeys(keys))
    return PartialBuffer(buffer, keyed, tuple(parts), select, having, tuple(sorted(summed)))


_FOLDS: dict[type[exp.Expr], str] = {exp.Sum: "sum", exp.Min: "min", exp.Max: "max"}


def _merged(sql: str, keys: set[str], made: tuple[list[str], set[int]]) -> str | None:
    """`sql` (a SELECT item or HAVING over a group, over the buffer's columns) with each
    aggregate replaced by its merge over partial columns; None where it reads a column outside
    an aggregate that is not a key. `made`: the partials so far (SQL, appended to; one column
    for the same text) and those that are sums (added to)."""
    parts, summed = made
    tree: exp.Expr = exp.maybe_parse(sql, dialect="spark")
    if any(True for _ in tree.find_all(exp.Filter, exp.Window, exp.Anonymous)):
        # (An aggregate's FILTER or OVER, over the rows, not their partials; a function
        # sqlglot does not know, which may be an aggregate.)
        return None
    for node in tree.find_all(exp.AggFunc):
        if not _foldable(node):
            return None

    def part(text: str, sum_: bool = False) -> str:
        if text not in parts:
            parts.append(text)
        i = parts.index(text)
        if sum_:
            summed.add(i)
        return f"{_PARTIALS}{i}"

    def swap(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.AggFunc):
            return node
        arg = node.this.sql(dialect="spark")
        if isinstance(node, exp.Count):
            folded = "count(1)" if isinstance(node.this, exp.Star) else f"count({arg})"
            return exp.maybe_parse(f"sum({part(folded)})", dialect="spark")
        if isinstance(node, exp.Avg):  # (summed as a double, as Spark's avg sums)
            total, n = part(f"sum(CAST({arg} AS DOUBLE))"), part(f"count({arg})")
            return exp.maybe_parse(f"(sum({total}) / nullif(sum({n}), 0))", dialect="spark")
        fold = _FOLDS[type(node)]
        merged = part(f"{fold}({arg})", sum_=fold == "sum")
        return exp.maybe_parse(f"{fold}({merged})", dialect="spark")

    out = tree.transform(swap)
    for col in out.find_all(exp.Column):
        name, table = col.name, col.table.lower()
        if table != WINDOW and name not in keys and not name.startswith(_PARTIALS):
            return None  # (a column outside an aggregate that is not a key)
    return str(out.sql(dialect="spark"))


def _foldable(node: exp.AggFunc) -> bool:
    """Whether aggregate `node` merges from partial aggregates: a count (of rows or of a
    value), sum, min, max or avg of a value with no aggregate inside, no DISTINCT."""
    if type(node) not in (exp.Count, exp.Avg, *_FOLDS):
        return False
    arg = node.this
    if arg is None or isinstance(arg, exp.Distinct) or node.args.get("expressions"):
        return False
    if isinstance(arg, exp.Star):
        return isinstance(node, exp.Count)
    if any(c.table.lower() == WINDOW for c in arg.find_all(exp.Column)):
        return False  # (the window's bounds, which a batch's rows do not carry)
    return not any(True for _ in arg.find_all(exp.AggFunc))
