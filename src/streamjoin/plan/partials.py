"""A GROUP BY buffer kept as partial aggregates: each batch's rows folded, per pane and grouped
column, into one row of running parts (count, sum, min, max), which a closing window merges.

A window is a union of panes (the stretches of event time as long as the gcd of its size and
slide, aligned to the epoch as Spark's windows are): every row of a pane is in the same windows.
So a batch's rows can be folded per pane and per column the keys read, and the window's groups
merged from the folded rows of its panes, with the same values as from the rows themselves:
counts and sums add up, min and max of the parts are the min and max. A buffer then holds a row
per pane and group that a batch touched, not a row per joined row. An aggregate whose parts do
not merge so (avg, count(DISTINCT), any other function) keeps the rows (`partials` is None).

A folded row's event time is its rows' least, which is in their pane; so the unit's time range,
the panes it is held in and the windows it falls into are those of its rows. A key that reads
the event time itself groups the folded rows by it.
"""

from __future__ import annotations

import functools
import math
import typing as t
from dataclasses import dataclass

from sqlglot import exp

from streamjoin.model import Aggregation, EventWindow, SelectItem
from streamjoin.model.aggregate import WINDOW

_FOLDED = (exp.Count, exp.Sum, exp.Min, exp.Max)
"""The aggregates whose parts merge with the values and types of the rows' own. (Not avg: Spark
sums an integer avg as a double and divides a decimal one at a precision a merge of parts
would not keep.)"""


@dataclass(frozen=True, slots=True)
class Partials:
    """How a buffer's rows fold (`fold_sql`) and how a window's groups merge the folded rows
    (`merged`), both over the buffer's column names."""

    time: str
    """The buffer column of the event time (the folded row's: its rows' least)."""
    pane_us: int
    """The length of a pane: every row of one is in the same windows."""
    grouped: tuple[str, ...]
    """The buffer columns the keys read (the event time's too, if they read it): a folded
    row's group, beside its pane."""
    aggregates: tuple[tuple[str, str, str], ...]
    """Each aggregate as written over buffer columns, its function (count, sum, min or max)
    and its argument; its part is named by its place (`part`)."""

    def fold_sql(self, view: str) -> str:
        """A batch's folded rows, from its buffered rows in `view` (a row without an event time
        is in no window, as in Spark's window())."""
        ts = f"unix_micros({self.time})"
        items = [] if self.time in self.grouped else [f"min({self.time}) AS {self.time}"]
        items += [*self.grouped]
        items += [f"{kind}({arg}) AS {part(i)}" for i, (_, kind, arg) in enumerate(self.aggregates)]
        group = ", ".join([f"{ts} - pmod({ts}, {self.pane_us})", *self.grouped])
        return (
            f"SELECT {', '.join(items)} FROM {view} WHERE {self.time} IS NOT NULL GROUP BY {group}"
        )

    def merged(self, sql: str, types: t.Mapping[str, str] | None = None) -> str:
        """`sql` (an item or HAVING over buffer columns) with each aggregate merging its parts;
        with the parts' `types` (by name), a sum keeps the type of the rows' own sum (a decimal
        sum of sums would widen)."""
        merges = {}
        for i, (written, kind, _) in enumerate(self.aggregates):
            p, typed = part(i), (types or {}).get(part(i))
            merge = f"sum({p})" if kind in ("count", "sum") else f"{kind}({p})"
            if typed is not None and kind == "sum":
                merge = f"CAST({merge} AS {typed})"
            merges[written] = merge

        def swap(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.AggFunc):
                return exp.maybe_parse(merges[node.sql(dialect="spark")], dialect="spark")
            return node

        tree: exp.Expr = exp.maybe_parse(sql, dialect="spark")
        return str(tree.transform(swap).sql(dialect="spark"))


def part(i: int) -> str:
    """The name of the `i`th aggregate's part."""
    return f"_sj_p{i}"


@functools.cache
def partials(
    windowed: Aggregation,
    select: tuple[SelectItem, ...],
    columns: tuple[tuple[str, str], ...],
) -> Partials | None:
    """The partial aggregates of `windowed`'s groups with items `select` over a buffer of
    `columns` (qualified column, buffer name); None where an aggregate's parts do not merge."""
    names = dict(columns)

    def renamed(sql: str) -> exp.Expr:
        return buffer_tree(sql, names)

    texts = [s.sql for s in select] + ([windowed.having] if windowed.having else [])
    folds: dict[str, tuple[str, str, str]] = {}
    for text in texts:
        for node in renamed(text).find_all(exp.AggFunc):
            many = bool(node.args.get("expressions"))  # (count(x, y): rows where all are set)
            if not isinstance(node, _FOLDED) or node.find(exp.Distinct) is not None or many:
                return None
            written = node.sql(dialect="spark")
            arg = node.this.sql(dialect="spark")
            folds.setdefault(written, (written, type(node).__name__.lower(), arg))
    time = names[windowed.window.time]
    keys = {c.name for k in windowed.keys for c in renamed(k).find_all(exp.Column)}
    return Partials(time, pane_us(windowed.window), tuple(sorted(keys)), tuple(folds.values()))


def pane_us(window: EventWindow) -> int:
    """The length of `window`'s panes: every row of one is in the same windows."""
    return math.gcd(window.size_us, window.slide_us)


def buffer_tree(sql: str, names: t.Mapping[str, str]) -> exp.Expr:
    """`sql` over the qualified columns, as a tree over their buffer `names` (the window's
    columns stay)."""

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table.lower() != WINDOW:
            return exp.column(names[node.sql(dialect="spark")])
        return node

    tree: exp.Expr = exp.maybe_parse(sql, dialect="spark")
    return tree.transform(swap)
