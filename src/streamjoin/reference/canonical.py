"""A canonical order for multisets of result rows, so engine and reference output compare."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from decimal import Decimal

from streamjoin.reference import values as v

# The rank of each kind of value in the canonical order: NULL first, then by category.
_RANK_NULL, _RANK_BOOL, _RANK_NUMBER, _RANK_NAN, _RANK_STR, _RANK_TS, _RANK_IV, _RANK_OTHER = range(
    8
)


def normalize(rows: Iterable[Sequence[object]], float_digits: int = 9) -> list[tuple[object, ...]]:
    """Sort a multiset of rows into a canonical order, for ``normalize(a) == normalize(b)``.

    Floats are rounded to `float_digits` decimal places and every NaN becomes the one object
    `math.nan` (tuple equality tests identity first, so NaN rows then compare equal). Aware
    datetimes become naive UTC. Ints, Decimals and floats stay what they are and sort together
    by value (``3 == 3.0 == Decimal(3)`` in Python, so equal numbers of different types match).

    Args:
        rows: result rows (tuples or lists), duplicates meaningful.
        float_digits: decimal places kept of every float.

    Returns:
        The rows as tuples, sorted: NULL before any value, then booleans, numbers, NaN, strings,
        timestamps, intervals, anything else (by repr).
    """
    canonical = [tuple(_canonical(x, float_digits) for x in row) for row in rows]
    return sorted(canonical, key=lambda row: tuple(_sort_key(x) for x in row))


def _canonical(x: object, float_digits: int) -> object:
    if isinstance(x, float):
        return math.nan if math.isnan(x) else round(x, float_digits)
    if isinstance(x, dt.datetime):
        return v.naive_utc(x)
    return x


def _sort_key(x: object) -> tuple[int, object]:
    # Values of different kinds never get compared with each other: the rank decides first.
    if x is None:
        return (_RANK_NULL, 0)
    if isinstance(x, bool):
        return (_RANK_BOOL, x)
    if isinstance(x, float) and math.isnan(x):
        return (_RANK_NAN, 0)
    if isinstance(x, int | float | Decimal):
        return (_RANK_NUMBER, x)
    if isinstance(x, str):
        return (_RANK_STR, x)
    if isinstance(x, dt.datetime):
        return (_RANK_TS, x)
    if isinstance(x, dt.timedelta):
        return (_RANK_IV, x)
    return (_RANK_OTHER, repr(x))
