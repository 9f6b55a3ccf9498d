"""Evaluate Spark SQL expressions in Python, for the reference executor.

`compile_expression` parses the text once with sqlglot (Spark dialect) and turns the tree into
nested closures, so evaluating a predicate on a pair is a few Python calls, not a tree walk.
This module compiles columns, literals, logic, comparisons and arithmetic; functions and
conditional forms are in `streamjoin.reference.functions`.

Literals: an integer is an int; a number with a decimal point is a `Decimal` (as in Spark, where
``0.5`` is DECIMAL(1,1)); a number with an exponent (``1e3``) is a float (Spark's DOUBLE). Mixing
follows Spark: Decimal with float computes in float, Decimal with int stays Decimal. So
``b.price <= 0.5`` with a DOUBLE price compares as doubles, exactly as Spark does.

Known differences from Spark, all deliberate (the reference has values, not static types):
``/`` always returns a float (Spark returns DECIMAL when an operand is DECIMAL); integer
overflow is not emulated; a failed CAST gives NULL (Spark's non-ANSI / try_cast behaviour);
``x / 0`` and ``x % 0`` give NULL (non-ANSI); timestamps are naive UTC (session zone UTC).
"""

from __future__ import annotations

import datetime as dt
import operator
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp

from streamjoin.model.intervals import unit_micros
from streamjoin.reference import values as v
from streamjoin.reference.functions import (
    FUNCTIONS,
    Compile,
    Env,
    Evaluator,
    Handler,
    binary,
    boolean,
    constant,
    strict1,
    unary,
    unsupported,
)

__all__ = ["Env", "Evaluator", "and3", "compile_expression"]

_ge = v.comparator(operator.ge)
_le = v.comparator(operator.le)


def compile_expression(sql: str) -> Evaluator:
    """Compile Spark SQL expression text into a function of an environment.

    Args:
        sql: the expression, every column qualified by an alias (``b.price``).

    Returns:
        A function of ``{alias: {column: value}}`` giving the value with Spark's semantics
        (None is NULL; predicates give True, False or None). Aliases and column names match
        case-insensitively.

    Raises:
        ValueError: the text does not parse.
        NotImplementedError: the expression uses a construct the reference cannot evaluate.
    """
    try:
        tree = sqlglot.parse_one(sql, dialect="spark")
    except sqlglot.errors.SqlglotError as e:
        msg = f"cannot parse expression {sql!r}: {e}"
        raise ValueError(msg) from e
    assert isinstance(tree, exp.Expression)
    return _compile(tree)


def _compile(node: exp.Expression) -> Evaluator:
    handler = _HANDLERS.get(type(node))
    if handler is None:
        raise NotImplementedError(unsupported(node))
    return handler(node, _compile)


def and3(a: object, b: object) -> bool | None:
    """SQL AND: FALSE wins over NULL, NULL over TRUE."""
    a, b = boolean(a), boolean(b)
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _and(n: exp.And, c: Compile) -> Evaluator:
    lf, rf = c(n.this), c(n.expression)

    def run(env: Env) -> object:
        a = lf(env)
        if a is False:  # FALSE AND anything is FALSE: skip the right side
            return False
        return and3(a, rf(env))

    return run


def _or(n: exp.Or, c: Compile) -> Evaluator:
    lf, rf = c(n.this), c(n.expression)

    def run(env: Env) -> object:
        a = boolean(lf(env))
        if a is True:
            return True
        b = boolean(rf(env))
        if b is True:
            return True
        return None if a is None or b is None else False

    return run


def _not3(a: object) -> bool | None:
    a = boolean(a)
    return None if a is None else not a


def _neq(a: Any, b: Any) -> bool:
    return not v.equal(a, b)


def _null_safe_eq(n: exp.NullSafeEQ, c: Compile) -> Evaluator:
    lf, rf = c(n.this), c(n.expression)

    def run(env: Env) -> object:
        a, b = lf(env), rf(env)
        if a is None or b is None:
            return a is None and b is None
        return v.equal(a, b)

    return run


def _is(n: exp.Is, c: Compile) -> Evaluator:
    f, target = c(n.this), n.expression
    if isinstance(target, exp.Null):
        return lambda env: f(env) is None
    if isinstance(target, exp.Boolean):
        wanted = bool(target.this)
        return lambda env: boolean(f(env)) is wanted
    raise NotImplementedError(unsupported(n))


def _between(n: exp.Between, c: Compile) -> Evaluator:
    if n.args.get("symmetric"):
        raise NotImplementedError(unsupported(n))
    xf, lof, hif = c(n.this), c(n.args["low"]), c(n.args["high"])

    def run(env: Env) -> object:
        # x >= lo AND x <= hi, with comparisons involving NULL giving NULL.
        x, lo, hi = xf(env), lof(env), hif(env)
        above = None if x is None or lo is None else _ge(x, lo)
        below = None if x is None or hi is None else _le(x, hi)
        return and3(above, below)

    return run


def _in(n: exp.In, c: Compile) -> Evaluator:
    if n.args.get("query") or n.args.get("unnest") or n.args.get("field"):
        raise NotImplementedError(unsupported(n))
    xf = c(n.this)
    items = [c(e) for e in n.expressions]

    def run(env: Env) -> object:
        # TRUE if some item equals x; else NULL if x or some item is NULL; else FALSE.
        x = xf(env)
        if x is None:
            return None
        saw_null = False
        for item in items:
            y = item(env)
            if y is None:
                saw_null = True
            elif v.equal(x, y):
                return True
        return None if saw_null else False

    return run


def _column(n: exp.Column, c: Compile) -> Evaluator:
    table = n.args.get("table")
    if table is None or n.args.get("db") or n.args.get("catalog"):
        msg = f"reference executor needs columns qualified as alias.column, got {n.sql()!r}"
        raise NotImplementedError(msg)
    alias, col = table.name, n.name.lower()

    def get(env: Env) -> object:
        try:
            return env[alias][col]
        except KeyError:
            return _lookup(env, alias, col)

    return get


def _lookup(env: Env, alias: str, col: str) -> object:
    """Case-insensitive lookup: the slow path when the exact spelling is not in the row."""
    rows = [r for a, r in env.items() if a.lower() == alias.lower()]
    if not rows:
        msg = f"unknown alias {alias!r} in {alias}.{col}; environment has {sorted(env)}"
        raise KeyError(msg)
    for key, value in rows[0].items():
        if key.lower() == col:
            return value
    msg = f"row of {alias!r} has no column {col!r}; it has {sorted(rows[0])}"
    raise KeyError(msg)


def _literal(n: exp.Literal, c: Compile) -> Evaluator:
    text: str = n.this
    if n.is_string:
        return constant(text)
    if text.isdigit():
        return constant(int(text))
    if "e" in text.lower():
        return constant(float(text))  # Spark: an exponent makes a DOUBLE literal
    return constant(Decimal(text))  # Spark: a decimal point makes a DECIMAL literal


def _interval(n: exp.Interval, c: Compile) -> Evaluator:
    amount, unit = n.this, n.args.get("unit")
    if not isinstance(amount, exp.Literal) or not isinstance(unit, exp.Var):
        raise NotImplementedError(unsupported(n))
    unit_us = unit_micros(unit.name)
    if unit_us is None:
        msg = f"reference executor cannot evaluate INTERVAL unit {unit.name!r}"
        raise NotImplementedError(msg)
    micros = Decimal(str(amount.this).strip()) * unit_us
    if micros != micros.to_integral_value():
        msg = f"interval {n.sql(dialect='spark')!r} is finer than a microsecond"
        raise ValueError(msg)
    return constant(dt.timedelta(microseconds=int(micros)))


_HANDLERS: dict[type[exp.Expression], Handler] = {
    exp.Paren: lambda n, c: c(n.this),
    exp.Column: _column,
    exp.Literal: _literal,
    exp.Boolean: lambda n, c: constant(bool(n.this)),
    exp.Null: lambda n, c: constant(None),
    exp.Interval: _interval,
    exp.And: _and,
    exp.Or: _or,
    exp.Not: lambda n, c: strict1(c(n.this), _not3),
    exp.EQ: binary(v.equal),
    exp.NEQ: binary(_neq),
    exp.NullSafeEQ: _null_safe_eq,
    exp.LT: binary(v.comparator(operator.lt)),
    exp.LTE: binary(v.comparator(operator.le)),
    exp.GT: binary(v.comparator(operator.gt)),
    exp.GTE: binary(v.comparator(operator.ge)),
    exp.Is: _is,
    exp.Between: _between,
    exp.In: _in,
    exp.Add: binary(v.add),
    exp.Sub: binary(v.subtract),
    exp.Mul: binary(v.multiply),
    exp.Div: binary(v.divide),
    exp.Mod: binary(v.remainder),
    exp.IntDiv: binary(v.int_divide),
    exp.Neg: unary(v.negate),
    **FUNCTIONS,
}
