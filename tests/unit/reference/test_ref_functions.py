"""Functions, casts, literals and errors of the reference evaluator."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from streamjoin.reference import compile_expression, event_time_us

T0 = dt.datetime(2024, 1, 1, 12, 0, 0)


def ev(sql: str, **a: object) -> object:
    """Evaluate `sql` with alias `a` bound to the keyword arguments (and an empty alias `b`)."""
    return compile_expression(sql)({"a": a, "b": {}})


# ---------------------------------------------------------------------- conditional functions


def test_case_if_coalesce() -> None:
    case = "CASE WHEN a.x > 1 THEN 'big' WHEN a.x = 1 THEN 'one' ELSE 'small' END"
    assert ev(case, x=5) == "big"
    assert ev(case, x=1) == "one"
    assert ev(case, x=None) == "small"  # NULL is not TRUE
    assert ev("CASE WHEN a.x > 1 THEN 1 END", x=0) is None
    assert ev("CASE a.x WHEN 1 THEN 'a' WHEN 2 THEN 'b' END", x=2) == "b"
    assert ev("CASE a.x WHEN NULL THEN 'null' ELSE 'other' END", x=None) == "other"
    assert ev("IF(a.x > 1, 'y', 'n')", x=None) == "n"
    assert ev("IF(a.x > 1, 'y', 'n')", x=2) == "y"
    assert ev("coalesce(a.x, a.y, 3)", x=None, y=None) == 3
    assert ev("coalesce(a.x, a.y)", x=None, y=2) == 2
    assert ev("coalesce(a.x, a.y)", x=None, y=None) is None
    assert ev("nullif(a.x, 1)", x=1) is None
    assert ev("nullif(a.x, 1)", x=2) == 2


# -------------------------------------------------------------------------------- functions


def test_numeric_functions() -> None:
    assert ev("abs(a.x)", x=-3) == 3
    assert ev("abs(a.x)", x=Decimal("-1.5")) == Decimal("1.5")
    assert ev("floor(a.x)", x=-1.5) == -2
    assert type(ev("floor(a.x)", x=1.5)) is int
    assert ev("ceil(a.x)", x=1.2) == 2
    assert ev("ceiling(a.x)", x=-1.2) == -1
    assert ev("ceil(a.x)", x=Decimal("1.01")) == 2
    assert ev("floor(a.x)", x=None) is None


@pytest.mark.parametrize(
    ("sql", "x", "want"),
    [
        ("round(a.x)", 2.5, 3.0),
        ("round(a.x)", -2.5, -3.0),
        ("round(a.x)", 0.49999, 0.0),
        ("round(a.x, 2)", 0.125, 0.13),  # HALF_UP on the decimal text, unlike Python's round
        ("round(a.x, 1)", 1.25, 1.3),
        ("round(a.x, -1)", 125, 130),
        ("round(a.x, 1)", Decimal("2.45"), Decimal("2.5")),
        ("round(a.x, 2)", 7, 7),
    ],
)
def test_round_half_up(sql: str, x: object, want: object) -> None:
    got = ev(sql, x=x)
    assert got == want
    assert type(got) is type(want)


def test_greatest_least_skip_nulls() -> None:
    assert ev("greatest(a.x, a.y, 3)", x=None, y=7) == 7
    assert ev("least(a.x, a.y, 3)", x=None, y=7) == 3
    assert ev("greatest(a.x, a.y)", x=None, y=None) is None
    got = ev("greatest(a.x, a.y)", x=3, y=2.5)
    assert got == 3.0
    assert type(got) is float
    assert ev("least(a.s, a.t)", s="b", t="a") == "a"


def test_string_functions() -> None:
    assert ev("lower(a.s)", s="AbC") == "abc"
    assert ev("upper(a.s)", s="AbC") == "ABC"
    assert ev("length(a.s)", s="héllo") == 5
    assert ev("concat(a.s, '-', a.t)", s="x", t="y") == "x-y"
    assert ev("concat(a.s, a.t)", s="x", t=None) is None
    assert ev("a.s || a.t", s="x", t="y") == "xy"
    assert ev("concat(a.s, a.x)", s="n", x=1) == "n1"
    assert ev("lower(a.s)", s=None) is None
    assert ev("a.s LIKE 'a%c_'", s="abbcd") is True
    assert ev("a.s NOT LIKE 'a%'", s="abc") is False
    assert ev("a.s LIKE 'a!%' ESCAPE '!'", s="a%") is True


@pytest.mark.parametrize(
    ("sql", "want"),
    [
        ("substring(a.s, 1, 2)", "he"),
        ("substring(a.s, 2)", "ello"),
        ("substr(a.s, 0, 2)", "he"),
        ("substr(a.s, -3)", "llo"),
        ("substr(a.s, -3, 2)", "ll"),
        ("substr(a.s, 4, 10)", "lo"),
        ("substr(a.s, 9)", ""),
        ("substr(a.s, 2, -1)", ""),
        ("substr(a.s, -10, 7)", "he"),
    ],
)
def test_substring(sql: str, want: str) -> None:
    assert ev(sql, s="hello") == want


def test_casts() -> None:
    assert ev("CAST(a.x AS BIGINT)", x=-2.7) == -2  # truncates toward zero
    assert ev("CAST(a.x AS INT)", x=Decimal("9.99")) == 9
    assert ev("CAST(a.s AS BIGINT)", s=" 42 ") == 42
    assert ev("CAST(a.s AS INT)", s="forty") is None
    assert ev("CAST(a.x AS DOUBLE)", x=3) == 3.0
    assert ev("CAST(a.s AS DOUBLE)", s="1.5") == 1.5
    assert ev("CAST(a.x AS STRING)", x=1.0) == "1.0"
    assert ev("CAST(a.x AS STRING)", x=1e20) == "1.0E20"
    assert ev("CAST(a.x AS STRING)", x=True) == "true"
    assert ev("CAST(a.x AS STRING)", x=T0) == "2024-01-01 12:00:00"
    assert ev("CAST(a.x AS BOOLEAN)", x=0) is False
    assert ev("CAST(a.s AS BOOLEAN)", s="yes") is True
    assert ev("CAST(a.s AS BOOLEAN)", s="maybe") is None
    assert ev("CAST(a.x AS DECIMAL(5,2))", x=1.005) == Decimal("1.01")
    assert ev("CAST(a.x AS DECIMAL(3,1))", x=99.96) is None  # overflow is NULL
    assert ev("CAST(a.x AS DECIMAL)", x=2.5) == Decimal("3")
    assert ev("CAST(a.s AS TIMESTAMP)", s="2024-01-01 12:00:00") == T0
    assert ev("CAST(a.s AS TIMESTAMP)", s="2024-01-01T13:00:00+01:00") == T0
    assert ev("CAST(a.x AS TIMESTAMP)", x=0) == dt.datetime(1970, 1, 1)
    assert ev("CAST(a.x AS BIGINT)", x=None) is None


def test_unix_time_functions() -> None:
    ts = dt.datetime(1970, 1, 1, 0, 0, 1, 500_000)
    assert ev("unix_micros(a.ts)", ts=ts) == 1_500_000
    assert ev("unix_seconds(a.ts)", ts=ts) == 1
    before = dt.datetime(1969, 12, 31, 23, 59, 59, 500_000)
    assert ev("unix_seconds(a.ts)", ts=before) == -1  # floored, like Spark
    assert event_time_us(before) == -500_000
    aware = dt.datetime(1970, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert event_time_us(aware) == 0


# ---------------------------------------------------------------------------------- literals


def test_literals() -> None:
    assert ev("42") == 42
    assert ev("0.5") == Decimal("0.5")
    assert type(ev("0.5")) is Decimal
    assert ev("1e3") == 1000.0
    assert type(ev("1e3")) is float
    assert ev("1.5D") == 1.5
    assert ev(r"'it\'s'") == "it's"  # Spark escapes with a backslash
    assert ev("'it''s'") == "its"  # and concatenates adjacent string literals
    assert ev("TRUE") is True
    assert ev("NULL") is None
    assert ev("TIMESTAMP '2024-01-01 12:00:00'") == T0


# ------------------------------------------------------------------------ columns and errors


def test_columns_match_case_insensitively() -> None:
    f = compile_expression("A.Price + b.QTY")
    assert f({"a": {"price": 2}, "b": {"Qty": 3}}) == 5
    assert f({"A": {"PRICE": 2}, "B": {"qty": 3}}) == 5


def test_unknown_column_raises_key_error() -> None:
    with pytest.raises(KeyError, match="no column 'y'"):
        ev("a.y + 1", x=1)


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("soundex(a.s)", "function 'soundex'"),
        ("my_udf(a.s)", "function 'my_udf'"),
        ("a.x + 1 > x", "qualified"),
        ("INTERVAL '1' YEAR", "YEAR"),
        ("a.x IN (SELECT 1)", "cannot evaluate"),
        ("CAST(a.x AS DATE)", "CAST to DATE"),
    ],
)
def test_unsupported_constructs_fail_at_compile_time(sql: str, match: str) -> None:
    with pytest.raises(NotImplementedError, match=match):
        compile_expression(sql)


def test_parse_errors_and_bad_literals() -> None:
    with pytest.raises(ValueError, match="cannot parse"):
        compile_expression("a.x = = 1")
    with pytest.raises(ValueError, match="invalid literal"):
        compile_expression("TIMESTAMP 'not a time'")
