"""Compilers for SQL functions and conditional forms (CASE, IF, COALESCE, CAST, LIKE, …).

Every compiler takes the sqlglot node and the compiler of sub-expressions (`Compile`), so this
module does not import `evaluate`; `evaluate` puts them in its dispatch table.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

from streamjoin.reference import casts
from streamjoin.reference import values as v

Env = Mapping[str, Mapping[str, object]]
"""Alias -> row; a row maps column name -> value."""

Evaluator = Callable[[Env], object]
"""A compiled expression: the value of the expression in an environment."""

Compile = Callable[[exp.Expression], Evaluator]
Handler = Callable[[Any, Compile], Evaluator]

_T = exp.DataType.Type
_INTEGRAL = {_T.BIGINT, _T.INT, _T.SMALLINT, _T.TINYINT}
_TIMESTAMPS = {_T.TIMESTAMP, _T.TIMESTAMPTZ, _T.TIMESTAMPLTZ, _T.TIMESTAMPNTZ}
_STRINGS = {_T.TEXT, _T.VARCHAR, _T.CHAR}


def unsupported(node: exp.Expression) -> str:
    """The message for a construct the reference cannot evaluate, naming it."""
    if isinstance(node, exp.Anonymous):
        what = f"function {node.name.lower()!r}"
    elif isinstance(node, exp.Func):
        what = f"function {node.sql_name().lower()!r}"
    else:
        what = f"{node.key} expression {node.sql(dialect='spark')!r}"
    return f"reference executor cannot evaluate {what}"


def constant(value: object) -> Evaluator:
    """An evaluator that ignores the environment."""
    return lambda env: value


def strict1(f: Evaluator, fn: Callable[[Any], object]) -> Evaluator:
    """fn applied to f's value; NULL in, NULL out."""

    def run(env: Env) -> object:
        a = f(env)
        return None if a is None else fn(a)

    return run


def strict2(lf: Evaluator, rf: Evaluator, fn: Callable[[Any, Any], object]) -> Evaluator:
    """fn applied to both values; NULL if either is NULL."""

    def run(env: Env) -> object:
        a = lf(env)
        if a is None:
            return None
        b = rf(env)
        return None if b is None else fn(a, b)

    return run


def unary(fn: Callable[[Any], object]) -> Handler:
    """A handler for a NULL-strict function of ``this``."""
    return lambda n, c: strict1(c(n.this), fn)


def binary(fn: Callable[[Any, Any], object]) -> Handler:
    """A handler for a NULL-strict operator on ``this`` and ``expression``."""
    return lambda n, c: strict2(c(n.this), c(n.expression), fn)


def boolean(value: object) -> bool | None:
    """`value` checked to be a SQL boolean (None is UNKNOWN)."""
    if value is None or isinstance(value, bool):
        return value
    msg = f"reference executor expected a boolean, got {value!r}"
    raise TypeError(msg)


def constant_int(node: exp.Expression, c: Compile) -> int:
    """A compile-time integer argument (Spark requires e.g. round's scale to be foldable)."""
    try:
        return int_arg(c(node)({}))
    except (KeyError, TypeError) as e:
        msg = f"reference executor needs a constant integer, got {node.sql(dialect='spark')!r}"
        raise NotImplementedError(msg) from e


def int_arg(x: object) -> int:
    """`x` checked to be an integer argument."""
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    msg = f"reference executor expected an integer argument, got {x!r}"
    raise TypeError(msg)


def _case(n: exp.Case, c: Compile) -> Evaluator:
    operand = c(n.this) if n.this is not None else None
    branches = [(c(i.this), c(i.args["true"])) for i in n.args["ifs"]]
    default = c(n.args["default"]) if n.args.get("default") else constant(None)

    def run(env: Env) -> object:
        if operand is None:
            for cond, value in branches:
                if boolean(cond(env)) is True:
                    return value(env)
            return default(env)
        o = operand(env)
        for when, value in branches:  # CASE o WHEN w: o = w, so a NULL never matches
            w = when(env)
            if o is not None and w is not None and v.equal(o, w):
                return value(env)
        return default(env)

    return run


def _if(n: exp.If, c: Compile) -> Evaluator:
    cond, yes = c(n.this), c(n.args["true"])
    no = c(n.args["false"]) if n.args.get("false") else constant(None)
    return lambda env: yes(env) if boolean(cond(env)) is True else no(env)


def _args(n: exp.Expression, c: Compile) -> list[Evaluator]:
    """``this`` followed by ``expressions``, compiled (the shape of variadic functions)."""
    nodes = ([n.this] if n.this is not None else []) + list(n.expressions)
    return [c(a) for a in nodes]


def _coalesce(n: exp.Coalesce, c: Compile) -> Evaluator:
    fs = _args(n, c)

    def run(env: Env) -> object:
        for f in fs:
            x = f(env)
            if x is not None:
                return x
        return None

    return run


def _nullif(n: exp.Nullif, c: Compile) -> Evaluator:
    af, bf = c(n.this), c(n.expression)

    def run(env: Env) -> object:
        a, b = af(env), bf(env)
        return None if a is not None and b is not None and v.equal(a, b) else a

    return run


def _extreme(sign: int) -> Handler:
    def handler(n: exp.Expression, c: Compile) -> Evaluator:
        fs = _args(n, c)

        def run(env: Env) -> object:
            # NULLs are skipped; the result is NULL only when every argument is NULL.
            present = [x for x in (f(env) for f in fs) if x is not None]
            if not present:
                return None
            best = present[0]
            for x in present[1:]:
                if v.compare(x, best) * sign > 0:
                    best = x
            return v.widest(present, best)

        return run

    return handler


def _concat(n: exp.Expression, c: Compile) -> Evaluator:
    fs = [c(n.this), c(n.expression)] if isinstance(n, exp.DPipe) else _args(n, c)

    def run(env: Env) -> object:
        parts = [f(env) for f in fs]
        return None if any(p is None for p in parts) else "".join(map(casts.to_string, parts))

    return run


def _substring(n: exp.Substring, c: Compile) -> Evaluator:
    sf = c(n.this)
    pf = c(n.args["start"]) if n.args.get("start") else constant(1)
    lf = c(n.args["length"]) if n.args.get("length") else None

    def run(env: Env) -> object:
        s, pos = sf(env), pf(env)
        length = lf(env) if lf is not None else None
        if s is None or pos is None or (lf is not None and length is None):
            return None
        count = None if length is None else int_arg(length)
        return v.substring(casts.to_string(s), int_arg(pos), count)

    return run


def _round(n: exp.Round, c: Compile) -> Evaluator:
    if n.args.get("truncate"):
        raise NotImplementedError(unsupported(n))
    digits = constant_int(n.args["decimals"], c) if n.args.get("decimals") else 0
    return strict1(c(n.this), lambda x: v.round_half_up(x, digits))


def _floor_ceil(ceil: bool) -> Handler:
    def handler(n: exp.Expression, c: Compile) -> Evaluator:
        if n.args.get("decimals") or n.args.get("to"):
            raise NotImplementedError(unsupported(n))
        return strict1(c(n.this), lambda x: v.floor_or_ceil(x, ceil=ceil))

    return handler


def _string_fn(fn: Callable[[str], object]) -> Handler:
    # Spark casts a non-string argument to STRING implicitly.
    return unary(lambda x: fn(casts.to_string(x)))


def _unix(divisor: int) -> Handler:
    def convert(x: Any) -> int:
        if not isinstance(x, dt.datetime):
            msg = f"reference executor expected a timestamp, got {x!r}"
            raise TypeError(msg)
        return v.event_time_us(x) // divisor

    return unary(convert)


def _like(n: exp.Like, c: Compile, escape: str = "\\") -> Evaluator:
    negate = bool(n.args.get("negate"))

    def match(s: Any, pattern: Any) -> bool:
        if not isinstance(s, str) or not isinstance(pattern, str):
            msg = f"reference executor: LIKE needs strings, got {s!r} and {pattern!r}"
            raise TypeError(msg)
        return (v.like_pattern(pattern, escape).fullmatch(s) is not None) != negate

    return strict2(c(n.this), c(n.expression), match)


def _escape(n: exp.Escape, c: Compile) -> Evaluator:
    esc = n.expression
    if not isinstance(n.this, exp.Like) or not (isinstance(esc, exp.Literal) and esc.is_string):
        raise NotImplementedError(unsupported(n))
    return _like(n.this, c, esc.this)


def _cast(n: exp.Cast, c: Compile) -> Evaluator:
    to: exp.DataType = n.args["to"]
    kind = to.this
    convert: Callable[[Any], object]
    if kind in _INTEGRAL:
        convert = casts.to_bigint
    elif kind == _T.DOUBLE:
        convert = casts.to_double
    elif kind == _T.FLOAT:
        convert = casts.to_float32
    elif kind in _STRINGS:
        convert = casts.to_string
    elif kind == _T.BOOLEAN:
        convert = casts.to_boolean
    elif kind in _TIMESTAMPS:
        convert = casts.to_timestamp
    elif kind == _T.DECIMAL:
        # DECIMAL alone is DECIMAL(10,0) and DECIMAL(p) is DECIMAL(p,0) in Spark.
        params = [constant_int(p.this, c) for p in to.expressions]
        precision, scale = (params + [10, 0][len(params) :])[:2]

        def convert(x: Any) -> object:
            return casts.to_decimal(x, precision, scale)

    else:
        msg = f"reference executor cannot evaluate CAST to {to.sql(dialect='spark')}"
        raise NotImplementedError(msg)
    f = strict1(c(n.this), convert)
    typed_literal = type(n) is exp.Cast  # sqlglot reads CAST(…) as TryCast, TIMESTAMP '…' as Cast
    if typed_literal and isinstance(n.this, exp.Literal) and n.this.is_string and f({}) is None:
        # A typed literal such as TIMESTAMP 'garbage' is a parse error in Spark, not a NULL.
        msg = f"invalid literal {n.sql(dialect='spark')!r}"
        raise ValueError(msg)
    return f


def _isnan(n: exp.IsNan, c: Compile) -> Evaluator:
    # Spark's isnan is not NULL-strict: NULL is not NaN.
    f = c(n.this)

    def run(env: Env) -> object:
        a = f(env)
        return isinstance(a, float) and math.isnan(a)

    return run


def _anonymous(n: exp.Anonymous, c: Compile) -> Evaluator:
    # sqlglot has no node of its own for these Spark functions.
    if n.name.lower() == "pmod" and len(n.expressions) == 2:
        a, b = n.expressions
        return strict2(c(a), c(b), v.pmod)
    raise NotImplementedError(unsupported(n))


FUNCTIONS: dict[type[exp.Expression], Handler] = {
    exp.Case: _case,
    exp.If: _if,
    exp.Coalesce: _coalesce,
    exp.Nullif: _nullif,
    exp.Abs: unary(v.absolute),
    exp.IsNan: _isnan,
    exp.Floor: _floor_ceil(ceil=False),
    exp.Ceil: _floor_ceil(ceil=True),
    exp.Round: _round,
    exp.Greatest: _extreme(1),
    exp.Least: _extreme(-1),
    exp.Lower: _string_fn(str.lower),
    exp.Upper: _string_fn(str.upper),
    exp.Length: _string_fn(len),
    exp.Concat: _concat,
    exp.DPipe: _concat,
    exp.Substring: _substring,
    exp.Like: _like,
    exp.Escape: _escape,
    exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.UnixSeconds: _unix(1_000_000),
    exp.UnixMicros: _unix(1),
    exp.Anonymous: _anonymous,
}
"""Node type -> compiler, for the functions and conditional forms."""
