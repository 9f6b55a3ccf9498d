"""Split a join predicate into the parts the engine can exploit.

The engine always evaluates the *whole* predicate on the candidate pairs; classification only
decides how candidates are found (hash keys, band buckets, a nested loop) and how long state is
kept (the window). A conjunct the classifier does not understand is therefore never a risk to
correctness, only to speed: it becomes part of the residual.

Conventions: a join has a left side (alias ``a``) and a right side (alias ``b``). Bands and windows
are stated as ``right - left ∈ [lo, hi]``.
"""

from __future__ import annotations

import functools
import math
import typing as t
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import sqlglot
from sqlglot import exp

from streamjoin.model.intervals import unit_micros
from streamjoin.plan.grouping import conjunct_sql
from streamjoin.plan.parts import Band, ColumnBound, EquiKey, PredicateParts, TimeWindow


@dataclass
class _Bounds:
    lo: float = -math.inf
    hi: float = math.inf

    def add(self, lo: float | None, hi: float | None) -> None:
        if lo is not None:
            self.lo = max(self.lo, lo)
        if hi is not None:
            self.hi = min(self.hi, hi)


# (Pure, and its parts frozen: a job of many queries classifies the same predicates again and
# again, once per query and per use; 100 multi-way queries' plan spent half its time here.)
@functools.lru_cache(maxsize=4096)
def classify_predicate(
    predicate_sql: str,
    left_alias: str,
    right_alias: str,
    left_time: str | None,
    right_time: str | None,
) -> PredicateParts:
    """Classify the top-level conjuncts of `predicate_sql`.

    Args:
        predicate_sql: qualified Spark SQL boolean expression.
        left_alias: alias of the left side.
        right_alias: alias of the right side.
        left_time: the left stream's event-time column, if it has a watermark.
        right_time: the right stream's event-time column, if it has a watermark.

    >>> p = classify_predicate(
    ...     "a.k = b.k AND abs(a.x - b.y) <= 2 AND b.ts BETWEEN a.ts - INTERVAL '10' SECOND "
    ...     "AND a.ts + INTERVAL '5' SECOND AND a.s <> b.s", "a", "b", "ts", "ts")
    >>> p.equi
    (EquiKey(left_sql='a.k', right_sql='b.k'),)
    >>> (p.bands[0].lo, p.bands[0].hi)
    (-2.0, 2.0)
    >>> p.window
    TimeWindow(lo_us=-10000000, hi_us=5000000)
    >>> p.residual
    ('a.s <> b.s',)
    """
    ctx = _Context(left_alias, right_alias, left_time, right_time)
    tree = sqlglot.parse_one(predicate_sql, dialect="spark")
    equi: list[EquiKey] = []
    bands: dict[tuple[str, str], _Bounds] = {}
    window = _Bounds()
    has_window = False
    residual: list[str] = []
    ors: tuple[EquiKey, ...] = ()
    bounds: list[ColumnBound] = []
    for conjunct in conjuncts(tree):
        key = ctx.equi(conjunct)
        if key is not None:
            equi.append(key)
            if ctx.is_time_pair(key.left_sql, key.right_sql):
                window.add(0, 0)
                has_window = True
            continue
        ranges, whole = ctx.ranges(conjunct)
        for left_sql, right_sql, lo, hi in ranges:
            if ctx.is_time_pair(left_sql, right_sql):
                window.add(lo, hi)
                has_window = True
            else:
                bands.setdefault((left_sql, right_sql), _Bounds()).add(lo, hi)
                bounds.extend(ctx.column_bounds(left_sql, right_sql, lo, hi))
        if not whole:
            residual.append(conjunct_sql(conjunct))
            if not ors:
                ors = ctx.disjunct_keys(conjunct)
    return PredicateParts(
        equi=tuple(equi),
        bands=tuple(
            Band(left_sql, right_sql, b.lo, b.hi)
            for (left_sql, right_sql), b in bands.items()
            if math.isfinite(b.lo) and math.isfinite(b.hi) and b.lo <= b.hi
        ),
        window=_window(window) if has_window else None,
        residual=tuple(residual),
        ors=ors,
        bounds=tuple(bounds),
    )


def _window(b: _Bounds) -> TimeWindow:
    return TimeWindow(
        lo_us=None if math.isinf(b.lo) else math.ceil(b.lo),
        hi_us=None if math.isinf(b.hi) else math.floor(b.hi),
    )


def _bare(sql: str) -> str:
    """A column reference without its quotes, lower-case (a.`dateTime` is a.datetime)."""
    return sql.replace("`", "").lower()


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _plain_column(sql: str) -> bool:
    return isinstance(sqlglot.parse_one(sql, dialect="spark"), exp.Column)


def _same(a: tuple[exp.Expr, ...], b: tuple[exp.Expr, ...]) -> bool:
    return [x.sql(dialect="spark") for x in a] == [y.sql(dialect="spark") for y in b]


def conjuncts(node: exp.Expr) -> list[exp.Expr]:
    """The top-level conjuncts of `node` (parentheses looked through)."""
    # Only top-level conjuncts can be exploited: `a OR b` is not `b AND (a OR TRUE)`.
    if isinstance(node, exp.Paren):
        return conjuncts(node.this)
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


class _Context:
    def __init__(
        self, left: str, right: str, left_time: str | None, right_time: str | None
    ) -> None:
        self.left = left.lower()
        self.right = right.lower()
        self.left_time = f"{left}.{left_time}".lower() if left_time else None
        self.right_time = f"{right}.{right_time}".lower() if right_time else None

    def side(self, node: exp.Expr) -> str | None:
        """'l' or 'r' when every column of `node` is from one side (and there is one), else None."""
        tables = {c.table.lower() for c in node.find_all(exp.Column)}
        if tables == {self.left}:
            return "l"
        if tables == {self.right}:
            return "r"
        return None

    def is_time_pair(self, left_sql: str, right_sql: str) -> bool:
        return (
            self.left_time is not None
            and self.right_time is not None
            and _bare(left_sql) == self.left_time
            and _bare(right_sql) == self.right_time
        )

    def column_bounds(
        self, left_sql: str, right_sql: str, lo: float | None, hi: float | None
    ) -> list[ColumnBound]:
        """The `ColumnBound` that ``right - left in [lo, hi]`` states, if one side is the
        other's event time and the other a plain column that is not its side's event time."""
        out = []
        left, right = _bare(left_sql), _bare(right_sql)
        # (r.ts - l.c <= hi: r.ts <= l.c + hi; r.c - l.ts >= lo: l.ts <= r.c - lo.)
        by_left = right == self.right_time and left != self.left_time and _plain_column(left_sql)
        if by_left and _finite(hi):
            out.append(ColumnBound(0, left_sql, math.floor(t.cast("float", hi))))
        by_right = left == self.left_time and right != self.right_time and _plain_column(right_sql)
        if by_right and _finite(lo):
            out.append(ColumnBound(1, right_sql, math.floor(-t.cast("float", lo))))
        return out

    def equi(self, node: exp.Expr) -> EquiKey | None:
        if not isinstance(node, exp.EQ):
            return None
        a, b = node.this, node.expression
        sa, sb = self.side(a), self.side(b)
        if sa == "l" and sb == "r":
            return EquiKey(a.sql(dialect="spark"), b.sql(dialect="spark"))
        if sa == "r" and sb == "l":
            return EquiKey(b.sql(dialect="spark"), a.sql(dialect="spark"))
        return None

    def disjunct_keys(self, node: exp.Expr) -> tuple[EquiKey, ...]:
        """The equalities of `node` when it is an OR of two or more equalities between the
        sides (parentheses looked through); else none."""
        while isinstance(node, exp.Paren):
            node = node.this
        if not isinstance(node, exp.Or):
            return ()
        keys: list[EquiKey] = []
        for part in (node.this, node.expression):
            while isinstance(part, exp.Paren):
                part = part.this
            if isinstance(part, exp.Or):
                more = self.disjunct_keys(part)
                if not more:
                    return ()
                keys.extend(more)
                continue
            key = self.equi(part)
            if key is None:
                return ()
            keys.append(key)
        return tuple(keys)

    def ranges(
        self, node: exp.Expr
    ) -> tuple[list[tuple[str, str, float | None, float | None]], bool]:
        """Bounds ``(left_sql, right_sql, lo, hi)`` on ``right - left`` stated by `node`, and
        whether they say all `node` says (else it must still be evaluated as written)."""
        if isinstance(node, exp.Between):
            lo = self._offset_bound(node.this, node.args["low"])
            hi = self._offset_bound(node.this, node.args["high"])
            if lo is not None and hi is not None and _same(lo[:2], hi[:2]):
                # x BETWEEN y+c1 AND y+c2  <=>  x - y in [c1, c2]
                return [self._orient(lo[0], lo[1], lo[2], hi[2])], True
            # One half still bounds x (`b.t BETWEEN a.t AND a.expires`: b.t - a.t >= 0).
            halves = []
            if lo is not None:
                halves.append(self._orient(lo[0], lo[1], lo[2], None))
            if hi is not None:
                halves.append(self._orient(hi[0], hi[1], None, hi[2]))
            return halves, False
        found = self._comparison(node)
        return found, bool(found)

    def _comparison(self, node: exp.Expr) -> list[tuple[str, str, float | None, float | None]]:
        if isinstance(node, (exp.LTE, exp.LT, exp.GTE, exp.GT)):
            found = self._offset_bound(node.this, node.expression)
            if found is None:
                # x + c OP y  <=>  x OP y - c
                base, off = _split_offset(node.this)
                mirrored = self._offset_bound(base, node.expression) if off else None
                if mirrored is not None and off is not None:
                    found = (mirrored[0], mirrored[1], mirrored[2] - off)
            if found is not None:
                x, y, c = found  # node.this is x; node.expression is y + c
                less = isinstance(node, (exp.LTE, exp.LT))
                return [self._orient(x, y, None if less else c, c if less else None)]
            band = self._abs_band(node)
            return [band] if band is not None else []
        return []

    def _orient(
        self, x: exp.Expr, y: exp.Expr, lo: float | None, hi: float | None
    ) -> tuple[str, str, float | None, float | None]:
        """Turn ``x - y in [lo, hi]`` into ``right - left in [...]``."""
        xs, ys = x.sql(dialect="spark"), y.sql(dialect="spark")
        if self.side(x) == "r":
            return (ys, xs, lo, hi)
        return (xs, ys, None if hi is None else -hi, None if lo is None else -lo)

    def _offset_bound(
        self, x: exp.Expr, bound: exp.Expr
    ) -> tuple[exp.Expr, exp.Expr, float] | None:
        """``x' + c1 OP y + c2`` as ``(x', y, c2 - c1)``, i.e. ``x' OP y + c``, when x' and y
        are on opposite sides; else None."""
        base, offset = _split_offset(bound)
        if offset is None:
            return None
        x_base, x_offset = _split_offset(x)
        if x_offset is None:
            x_base, x_offset = x, 0.0
        sx, sy = self.side(x_base), self.side(base)
        if sx is None or sy is None or sx == sy:
            return None
        return (x_base, base, offset - x_offset)

    def _abs_band(self, node: exp.Expr) -> tuple[str, str, float | None, float | None] | None:
        """``abs(x - y) <= c`` or ``c >= abs(x - y)``."""
        if isinstance(node, (exp.LTE, exp.LT)):
            target, limit = node.this, node.expression
        else:
            target, limit = node.expression, node.this
        c = _number(limit)
        if not isinstance(target, exp.Abs) or c is None:
            return None
        inner = target.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if not isinstance(inner, exp.Sub):
            return None
        x, y = inner.this, inner.expression
        sx, sy = self.side(x), self.side(y)
        if sx is None or sy is None or sx == sy:
            return None
        return self._orient(x, y, -c, c)


def _number(node: exp.Expr) -> float | None:
    """A numeric constant (possibly negated or parenthesised), or an interval in microseconds."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg):
        inner = _number(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    us = interval_us(node)
    return None if us is None else float(us)


def interval_us(node: exp.Expr) -> Decimal | None:
    """A single-unit interval literal (``INTERVAL '10' SECOND``) in microseconds, exactly; None
    for anything else."""
    if not isinstance(node, exp.Interval) or node.args.get("unit") is None:
        return None
    unit_us = unit_micros(node.args["unit"].name)
    value = node.this
    if unit_us is None or not isinstance(value, exp.Literal):
        return None
    try:
        return Decimal(str(value.this).strip()) * unit_us
    except InvalidOperation:
        return None


def _split_offset(node: exp.Expr) -> tuple[exp.Expr, float | None]:
    """``y + c`` → (y, c); ``y - c`` → (y, -c); ``y`` → (y, 0); otherwise (node, None)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, (exp.Add, exp.Sub)):
        c = _number(node.expression)
        if c is not None:
            return node.this, c if isinstance(node, exp.Add) else -c
        if isinstance(node, exp.Add):
            c = _number(node.this)
            if c is not None:
                return node.expression, c
        return node, None
    if _number(node) is not None:
        return node, None
    return node, 0.0
