"""A GROUP BY buffer kept as partial aggregates: each batch's rows folded, per pane and grouped
column, into one row of running parts (count, sum, min, max), which a closing window merges.

A window is a union of panes (the stretches of event time as long as the gcd of its size and
slide, aligned to the epoch as Spark's windows are): every row of a pane is in the same windows.
So a batch's rows can be folded per pane and per column the keys read, and the window's groups
merged from the folded rows of its panes, with the same values as from the rows themselves:
count and sum add up, min and max of the parts are the min and max, avg is the parts' sum over
their count. A buffer then holds a row per pane and group that a batch touched, not a row per
joined row. An aggregate whose parts do not merge (count(DISTINCT), any other function) keeps
the rows (`partials` is None).

A folded row's event time is its rows' least, which is in their pane; so the unit's time range,
the panes it is held in and the windows it falls into are those of its rows.
"""

from __future__ import annotations

import functools
import math
import typing as t
from dataclasses import dataclass

from sqlglot import exp

from streamjoin.model import Aggregation, EventWindow, SelectItem
from streamjoin.model.aggregate import WINDOW

_FOLDED = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)
"""The aggregates whose parts merge."""


@dataclass(frozen=True, slots=True)
class Partials:
    """How a buffer's rows fold (`fold_sql`) and how a window's groups merge the folded rows
    (`merged`), both over the buffer's column names."""

    time: str
    """The buffer column of the event time (the folded row's: its rows' least)."""
    pane_us: int
    """The length of a pane: every row of one is in the same windows."""
    grouped: tuple[str, ...]
    """The buffer columns the keys read: a folded row's group, beside its pane."""
    folds: tuple[tuple[str, str, str], ...]
    """Each aggregate as written over buffer columns, its function (count, sum, min, max,
    avg) and its argument; its parts are named by its place (`part`)."""

    def fold_sql(self, view: str) -> str:
        """A batch's folded rows, from its buffered rows in `view` (a row without an event time
        is in no window, as in Spark's window())."""
        ts = f"unix_micros({self.time})"
        items = [f"min({self.time}) AS {self.time}", *self.grouped]
        for i, (_, kind, arg) in enumerate(self.folds):
            if kind == "avg":
                items += [f"sum({arg}) AS {part(i)}", f"count({arg}) AS {part(i)}n"]
            else:
                items.append(f"{kind}({arg}) AS {part(i)}")
        group = ", ".join([f"{ts} - pmod({ts}, {self.pane_us})", *self.grouped])
        return (
            f"SELECT {', '.join(items)} FROM {view} WHERE {self.time} IS NOT NULL GROUP BY {group}"
        )

    def merged(self, sql: str, types: t.Mapping[str, str] | None = None) -> str:
        """`sql` (an item or HAVING over buffer columns) with each aggregate merging its parts;
        with the parts' `types` (by name), a sum keeps the type of the rows' own sum (a decimal
        sum of sums would widen) and an avg the type of the rows' own avg."""
        merges = {}
        for i, (written, kind, _) in enumerate(self.folds):
            p, typed = part(i), (types or {}).get(part(i))
            merge = {
                "count": f"sum({p})",
                "sum": f"sum({p})",
                "avg": f"sum({p}) / sum({p}n)",
            }.get(kind, f"{kind}({p})")
            if typed is not None and kind in ("sum", "avg"):
                merge = f"CAST({merge} AS {typed if kind == 'sum' else avg_type(typed)})"
            merges[written] = merge

        def swap(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.AggFunc):
                return exp.maybe_parse(merges[node.sql(dialect="spark")], dialect="spark")
            return node

        tree: exp.Expr = exp.maybe_parse(sql, dialect="spark")
        return str(tree.transform(swap).sql(dialect="spark"))


def part(i: int) -> str:
    """The name of the `i`th aggregate's part (an avg's count: the name and ``n``)."""
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
        def swap(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Column) and node.table.lower() != WINDOW:
                return exp.column(names[node.sql(dialect="spark")])
            return node

        tree: exp.Expr = exp.maybe_parse(sql, dialect="spark")
        return tree.transform(swap)

    texts = [s.sql for s in select] + ([windowed.having] if windowed.having else [])
    folds: dict[str, tuple[str, str, str]] = {}
    for text in texts:
        for node in renamed(text).find_all(exp.AggFunc):
            if not isinstance(node, _FOLDED) or node.find(exp.Distinct) is not None:
                return None
            written = node.sql(dialect="spark")
            arg = node.this.sql(dialect="spark")
            folds.setdefault(written, (written, type(node).__name__.lower(), arg))
    time = names[windowed.window.time]
    keys = {c.name for k in windowed.keys for c in renamed(k).find_all(exp.Column)}
    grouped = tuple(sorted(keys - {time}))
    return Partials(time, pane_us(windowed.window), grouped, tuple(folds.values()))


def pane_us(window: EventWindow) -> int:
    """The length of `window`'s panes: every row of one is in the same windows."""
    return math.gcd(window.size_us, window.slide_us)


def avg_type(sum_type: str) -> str:
    """The type Spark gives avg over the values whose sum has `sum_type`: double, or for a
    decimal(p + 10, s) sum, decimal(p + 4, s + 4); a sum of 38 digits (Spark's most) no longer
    tells p, so its avg takes 38."""
    if not sum_type.startswith("decimal("):
        return "double"
    precision, scale = (int(x) for x in sum_type[len("decimal(") : -1].split(","))
    digits = precision - 10 + 4 if precision < 38 else 38
    return f"decimal({min(38, digits)},{min(38, scale + 4)})"
