"""CAST between Spark types, best effort, with non-ANSI behaviour: what cannot convert is NULL.

Values are as in `streamjoin.reference.values`; every function takes a non-NULL value.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from streamjoin.reference.values import DEC, EPOCH, event_time_us, naive_utc

_TRUE_STRINGS = frozenset({"t", "true", "y", "yes", "1"})
_FALSE_STRINGS = frozenset({"f", "false", "n", "no", "0"})


def to_bigint(v: Any) -> int | None:
    """CAST(v AS BIGINT/INT): truncation toward zero; None when not convertible."""
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return int(v) if math.isfinite(v) else None
    if isinstance(v, Decimal):
        return int(v) if v.is_finite() else None
    if isinstance(v, str):
        d = _parse_decimal(v)
        return None if d is None else int(d)
    if isinstance(v, dt.datetime):
        return event_time_us(v) // 1_000_000  # seconds, floored like Spark
    raise _cannot_cast(v, "BIGINT")


def to_double(v: Any) -> float | None:
    """CAST(v AS DOUBLE); None when not convertible."""
    if isinstance(v, int | float | Decimal):
        return float(v)
    if isinstance(v, str):
        text = v.strip()
        if "_" in text:
            return None
        try:
            return float(text)
        except ValueError:
            return None
    if isinstance(v, dt.datetime):
        return event_time_us(v) / 1e6
    raise _cannot_cast(v, "DOUBLE")


def to_float32(v: Any) -> float | None:
    """CAST(v AS FLOAT): a DOUBLE rounded to single precision."""
    d = to_double(v)
    if d is None or not math.isfinite(d) or abs(d) > 3.4028234663852886e38:
        return d
    return float(struct.unpack("f", struct.pack("f", d))[0])


def to_boolean(v: Any) -> bool | None:
    """CAST(v AS BOOLEAN): numbers are true unless zero; Spark's accepted strings."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float | Decimal):
        return bool(v != 0)
    if isinstance(v, str):
        text = v.strip().lower()
        if text in _TRUE_STRINGS:
            return True
        return False if text in _FALSE_STRINGS else None
    if isinstance(v, dt.datetime):
        return event_time_us(v) != 0
    raise _cannot_cast(v, "BOOLEAN")


def to_decimal(v: Any, precision: int, scale: int) -> Decimal | None:
    """CAST(v AS DECIMAL(p, s)): rounded HALF_UP to s places; None on overflow (non-ANSI)."""
    d: Decimal | None
    if isinstance(v, bool):
        d = Decimal(int(v))
    elif isinstance(v, int):
        d = Decimal(v)
    elif isinstance(v, float):
        d = Decimal(repr(v)) if math.isfinite(v) else None
    elif isinstance(v, Decimal):
        d = v if v.is_finite() else None
    elif isinstance(v, str):
        d = _parse_decimal(v)
    elif isinstance(v, dt.datetime):
        d = Decimal(event_time_us(v)).scaleb(-6)
    else:
        raise _cannot_cast(v, "DECIMAL")
    if d is None:
        return None
    q = d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=DEC)
    return None if q != 0 and q.adjusted() >= precision - scale else q


def to_timestamp(v: Any) -> dt.datetime | None:
    """CAST(v AS TIMESTAMP): strings as ISO-8601 (zone optional), numbers as epoch seconds."""
    if isinstance(v, dt.datetime):
        return naive_utc(v)
    if isinstance(v, str):
        return parse_timestamp(v)
    if isinstance(v, int | float | Decimal) and not isinstance(v, bool):
        d = to_decimal(v, 38, 6)
        return None if d is None else EPOCH + dt.timedelta(microseconds=int(d.scaleb(6)))
    raise _cannot_cast(v, "TIMESTAMP")


def to_string(v: Any) -> str:
    """CAST(v AS STRING) with Spark's spelling of booleans, doubles, decimals and timestamps."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _double_text(v)
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        v = naive_utc(v)
        text = f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
        return f"{text}.{v.microsecond:06d}".rstrip("0") if v.microsecond else text
    raise _cannot_cast(v, "STRING")


def _double_text(x: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else ``d.dddE±n``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)  # repr never uses an exponent in this range and always shows ".0"
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    assert isinstance(exponent, int)  # finite, checked above
    text = "".join(map(str, digits)).rstrip("0") or "0"
    mantissa = f"{text[0]}.{text[1:] or '0'}"
    return f"{'-' if sign else ''}{mantissa}E{len(digits) - 1 + exponent}"


def parse_timestamp(text: str) -> dt.datetime | None:
    """A timestamp from ``yyyy[-mm[-dd[( |T)hh:mm[:ss[.ffffff]]]]][zone]``, else None."""
    s = text.strip()
    if re.fullmatch(r"\d{4}(-\d{1,2})?", s):
        year, _, month = s.partition("-")
        return dt.datetime(int(year), int(month or 1), 1)
    try:
        return naive_utc(dt.datetime.fromisoformat(s))
    except ValueError:
        return None


def _parse_decimal(text: str) -> Decimal | None:
    s = text.strip()
    if "_" in s:  # Python accepts digit separators, Spark does not
        return None
    try:
        d = Decimal(s)
    except InvalidOperation:
        return None
    return d if d.is_finite() else None


def _cannot_cast(v: Any, target: str) -> TypeError:
    msg = f"reference executor cannot cast {type(v).__name__} value {v!r} to {target}"
    return TypeError(msg)
