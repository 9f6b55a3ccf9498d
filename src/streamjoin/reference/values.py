"""Spark's semantics for single values: comparison, arithmetic, rounding, string helpers.

Values are Python objects: None (NULL), bool, int, float, str, `decimal.Decimal`,
`datetime.datetime` (naive, meaning UTC) and `datetime.timedelta` (an interval). Every function
here takes non-NULL arguments; NULL propagation is the caller's business (`evaluate`).

Numeric typing follows Spark's implicit widening, decided from the values at hand (the reference
has no static types): int op int -> int, anything op float -> float, int op Decimal -> Decimal,
Decimal op float -> float. Values of different categories (say a string and a number) never meet:
that raises TypeError, where Spark would insert an implicit cast or reject the query. CASTs are
in `streamjoin.reference.casts`.
"""

from __future__ import annotations

import datetime as dt
import math
import operator
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Context, Decimal
from functools import lru_cache
from typing import Any

EPOCH = dt.datetime(1970, 1, 1)
_MICRO = dt.timedelta(microseconds=1)
# Spark's decimals hold at most 38 digits; a wider context keeps + - * exact for all of them
# (Python's default context would round at 28 digits) without touching the caller's context.
DEC = Context(prec=100)

_NUMERIC = (int, float, Decimal)


def event_time_us(value: dt.datetime) -> int:
    """Microseconds since the epoch of a timestamp (naive means UTC; aware ones are converted).

    Args:
        value: the event time.

    Returns:
        ``(value - 1970-01-01) // 1 µs``, floored for instants before the epoch.
    """
    return (naive_utc(value) - EPOCH) // _MICRO


def naive_utc(value: dt.datetime) -> dt.datetime:
    """`value` as a naive UTC datetime (naive input is taken to be UTC already)."""
    if value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def category(value: Any) -> str:
    """The category of a non-NULL value: numeric, boolean, string, timestamp or interval."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, _NUMERIC):
        return "numeric"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dt.datetime):
        return "timestamp"
    if isinstance(value, dt.timedelta):
        return "interval"
    msg = f"reference executor cannot handle values of type {type(value).__name__}"
    raise TypeError(msg)


def _numeric_pair(a: Any, b: Any) -> tuple[Any, Any]:
    """Widen two numbers to a common type the way Spark's type coercion would."""
    if isinstance(a, float) or isinstance(b, float):
        return float(a), float(b)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return Decimal(a), Decimal(b)
    return a, b


def _pair(a: Any, b: Any, verb: str) -> tuple[Any, Any]:
    """Bring two values to a common type, or raise TypeError naming both categories."""
    ca, cb = category(a), category(b)
    if ca == cb == "numeric":
        return _numeric_pair(a, b)
    if ca == cb:
        return a, b
    msg = f"reference executor cannot {verb} a {ca} value with a {cb} value ({a!r}, {b!r})"
    raise TypeError(msg)


def compare(a: Any, b: Any) -> int:
    """-1, 0 or 1 as Spark orders two non-NULL values (NaN equals NaN and exceeds all numbers)."""
    a, b = _pair(a, b, "compare")
    if isinstance(a, float):
        a_nan, b_nan = math.isnan(a), math.isnan(b)
        if a_nan or b_nan:
            return int(a_nan) - int(b_nan)
    return -1 if a < b else (1 if a > b else 0)


def comparator(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """Spark's comparison `op` (operator.lt, …) on two non-NULL values, fast in common cases."""

    def cmp(a: Any, b: Any) -> bool:
        # The fast paths leave NaN (which Spark orders above every number) to `compare`.
        ta, tb = type(a), type(b)
        if ta is tb:
            if ta is not float or (a == a and b == b):
                return op(a, b)
        elif ta is float and (tb is int or tb is Decimal) and a == a:
            return op(a, float(b))
        elif tb is float and (ta is int or ta is Decimal) and b == b:
            return op(float(a), b)
        return op(compare(a, b), 0)

    return cmp


equal = comparator(operator.eq)
"""Spark's ``=`` on two non-NULL values."""


def _arith(a: Any, b: Any, verb: str) -> tuple[Any, Any]:
    """Operands of + - * after widening; anything but two numbers raises TypeError."""
    a, b = _pair(a, b, verb)
    if not isinstance(a, _NUMERIC) or isinstance(a, bool):
        msg = f"reference executor cannot {verb} {category(a)} values ({a!r}, {b!r})"
        raise TypeError(msg)
    return a, b


def _temporal(a: Any, b: Any) -> bool:
    """True when a +/- b is timestamp/interval arithmetic rather than numeric."""
    return isinstance(a, dt.timedelta | dt.datetime) and isinstance(b, dt.timedelta | dt.datetime)


def add(a: Any, b: Any) -> Any:
    """``a + b``: numbers, or timestamp + interval, or interval + interval."""
    ta = type(a)
    if ta is type(b) and (ta is int or ta is float):
        return a + b
    if type(b) is dt.timedelta and (ta is dt.datetime or ta is dt.timedelta):
        return a + b
    if _temporal(a, b):
        if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):
            msg = "reference executor cannot add two timestamps"
            raise TypeError(msg)
        return a + b
    a, b = _arith(a, b, "add")
    return DEC.add(a, b) if isinstance(a, Decimal) else a + b


def subtract(a: Any, b: Any) -> Any:
    """``a - b``: numbers, timestamp - interval or interval - interval."""
    ta = type(a)
    if ta is type(b) and (ta is int or ta is float):
        return a - b
    if type(b) is dt.timedelta and (ta is dt.datetime or ta is dt.timedelta):
        return a - b
    if _temporal(a, b):
        if isinstance(b, dt.datetime):
            msg = "reference executor cannot evaluate timestamp - timestamp"
            raise NotImplementedError(msg)
        return a - b
    a, b = _arith(a, b, "subtract")
    return DEC.subtract(a, b) if isinstance(a, Decimal) else a - b


def multiply(a: Any, b: Any) -> Any:
    """``a * b`` on numbers (ints are unbounded: Spark's overflow is not emulated)."""
    a, b = _arith(a, b, "multiply")
    return DEC.multiply(a, b) if isinstance(a, Decimal) else a * b


def divide(a: Any, b: Any) -> Any:
    """``a / b`` as a float, or None when b is zero (Spark's non-ANSI division)."""
    a, b = _arith(a, b, "divide")
    return None if b == 0 else float(a) / float(b)


def _java_rem(a: Any, b: Any) -> Any:
    """Remainder with the sign of the dividend (Java's ``%``), b != 0, same-typed operands."""
    if isinstance(a, float):
        return math.fmod(a, b)
    if isinstance(a, Decimal):
        return DEC.remainder(a, b)  # the Decimal remainder already takes the dividend's sign
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def remainder(a: Any, b: Any) -> Any:
    """``a % b`` with the sign of the dividend, or None when b is zero."""
    a, b = _arith(a, b, "take the remainder of")
    return None if b == 0 else _java_rem(a, b)


def pmod(a: Any, b: Any) -> Any:
    """Spark's ``pmod(a, b)``: ``r = a % b; r < 0 ? (r + b) % b : r``, None when b is zero."""
    a, b = _arith(a, b, "pmod")
    if b == 0:
        return None
    r = _java_rem(a, b)
    return _java_rem(r + b, b) if r < 0 else r


def int_divide(a: Any, b: Any) -> Any:
    """``a div b``: the quotient truncated toward zero as an int, None when b is zero."""
    a, b = _arith(a, b, "div")
    if isinstance(a, float):
        # Spark casts DOUBLE operands of `div` to an integral or decimal type first; which one
        # changes the answer, so the reference refuses rather than guess.
        msg = "reference executor cannot evaluate `div` on DOUBLE operands"
        raise NotImplementedError(msg)
    if b == 0:
        return None
    if isinstance(a, Decimal):
        return int(DEC.divide_int(a, b))  # Decimal's integer division truncates toward zero
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def negate(a: Any) -> Any:
    """Unary minus of a number or an interval."""
    if isinstance(a, Decimal):
        return DEC.minus(a)
    if isinstance(a, bool) or not isinstance(a, int | float | dt.timedelta):
        msg = f"reference executor cannot negate {a!r}"
        raise TypeError(msg)
    return -a


def absolute(a: Any) -> Any:
    """``abs(a)`` of a number or an interval."""
    ta = type(a)
    if ta is float or ta is int or ta is dt.timedelta:
        return abs(a)
    if ta is Decimal:
        return DEC.abs(a)
    msg = f"reference executor cannot take abs of {a!r}"
    raise TypeError(msg)


def round_half_up(x: Any, digits: int) -> Any:
    """Spark's ``round(x, digits)``: HALF_UP on the decimal text of x; keeps x's type."""
    if isinstance(x, float) and not math.isfinite(x):
        return x
    if isinstance(x, int) and not isinstance(x, bool) and digits >= 0:
        return x
    # Spark rounds a DOUBLE through BigDecimal(Double.toString(x)); repr gives the same digits.
    d = Decimal(repr(x)) if isinstance(x, float) else _as_decimal(x)
    q = d.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP, context=DEC)
    if isinstance(x, float):
        return float(q)
    return int(q) if isinstance(x, int) else q


def _as_decimal(x: Any) -> Decimal:
    if isinstance(x, Decimal):
        return x
    if isinstance(x, bool) or not isinstance(x, int):
        msg = f"reference executor cannot round {x!r}"
        raise TypeError(msg)
    return Decimal(x)


def floor_or_ceil(x: Any, *, ceil: bool) -> int | None:
    """``floor``/``ceil`` as an int (Spark's BIGINT); None for NaN and infinities."""
    if isinstance(x, bool) or not isinstance(x, _NUMERIC):
        msg = f"reference executor cannot take floor/ceil of {x!r}"
        raise TypeError(msg)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return math.ceil(x) if ceil else math.floor(x)


def widest(values: list[Any], pick: Any) -> Any:
    """`pick` widened to the widest numeric type among `values` (greatest/least results)."""
    if isinstance(pick, bool) or not isinstance(pick, _NUMERIC):
        return pick
    if any(isinstance(v, float) for v in values):
        return float(pick)
    if any(isinstance(v, Decimal) for v in values):
        return Decimal(pick)
    return pick


def substring(s: str, pos: int, length: int | None) -> str:
    """Spark's ``substring(s, pos[, len])``: pos 0 acts as 1, pos < 0 counts from the end."""
    n = len(s)
    start = pos - 1 if pos > 0 else (n + pos if pos < 0 else 0)
    end = n if length is None else start + length
    start = max(start, 0)
    return "" if start >= end else s[start:end]


@lru_cache(maxsize=256)
def like_pattern(pattern: str, escape: str = "\\") -> re.Pattern[str]:
    """The regular expression equivalent to a SQL LIKE pattern (``%``, ``_``, escape char)."""
    out: list[str] = []
    chars = iter(pattern)
    for c in chars:
        if c == escape:
            nxt = next(chars, None)
            if nxt is None:
                msg = f"LIKE pattern {pattern!r} ends with the escape character"
                raise ValueError(msg)
            out.append(re.escape(nxt))
        elif c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(re.escape(c))
    return re.compile("".join(out), re.DOTALL)
