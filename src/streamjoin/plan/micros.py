"""Comparisons of timestamps offset by intervals, run in microseconds: the same truth values
without Spark's calendar arithmetic.

Spark adds a day-time interval to a timestamp through java.time, for every row it evaluates:
``DateTimeUtils.timestampAddDayTime`` takes the instant to the session's zone, adds the
interval's days there, then the rest; a window's condition does that twice per candidate
pair (a profile of the equi benchmark is in docs/dev-log.md). An interval of less than
a day has no days, and the rest is added on the instant's time line, so ``ts + i`` is exactly
``unix_micros(ts) + i`` in microseconds, in any session zone. A comparison whose every operand
is a TIMESTAMP column plus or minus such intervals is therefore rewritten to compare
microseconds (``unix_micros`` is exact and order-preserving, and NULL stays NULL). Everything
else runs as written.

The same exactness tells when such a comparison is implied by a window on the two event times
(`implied_by_window`): a shared join's members need not test again, on every pair, a window
their shared join has tested already.
"""

from __future__ import annotations

import functools
import typing as t

import sqlglot
from sqlglot import exp

from streamjoin.model.intervals import MICROS_PER_UNIT
from streamjoin.plan.classify import interval_us

if t.TYPE_CHECKING:
    from collections.abc import Collection

_DAY_US = MICROS_PER_UNIT["DAY"]
_COMPARISONS = (exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def micros_predicate(predicate_sql: str, timestamp_columns: Collection[str]) -> str:
    """`predicate_sql` with its comparisons of TIMESTAMP columns (`timestamp_columns`, as
    ``alias.column``) offset by intervals of less than a day made in microseconds; the text as
    it was when there is none.

    >>> micros_predicate("r.ts BETWEEN l.ts - INTERVAL '10' SECOND AND l.ts", ["l.ts", "r.ts"])
    'UNIX_MICROS(r.ts) BETWEEN UNIX_MICROS(l.ts) - 10000000 AND UNIX_MICROS(l.ts)'
    >>> micros_predicate("r.ts < l.ts + INTERVAL '2' DAY", ["l.ts", "r.ts"])
    "r.ts < l.ts + INTERVAL '2' DAY"
    """
    columns = {c.lower() for c in timestamp_columns}
    tree = sqlglot.parse_one(predicate_sql, dialect="spark")
    changed = False

    def rewrite(node: exp.Expr) -> exp.Expr:
        nonlocal changed
        if isinstance(node, exp.Between):
            operands = [node.this, node.args["low"], node.args["high"]]
        elif isinstance(node, _COMPARISONS):
            operands = [node.this, node.expression]
        else:
            return node
        terms = [_term(o, columns) for o in operands]
        if any(term is None for term in terms) or all(not term[1] for term in terms if term):
            return node  # (not all timestamps, or no interval to add: nothing to gain)
        made = [_micros(column, offsets) for column, offsets in t.cast("list[_Term]", terms)]
        changed = True
        if isinstance(node, exp.Between):
            return exp.Between(this=made[0], low=made[1], high=made[2])
        return type(node)(this=made[0], expression=made[1])

    out = tree.transform(rewrite)
    return out.sql(dialect="spark") if changed else predicate_sql


_Term = tuple[exp.Column, list[int]]
"""A TIMESTAMP column and the intervals added to it, in microseconds (negative: subtracted)."""


def _term(node: exp.Expr, columns: set[str]) -> _Term | None:
    """`node` as a TIMESTAMP column plus intervals of less than a day, or None."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        name = f"{node.table}.{node.name}".lower()
        return (node, []) if node.table and name in columns else None
    if isinstance(node, (exp.Add, exp.Sub)):
        base, interval = node.this, node.expression
        if isinstance(node, exp.Add) and isinstance(base, exp.Interval):
            base, interval = interval, base
        us = _interval_us(interval)
        inner = _term(base, columns)
        if us is None or inner is None:
            return None
        return inner[0], [*inner[1], us if isinstance(node, exp.Add) else -us]
    return None


def _interval_us(node: exp.Expr) -> int | None:
    """An interval literal of less than a day, in whole microseconds, or None."""
    us = interval_us(node)
    if us is None or us != us.to_integral_value() or abs(us) >= _DAY_US:
        return None
    return int(us)


def _micros(column: exp.Column, offsets: list[int]) -> exp.Expr:
    out: exp.Expr = exp.UnixMicros(this=column.copy())
    for us in offsets:
        number = exp.Literal.number(abs(us))
        step = exp.Add if us >= 0 else exp.Sub
        out = step(this=out, expression=number)
    return out


_OPERATORS: dict[type[exp.Expr], str] = {
    exp.LTE: "<=",
    exp.LT: "<",
    exp.GTE: ">=",
    exp.GT: ">",
    exp.EQ: "=",
}
_FLIPPED = {"<=": ">=", "<": ">", ">=": "<=", ">": "<", "=": "="}


@functools.lru_cache(maxsize=4096)
def implied_by_window(conjunct_sql: str, first: str, second: str, lo: int, hi: int) -> bool:
    """Whether `conjunct_sql` holds on every pair of rows whose event times (`first` and
    `second`, as ``alias.column``) have ``second - first`` in ``[lo, hi]`` microseconds: a
    comparison, or a BETWEEN, of those two columns offset by intervals of less than a day
    (exact, as in `micros_predicate`), whose every bound on that difference the window meets.
    False when it cannot tell, and for a window reaching a day or more (Spark adds such an
    interval in the session's zone: the window is not exact either). (A NULL event time makes
    both NULL: no pair either way.)

    >>> implied_by_window("r.ts BETWEEN l.ts - INTERVAL '10' SECOND AND l.ts", "l.ts",
    ...     "r.ts", -5_000_000, 0)
    True
    >>> implied_by_window("r.ts > l.ts - INTERVAL '5' SECOND", "l.ts", "r.ts", -5_000_000, 0)
    False
    """
    columns = {first.lower(), second.lower()}
    if len(columns) != 2 or max(abs(lo), abs(hi)) >= _DAY_US:
        return False
    node = sqlglot.parse_one(conjunct_sql, dialect="spark")
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Between):
        comparisons = [(node.this, ">=", node.args["low"]), (node.this, "<=", node.args["high"])]
    elif type(node) in _OPERATORS:
        comparisons = [(node.this, _OPERATORS[type(node)], node.expression)]
    else:
        return False
    for left, op, right in comparisons:
        left_term, right_term = _term(left, columns), _term(right, columns)
        if left_term is None or right_term is None:
            return False
        (left_column, left_offsets), (right_column, right_offsets) = left_term, right_term
        names = [f"{c.table}.{c.name}".lower() for c in (left_column, right_column)]
        if names[0] == names[1]:
            return False
        # left op right  <=>  left's column - right's column  op  their offsets' difference
        bound = sum(right_offsets) - sum(left_offsets)
        if names[0] != second.lower():  # (first - second op c  <=>  second - first op' -c)
            op, bound = _FLIPPED[op], -bound
        if not _meets(op, bound, lo, hi):
            return False
    return True


def _meets(op: str, bound: int, lo: int, hi: int) -> bool:
    """Whether every d in [lo, hi] has ``d op bound``."""
    if op == "<=":
        return hi <= bound
    if op == "<":
        return hi < bound
    if op == ">=":
        return lo >= bound
    if op == ">":
        return lo > bound
    return lo == hi == bound
