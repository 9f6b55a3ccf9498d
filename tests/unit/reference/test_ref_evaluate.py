"""Spark SQL expression semantics of the reference evaluator."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest

from streamjoin.reference import compile_expression

T0 = dt.datetime(2024, 1, 1, 12, 0, 0)


def ev(sql: str, **a: object) -> object:
    """Evaluate `sql` with alias `a` bound to the keyword arguments (and an empty alias `b`)."""
    return compile_expression(sql)({"a": a, "b": {}})


# ------------------------------------------------------------------------ three-valued logic

N = None
AND_TABLE = [
    (True, True, True),
    (True, False, False),
    (True, N, N),
    (False, True, False),
    (False, False, False),
    (False, N, False),
    (N, True, N),
    (N, False, False),
    (N, N, N),
]
OR_TABLE = [
    (True, True, True),
    (True, False, True),
    (True, N, True),
    (False, True, True),
    (False, False, False),
    (False, N, N),
    (N, True, True),
    (N, False, N),
    (N, N, N),
]


@pytest.mark.parametrize(("p", "q", "want"), AND_TABLE)
def test_and_truth_table(p: bool | None, q: bool | None, want: bool | None) -> None:
    assert ev("a.p AND a.q", p=p, q=q) is want


@pytest.mark.parametrize(("p", "q", "want"), OR_TABLE)
def test_or_truth_table(p: bool | None, q: bool | None, want: bool | None) -> None:
    assert ev("a.p OR a.q", p=p, q=q) is want


@pytest.mark.parametrize(("p", "want"), [(True, False), (False, True), (N, N)])
def test_not_truth_table(p: bool | None, want: bool | None) -> None:
    assert ev("NOT a.p", p=p) is want


def test_literal_logic() -> None:
    assert ev("FALSE AND NULL") is False
    assert ev("TRUE OR NULL") is True
    assert ev("NULL AND TRUE") is None
    assert ev("NOT NULL") is None


def test_logic_rejects_non_booleans() -> None:
    with pytest.raises(TypeError):
        ev("a.x AND TRUE", x=1)


# ------------------------------------------------------------------------------- comparisons


@pytest.mark.parametrize("op", ["=", "<>", "!=", "<", "<=", ">", ">="])
def test_comparison_with_null_is_null(op: str) -> None:
    assert ev(f"a.x {op} a.y", x=1, y=None) is None
    assert ev(f"a.y {op} a.x", x=1, y=None) is None
    assert ev(f"a.y {op} a.y", y=None) is None


def test_null_safe_equality() -> None:
    assert ev("a.x <=> a.y", x=None, y=None) is True
    assert ev("a.x <=> a.y", x=1, y=None) is False
    assert ev("a.x <=> a.y", x=None, y=1) is False
    assert ev("a.x <=> a.y", x=2, y=2.0) is True
    assert ev("a.x = a.y", x=None, y=None) is None


def test_numeric_comparisons_mix_types() -> None:
    assert ev("a.x = a.y", x=2, y=2.0) is True
    assert ev("a.x = a.y", x=Decimal("2.50"), y=2.5) is True
    assert ev("a.x < a.y", x=1, y=Decimal("1.01")) is True
    # A DOUBLE column meets a DECIMAL literal as a double, as in Spark.
    assert ev("a.x = 0.1", x=0.1) is True
    assert ev("a.x <= 0.5", x=0.5) is True
    assert ev("a.x > 0.5", x=0.5000001) is True


def test_string_and_timestamp_comparisons() -> None:
    assert ev("a.s < a.t", s="B", t="a") is True  # code point order: upper before lower
    assert ev("a.s = 'abc'", s="abc") is True
    assert ev("a.s <> 'abc'", s="abd") is True
    assert ev("a.ts < a.u", ts=T0, u=T0 + dt.timedelta(microseconds=1)) is True
    assert ev("a.ts >= TIMESTAMP '2024-01-01 12:00:00'", ts=T0) is True


def test_comparing_different_categories_raises() -> None:
    with pytest.raises(TypeError):
        ev("a.s < a.x", s="1", x=1)


def test_nan_follows_spark() -> None:
    nan = float("nan")
    assert ev("a.x = a.y", x=nan, y=nan) is True
    assert ev("a.x > a.y", x=nan, y=1e308) is True
    assert ev("a.x < a.y", x=nan, y=math.inf) is False


def test_is_null_and_is_true() -> None:
    assert ev("a.x IS NULL", x=None) is True
    assert ev("a.x IS NOT NULL", x=None) is False
    assert ev("a.x IS NOT NULL", x=0) is True
    assert ev("a.p IS TRUE", p=None) is False
    assert ev("a.p IS NOT FALSE", p=None) is True


# ------------------------------------------------------------------------------- arithmetic


def test_integer_arithmetic_stays_integral() -> None:
    for sql, want in [("a.x + 2", 9), ("a.x - 10", -3), ("a.x * 3", 21), ("-a.x", -7)]:
        got = ev(sql, x=7)
        assert got == want
        assert type(got) is int
    assert ev("a.x * a.x", x=2**62) == 2**124  # no overflow emulation


def test_division_is_double_and_null_on_zero() -> None:
    got = ev("a.x / 2", x=7)
    assert got == 3.5
    assert type(got) is float
    assert ev("a.x / 0", x=7) is None
    assert ev("a.x / 0.0", x=7.5) is None
    assert ev("a.x / a.y", x=None, y=0) is None
    assert ev("a.x / 4", x=Decimal("1")) == 0.25


@pytest.mark.parametrize(
    ("x", "y", "want"),
    [(7, 3, 1), (-7, 3, -1), (7, -3, 1), (-7, -3, -1), (6, 3, 0), (7, 0, None)],
)
def test_modulo_takes_the_sign_of_the_dividend(x: int, y: int, want: int | None) -> None:
    assert ev("a.x % a.y", x=x, y=y) == want


def test_modulo_of_doubles_and_decimals() -> None:
    assert ev("a.x % 2", x=-7.5) == -1.5
    assert ev("a.x % a.y", x=Decimal("-7.5"), y=2) == Decimal("-1.5")
    assert ev("a.x % 0.0", x=1.0) is None


@pytest.mark.parametrize(
    ("x", "y", "want"), [(7, 2, 3), (-7, 2, -3), (7, -2, -3), (-7, -2, 3), (7, 0, None)]
)
def test_div_truncates_toward_zero(x: int, y: int, want: int | None) -> None:
    assert ev("a.x div a.y", x=x, y=y) == want


@pytest.mark.parametrize(
    ("x", "y", "want"), [(7, 3, 1), (-7, 3, 2), (7, -3, 1), (-7, -3, -1), (7, 0, None)]
)
def test_pmod(x: int, y: int, want: int | None) -> None:
    assert ev("pmod(a.x, a.y)", x=x, y=y) == want


def test_numeric_widening() -> None:
    assert type(ev("a.x + a.y", x=1, y=0.5)) is float
    got = ev("a.x + a.y", x=1, y=Decimal("0.5"))
    assert got == Decimal("1.5")
    assert type(got) is Decimal
    assert type(ev("a.x * a.y", x=Decimal("2"), y=0.5)) is float
    assert ev("a.x * 0.5", x=3) == Decimal("1.5")  # a decimal literal is a DECIMAL
    assert type(ev("a.x * 1e0", x=3)) is float  # an exponent makes a DOUBLE
    # Decimal arithmetic is exact beyond Python's default 28 digits.
    big = Decimal("12345678901234567890.123456789012345678")
    assert ev("a.x + a.y - a.y", x=big, y=Decimal("1e-18")) == big


def test_arithmetic_null_propagation() -> None:
    for op in ["+", "-", "*", "/", "%", "div"]:
        assert ev(f"a.x {op} a.y", x=1, y=None) is None
        assert ev(f"a.y {op} a.x", x=1, y=None) is None
    assert ev("-a.y", y=None) is None


# -------------------------------------------------------------------------------- intervals


@pytest.mark.parametrize(
    ("sql", "micros"),
    [
        ("INTERVAL '10' SECOND", 10_000_000),
        ("INTERVAL 3 SECONDS", 3_000_000),
        ("INTERVAL '1.5' SECOND", 1_500_000),
        ("INTERVAL '250' MILLISECONDS", 250_000),
        ("INTERVAL '1' MILLISECOND", 1_000),
        ("INTERVAL '2' MINUTES", 120_000_000),
        ("INTERVAL '1' HOUR", 3_600_000_000),
        ("INTERVAL '2' DAYS", 172_800_000_000),
    ],
)
def test_interval_literals(sql: str, micros: int) -> None:
    assert ev(sql) == dt.timedelta(microseconds=micros)


def test_timestamp_interval_arithmetic() -> None:
    assert ev("a.ts + INTERVAL '1.5' SECOND", ts=T0) == T0 + dt.timedelta(seconds=1.5)
    assert ev("a.ts - INTERVAL '10' SECOND", ts=T0) == T0 - dt.timedelta(seconds=10)
    assert ev("a.ts - INTERVAL '1' DAY + INTERVAL '1' HOUR", ts=T0) == dt.datetime(2023, 12, 31, 13)
    assert ev("a.ts + INTERVAL '1' SECOND", ts=None) is None
    with pytest.raises(NotImplementedError, match="timestamp - timestamp"):
        ev("a.ts - a.ts", ts=T0)


def test_time_window_between() -> None:
    sql = "a.u BETWEEN a.ts - INTERVAL '10' SECOND AND a.ts + INTERVAL '10' SECOND"
    assert ev(sql, ts=T0, u=T0 + dt.timedelta(seconds=10)) is True  # inclusive
    assert ev(sql, ts=T0, u=T0 - dt.timedelta(seconds=10)) is True
    assert ev(sql, ts=T0, u=T0 + dt.timedelta(seconds=10, microseconds=1)) is False
    assert ev(sql, ts=None, u=T0) is None


# --------------------------------------------------------------------------------- BETWEEN, IN


@pytest.mark.parametrize(
    ("x", "lo", "hi", "want"),
    [
        (5, 1, 10, True),
        (1, 1, 10, True),
        (10, 1, 10, True),
        (0, 1, 10, False),
        (None, 1, 10, None),
        (5, None, 10, None),
        (5, 1, None, None),
        (0, None, -1, False),  # x <= hi is FALSE, so the NULL on the other side does not matter
        (20, 1, None, None),
        (0, 1, None, False),
    ],
)
def test_between_with_nulls(x: int | None, lo: int | None, hi: int | None, want: object) -> None:
    assert ev("a.x BETWEEN a.lo AND a.hi", x=x, lo=lo, hi=hi) is want
    negated = None if want is None else not want
    assert ev("a.x NOT BETWEEN a.lo AND a.hi", x=x, lo=lo, hi=hi) is negated


def test_in_with_nulls() -> None:
    assert ev("a.x IN (1, 2, 3)", x=2) is True
    assert ev("a.x IN (1, 2, 3)", x=4) is False
    assert ev("a.x IN (1, NULL)", x=1) is True
    assert ev("a.x IN (1, NULL)", x=2) is None
    assert ev("a.x IN (1, 2)", x=None) is None
    assert ev("a.x NOT IN (1, NULL)", x=2) is None
    assert ev("a.x NOT IN (1, 2)", x=3) is True
    assert ev("a.x IN (1.0, 2)", x=1) is True
