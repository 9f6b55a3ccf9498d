"""The interval units a job may write (``INTERVAL '10' SECOND``) and their length.

One table for the DDL parser (watermark delays), the planner (windows) and the reference
evaluator, so that all three accept the same units and give them the same length.
"""

from __future__ import annotations

import types
import typing as t

MICROS_PER_UNIT: t.Final[t.Mapping[str, int]] = types.MappingProxyType(
    {
        "MICROSECOND": 1,
        "MILLISECOND": 1_000,
        "SECOND": 1_000_000,
        "MINUTE": 60_000_000,
        "HOUR": 3_600_000_000,
        "DAY": 86_400_000_000,
    }
)
"""Microseconds in one of each unit, by its singular upper-case name. Day-time units only: a
month or a year has no fixed length."""


def unit_micros(name: str) -> int | None:
    """Microseconds in one `name` (any case, singular or plural), or None for another unit.

    >>> unit_micros("seconds"), unit_micros("Day"), unit_micros("WEEK")
    (1000000, 86400000000, None)
    """
    return MICROS_PER_UNIT.get(name.upper().removesuffix("S"))


def seconds_of(text: str) -> int | None:
    """Seconds of a duration option (``'30 seconds'``, ``'1 hour'``: a query's ``ttl`` or
    ``freshness``), or None if it is not a positive whole number of seconds.

    >>> seconds_of("30 seconds"), seconds_of("2 minutes"), seconds_of("500 milliseconds")
    (30, 120, None)
    """
    parts = text.split()
    n = whole_number(parts[0]) if len(parts) == 2 else None
    micros = unit_micros(parts[1]) if n is not None else None
    if n is None or micros is None or n * micros % 1_000_000 or n == 0:
        return None
    return n * micros // 1_000_000


def whole_number(text: str) -> int | None:
    """The number `text` spells in at most 18 ASCII digits, or None: a job's counts and
    durations (``str.isdigit`` takes ``'²'``, and ``int`` refuses more than 4,300 digits).

    >>> whole_number("10"), whole_number("²"), whole_number("1" * 5000), whole_number("-1")
    (10, None, None, None)
    """
    if not 0 < len(text) <= 18 or not text.isascii() or not text.isdigit():
        return None
    return int(text)
