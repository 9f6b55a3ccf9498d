"""A small type inference over sqlglot expressions: enough to reject obvious mistakes early.

It only knows categories (numeric, string, boolean, timestamp, interval), not exact types, and it
is deliberately forgiving: whatever it does not recognise is ``unknown`` and never an error, so
that Spark, not this module, has the last word on anything subtle.
"""

from __future__ import annotations

import typing as t
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlglot import exp

from streamjoin.model import SqlType

Category = t.Literal["numeric", "string", "boolean", "timestamp", "interval", "null", "unknown"]
"""What an expression evaluates to, as far as comparisons and arithmetic care."""

ColumnTypes = Callable[[exp.Column], SqlType | None]
"""Gives the declared type of a column reference, or None if it is not known."""

_SOFT: frozenset[Category] = frozenset({"null", "unknown"})

_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_MATCHES = (exp.Like, exp.ILike, exp.RegexpLike)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)
_NUMERIC_FUNCS = (exp.Abs, exp.Floor, exp.Ceil, exp.Round, exp.Length)
_STRING_FUNCS = (exp.Lower, exp.Upper, exp.Concat, exp.Substring, exp.DPipe)
_TIMESTAMP_TYPES = frozenset(
    {
        exp.DataType.Type.TIMESTAMP,
        exp.DataType.Type.TIMESTAMPTZ,
        exp.DataType.Type.TIMESTAMPLTZ,
        exp.DataType.Type.TIMESTAMPNTZ,
    }
)


class TypeCheckError(Exception):
    """A type mistake in an expression; `node` is the sub-expression to point at."""

    def __init__(self, message: str, node: exp.Expr) -> None:
        super().__init__(message)
        self.message = message
        self.node = node


@dataclass(frozen=True, slots=True)
class _Typed:
    category: Category
    label: str  # how messages name the type: the declared type of a column, else the category

    @property
    def known(self) -> bool:
        return self.category not in _SOFT


_UNKNOWN = _Typed("unknown", "UNKNOWN")
_NULL = _Typed("null", "NULL")
_BOOLEAN = _Typed("boolean", "BOOLEAN")


def _of(category: Category) -> _Typed:
    return _Typed(category, category.upper())


def infer_category(expr: exp.Expr, column_type: ColumnTypes) -> Category:
    """The category of `expr`, checking its sub-expressions on the way.

    Args:
        expr: a sqlglot expression (Spark dialect), typically with qualified columns.
        column_type: the declared type of each column reference (None: unknown).

    Returns:
        The category; ``unknown`` for whatever is not recognised.

    Raises:
        TypeCheckError: when two known, different categories are compared, arithmetic meets a
            string or boolean (or mixes categories that do not combine), or AND/OR/NOT/CASE WHEN
            gets a known non-boolean operand.
    """
    return _Checker(column_type).infer(expr).category


class _Checker:
    def __init__(self, column_type: ColumnTypes) -> None:
        self.column_type = column_type

    def infer(self, node: exp.Expr) -> _Typed:
        if isinstance(node, exp.Paren):
            return self.infer(node.this)
        if isinstance(node, exp.Column):
            declared = self.column_type(node)
            return _UNKNOWN if declared is None else _Typed(declared.category, declared.ddl)
        if isinstance(node, exp.Literal):
            return _of("string") if node.is_string else _of("numeric")
        if isinstance(node, exp.Boolean):
            return _BOOLEAN
        if isinstance(node, exp.Null):
            return _NULL
        if isinstance(node, exp.Interval):
            return _of("interval")
        if isinstance(node, exp.Cast):
            self.infer(node.this)
            return _cast_target(node.to)
        if isinstance(node, _COMPARISONS):
            self._compare(node.this, node.expression)
            return _BOOLEAN
        if isinstance(node, exp.Between):
            self._compare(node.this, node.args["low"])
            self._compare(node.this, node.args["high"])
            return _BOOLEAN
        if isinstance(node, exp.In):
            for item in node.expressions:
                self._compare(node.this, item)
            return _BOOLEAN
        if isinstance(node, (exp.And, exp.Or, exp.Xor)):
            word = type(node).__name__.upper()
            self._need_boolean(node.this, word)
            self._need_boolean(node.expression, word)
            return _BOOLEAN
        if isinstance(node, exp.Not):
            self._need_boolean(node.this, "NOT")
            return _BOOLEAN
        if isinstance(node, (exp.Is, *_MATCHES)):
            self._children(node)
            return _BOOLEAN
        if isinstance(node, _ARITHMETIC):
            return self._arithmetic(node)
        if isinstance(node, exp.Neg):
            return self._negate(node)
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.If):
            self._need_boolean(node.this, "IF")
            return self._unify([node.args.get("true"), node.args.get("false")])
        if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
            return self._unify([node.this, *node.expressions])
        if isinstance(node, _NUMERIC_FUNCS):
            self._children(node)
            return _of("numeric")
        if isinstance(node, _STRING_FUNCS):
            self._children(node)
            return _of("string")
        self._children(node)
        return _UNKNOWN

    def _children(self, node: exp.Expr) -> None:
        for child in node.iter_expressions():
            self.infer(child)

    def _compare(self, left: exp.Expr, right: exp.Expr) -> None:
        lt, rt = self.infer(left), self.infer(right)
        if not (lt.known and rt.known) or lt.category == rt.category:
            return
        # Spark reads a string literal compared with a timestamp as a timestamp constant.
        if {lt.category, rt.category} == {"string", "timestamp"} and _is_string_literal(
            left if lt.category == "string" else right
        ):
            return
        msg = f"type mismatch: {_sql(left)} ({lt.label}) compared with {_sql(right)} ({rt.label})"
        raise TypeCheckError(msg, left)

    def _need_boolean(self, node: exp.Expr, word: str) -> None:
        typed = self.infer(node)
        if typed.known and typed.category != "boolean":
            msg = f"{word} needs boolean operands, but {_sql(node)} is {typed.label}"
            raise TypeCheckError(msg, node)

    def _arithmetic(self, node: exp.Expr) -> _Typed:
        left, right = node.this, node.expression
        lt, rt = self.infer(left), self.infer(right)
        for operand, typed in ((left, lt), (right, rt)):
            if typed.category in ("string", "boolean"):
                msg = f"arithmetic needs numbers, but {_sql(operand)} is {typed.label}"
                raise TypeCheckError(msg, operand)
        if "unknown" in (lt.category, rt.category):
            return _UNKNOWN
        if not (lt.known and rt.known):
            # NULL propagates without changing what the other operand makes of the result.
            return _of(rt.category) if lt.category == "null" else _of(lt.category)
        result = _combine(type(node), lt.category, rt.category)
        if result is None:
            msg = (
                f"cannot compute {_sql(node)}: {_sql(left)} is {lt.label} "
                f"and {_sql(right)} is {rt.label}"
            )
            raise TypeCheckError(msg, node)
        return _of(result)

    def _negate(self, node: exp.Neg) -> _Typed:
        typed = self.infer(node.this)
        if typed.category in ("string", "boolean", "timestamp"):
            msg = f"cannot negate {_sql(node.this)}: it is {typed.label}"
            raise TypeCheckError(msg, node.this)
        return _of(typed.category) if typed.known else typed

    def _case(self, node: exp.Case) -> _Typed:
        operand = node.this
        results: list[exp.Expr | None] = [node.args.get("default")]
        for branch in node.args.get("ifs") or []:
            if operand is not None:
                self._compare(operand, branch.this)
            else:
                self._need_boolean(branch.this, "CASE WHEN")
            results.append(branch.args.get("true"))
        return self._unify(results)

    def _unify(self, nodes: Iterable[exp.Expr | None]) -> _Typed:
        typed = [self.infer(n) for n in nodes if n is not None]
        known = {x.category for x in typed if x.known}
        if len(known) == 1:
            return _of(known.pop())
        if not known and typed and all(x.category == "null" for x in typed):
            return _NULL
        return _UNKNOWN


def _combine(op: type[exp.Expr], left: Category, right: Category) -> Category | None:
    """The category of ``left op right`` for two known categories, or None if they do not mix."""
    pair = (left, right)
    if pair == ("numeric", "numeric"):
        return "numeric"
    if op is exp.Add and pair in (("timestamp", "interval"), ("interval", "timestamp")):
        return "timestamp"
    if op is exp.Sub and pair == ("timestamp", "interval"):
        return "timestamp"
    if op is exp.Sub and pair == ("timestamp", "timestamp"):
        return "interval"
    if op in (exp.Add, exp.Sub) and pair == ("interval", "interval"):
        return "interval"
    if op is exp.Mul and pair in (("interval", "numeric"), ("numeric", "interval")):
        return "interval"
    if op is exp.Div and pair == ("interval", "numeric"):
        return "interval"
    return None


def _cast_target(to: exp.DataType) -> _Typed:
    kind = to.this
    if kind in exp.DataType.NUMERIC_TYPES:
        return _of("numeric")
    if kind in exp.DataType.TEXT_TYPES:
        return _of("string")
    if kind == exp.DataType.Type.BOOLEAN:
        return _BOOLEAN
    if kind in _TIMESTAMP_TYPES:
        return _of("timestamp")
    return _UNKNOWN


def _is_string_literal(node: exp.Expr) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, exp.Literal) and node.is_string


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="spark")
