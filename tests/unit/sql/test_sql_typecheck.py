"""Type inference over expressions, alone and as the parser applies it to queries."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from streamjoin.errors import JobError
from streamjoin.model import SqlType
from streamjoin.sql import parse_job
from streamjoin.sql.typecheck import Category, TypeCheckError, infer_category
from tests.reference_cases import PRELUDE

TYPES = {
    "n": SqlType("BIGINT"),
    "d": SqlType("DECIMAL", 10, 2),
    "s": SqlType("STRING"),
    "flag": SqlType("BOOLEAN"),
    "ts": SqlType("TIMESTAMP"),
}


def _column_type(col: exp.Column) -> SqlType | None:
    return TYPES.get(col.name)


def _infer(sql: str) -> Category:
    return infer_category(sqlglot.parse_one(sql, dialect="spark"), _column_type)


@pytest.mark.parametrize(
    ("sql", "category"),
    [
        ("t.n", "numeric"),
        ("t.d", "numeric"),
        ("t.s", "string"),
        ("t.flag", "boolean"),
        ("t.ts", "timestamp"),
        ("t.other", "unknown"),
        ("1.5", "numeric"),
        ("'x'", "string"),
        ("TRUE", "boolean"),
        ("NULL", "null"),
        ("INTERVAL '1' SECOND", "interval"),
        ("(t.n + 1) * 2 / t.d % 3", "numeric"),
        ("t.n DIV 2", "numeric"),
        ("-t.n", "numeric"),
        ("t.n + NULL", "numeric"),
        ("t.n + t.other", "unknown"),
        ("t.ts - INTERVAL '1' HOUR", "timestamp"),
        ("INTERVAL '1' HOUR + t.ts", "timestamp"),
        ("t.ts - t.ts", "interval"),
        ("INTERVAL '1' HOUR * 2", "interval"),
        ("t.n = 1", "boolean"),
        ("t.n <> t.d", "boolean"),
        ("t.s != 'x'", "boolean"),
        ("t.n <=> NULL", "boolean"),
        ("t.ts >= t.ts - INTERVAL '5' SECOND", "boolean"),
        ("t.n BETWEEN 1 AND t.d", "boolean"),
        ("t.s IN ('a', 'b')", "boolean"),
        ("t.flag AND NOT t.flag OR t.n > 1", "boolean"),
        ("t.s IS NULL", "boolean"),
        ("t.s IS NOT NULL", "boolean"),
        ("t.s LIKE 'a%'", "boolean"),
        ("CASE WHEN t.flag THEN t.n ELSE 0 END", "numeric"),
        ("CASE t.n WHEN 1 THEN 'a' ELSE NULL END", "string"),
        ("CASE WHEN t.flag THEN t.n ELSE 'x' END", "unknown"),
        ("IF(t.flag, 'a', 'b')", "string"),
        ("COALESCE(t.n, t.d, 0)", "numeric"),
        ("COALESCE(NULL, NULL)", "null"),
        ("abs(t.n)", "numeric"),
        ("floor(t.d)", "numeric"),
        ("ceil(t.d)", "numeric"),
        ("round(t.d, 1)", "numeric"),
        ("greatest(t.n, 2)", "numeric"),
        ("least(t.ts, t.ts)", "timestamp"),
        ("lower(t.s)", "string"),
        ("upper(t.s)", "string"),
        ("concat(t.s, 'x')", "string"),
        ("t.s || 'x'", "string"),
        ("length(t.s)", "numeric"),
        ("substring(t.s, 1, 2)", "string"),
        ("CAST(t.s AS BIGINT)", "numeric"),
        ("CAST(t.n AS STRING)", "string"),
        ("CAST(t.s AS BOOLEAN)", "boolean"),
        ("CAST(t.s AS TIMESTAMP)", "timestamp"),
        ("CAST(t.s AS DATE)", "unknown"),
        ("TIMESTAMP '2024-01-01'", "timestamp"),
        ("some_udf(t.n)", "unknown"),
        ("t.ts = '2024-01-01'", "boolean"),
    ],
)
def test_infer_category(sql: str, category: Category) -> None:
    assert _infer(sql) == category


@pytest.mark.parametrize(
    ("sql", "message", "node"),
    [
        ("t.s = t.n", "type mismatch: t.s (STRING) compared with t.n (BIGINT)", "t.s"),
        ("t.ts < 1.5", "type mismatch: t.ts (TIMESTAMP) compared with 1.5 (NUMERIC)", "t.ts"),
        ("t.flag = t.d", "type mismatch: t.flag (BOOLEAN) compared with t.d (DECIMAL(10,2))", ""),
        ("t.n BETWEEN 1 AND 'x'", "type mismatch: t.n (BIGINT) compared with 'x' (STRING)", "t.n"),
        ("t.n IN (1, t.s)", "type mismatch: t.n (BIGINT) compared with t.s (STRING)", "t.n"),
        ("t.s + 1", "arithmetic needs numbers, but t.s is STRING", "t.s"),
        ("1 - t.flag", "arithmetic needs numbers, but t.flag is BOOLEAN", "t.flag"),
        ("-t.s", "cannot negate t.s: it is STRING", "t.s"),
        ("t.ts + 1", "cannot compute t.ts + 1: t.ts is TIMESTAMP and 1 is NUMERIC", "t.ts + 1"),
        ("t.flag AND t.n", "AND needs boolean operands, but t.n is BIGINT", "t.n"),
        ("t.s OR t.flag", "OR needs boolean operands, but t.s is STRING", "t.s"),
        ("NOT t.n", "NOT needs boolean operands, but t.n is BIGINT", "t.n"),
        ("CASE WHEN t.n THEN 1 END", "CASE WHEN needs boolean operands, but t.n is BIGINT", "t.n"),
        ("some_udf(t.s * 2)", "arithmetic needs numbers, but t.s is STRING", "t.s"),
    ],
)
def test_type_errors(sql: str, message: str, node: str) -> None:
    with pytest.raises(TypeCheckError) as info:
        _infer(sql)
    assert info.value.message == message
    if node:
        assert info.value.node.sql(dialect="spark") == node


def _error(sql: str) -> JobError:
    with pytest.raises(JobError) as info:
        parse_job(PRELUDE + sql)
    return info.value


def test_type_mismatch_points_at_the_left_operand() -> None:
    err = _error("INSERT INTO matches SELECT b.id AS i\nFROM bids b JOIN asks a ON name = a.id")
    assert (err.line, err.col, err.text) == (7, 28, "name")
    assert err.message == "type mismatch: b.name (STRING) compared with a.id (BIGINT)"


def test_type_mismatch_on_a_parenthesized_operand() -> None:
    err = _error(
        "INSERT INTO matches SELECT b.id AS i\n"
        "FROM bids b JOIN asks a ON (b.ts) < CAST(a.id AS DOUBLE)"
    )
    assert (err.line, err.col, err.text) == (7, 28, "(b.ts)")
    assert (
        err.message
        == "type mismatch: (b.ts) (TIMESTAMP) compared with CAST(a.id AS DOUBLE) (NUMERIC)"
    )


def test_arithmetic_on_a_string_in_the_select_list() -> None:
    err = _error(
        "INSERT INTO matches\nSELECT b.name * 2 AS twice\nFROM bids b JOIN asks a ON b.id = a.id"
    )
    assert (err.line, err.col, err.text) == (7, 8, "b.name")
    assert err.message == "arithmetic needs numbers, but b.name is STRING"


def test_and_with_a_number() -> None:
    err = _error(
        "INSERT INTO matches SELECT b.id AS i\nFROM bids b JOIN asks a ON a.ok AND b.price"
    )
    assert (err.line, err.col, err.text) == (7, 37, "b.price")


@pytest.mark.parametrize(
    ("clause", "category"),
    [("ON b.id + a.id", "numeric"), ("ON b.name", "string"), ("ON b.ts", "timestamp")],
)
def test_on_condition_must_be_boolean(clause: str, category: str) -> None:
    err = _error(f"INSERT INTO matches SELECT b.id AS i\nFROM bids b JOIN asks a\n{clause}")
    assert (err.line, err.col, err.text) == (8, 4, clause[3:])
    assert err.message == f"the ON condition must be boolean, got {category}"


def test_where_condition_must_be_boolean() -> None:
    err = _error(
        "INSERT INTO matches SELECT b.id AS i\nFROM bids b JOIN asks a ON a.ok\nWHERE  1 + 1"
    )
    assert (err.line, err.col, err.text) == (8, 8, "1 + 1")
    assert err.message == "the WHERE condition must be boolean, got numeric"


def test_unknown_functions_and_null_pass() -> None:
    job = parse_job(
        PRELUDE + "INSERT INTO matches SELECT my_udf(b.name) AS u\n"
        "FROM bids b JOIN asks a ON my_pred(b.id, a.id) AND b.price = NULL"
    )
    assert job.queries[0].predicate == "MY_PRED(b.id, a.id) AND b.price = NULL"
