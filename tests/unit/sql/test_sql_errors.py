"""Mistakes in INSERT statements: each error names the file, line, column and text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamjoin.errors import JobError, UnsupportedError
from streamjoin.sql import parse_job
from tests.reference_cases import PRELUDE


def _error(sql: str) -> JobError:
    with pytest.raises(JobError) as info:
        parse_job(PRELUDE + sql, source="job.sql")
    err = info.value
    assert err.source == "job.sql"
    assert str(err).startswith(f"job.sql:{err.line}:{err.col}: ")
    return err


def _unsupported(sql: str) -> UnsupportedError:
    err = _error(sql)
    assert isinstance(err, UnsupportedError)
    return err


def test_unknown_sink() -> None:
    err = _error("INSERT INTO matchez\nSELECT b.id AS id FROM bids b JOIN asks a ON b.id = a.id")
    assert (err.line, err.col, err.text) == (6, 13, "matchez")
    assert err.message == "unknown sink 'matchez' (sinks: matches)"


def test_unknown_stream() -> None:
    err = _error("INSERT INTO matches SELECT b.id AS id\nFROM bidz b JOIN asks a ON b.id = a.id")
    assert (err.line, err.col, err.text) == (7, 6, "bidz")
    assert err.message == "unknown stream 'bidz' (streams: bids, asks)"
    err = _error("INSERT INTO matches SELECT b.id AS id\nFROM bids b JOIN matches a ON b.id = a.id")
    assert (err.line, err.col, err.text) == (7, 18, "matches")


def test_unknown_column_in_a_stream() -> None:
    err = _error(
        "INSERT INTO matches\nSELECT b.pricee AS p\nFROM bids b JOIN asks a ON b.id = a.id"
    )
    assert (err.line, err.col, err.text) == (7, 10, "pricee")
    assert err.message == "unknown column 'pricee' in stream 'bids' (columns: id, price, name, ts)"


def test_unknown_unqualified_column() -> None:
    err = _error("INSERT INTO matches SELECT b.id AS id\nFROM bids b JOIN asks a ON nope = 1")
    assert (err.line, err.col, err.text) == (7, 28, "nope")
    assert err.message.startswith("unknown column 'nope'")


def test_ambiguous_column() -> None:
    err = _error("INSERT INTO matches SELECT b.id AS x\nFROM bids b JOIN asks a ON id = 1")
    assert (err.line, err.col, err.text) == (7, 28, "id")
    assert err.message.startswith("ambiguous column 'id': both b and a have it")


def test_unknown_alias() -> None:
    err = _error("INSERT INTO matches SELECT b.id AS x\nFROM bids b JOIN asks a ON c.id = 1")
    assert (err.line, err.col, err.text) == (7, 28, "c")
    assert err.message.startswith("unknown alias 'c'")
    err = _error("INSERT INTO matches SELECT b.id AS x\nFROM bids b JOIN asks a ON bids.id = 1")
    assert "stream 'bids' is called 'b' here" in err.message


def test_self_join_needs_distinct_aliases() -> None:
    err = _error("INSERT INTO matches SELECT x.id AS i\nFROM bids x JOIN bids X ON x.id = 1")
    assert (err.line, err.col, err.text) == (7, 18, "bids X")
    err = _error("INSERT INTO matches SELECT bids.id AS i\nFROM bids JOIN bids ON bids.id = 1")
    assert (err.line, err.col, err.text) == (7, 16, "bids")
    assert "two inputs are called 'bids'" in err.message


def test_join_without_on() -> None:
    err = _error("INSERT INTO matches SELECT b.id AS i\nFROM bids b JOIN asks a")
    assert (err.line, err.col, err.text) == (7, 13, "JOIN")
    assert "JOIN needs an ON condition" in err.message
    err = _error("INSERT INTO matches SELECT b.id AS i\nFROM bids b JOIN asks a ON\nWHERE b.id = 1")
    assert (err.line, err.col, err.text) == (7, 25, "ON")


def test_expression_without_a_name() -> None:
    err = _error(
        "INSERT INTO matches\nSELECT b.id,  b.price * 2\nFROM bids b JOIN asks a ON b.id = a.id"
    )
    assert (err.line, err.col, err.text) == (7, 15, "b.price * 2")
    assert err.message == "give the expression a name: b.price * 2 AS name"


def test_duplicate_output_names() -> None:
    err = _error("INSERT INTO matches\nSELECT b.id, a.id\nFROM bids b JOIN asks a ON b.id = a.id")
    assert (err.line, err.col, err.text) == (7, 14, "a.id")
    err = _error(
        "INSERT INTO matches\nSELECT b.id AS x, a.id AS X\nFROM bids b JOIN asks a ON b.id = a.id"
    )
    assert (err.line, err.col, err.text) == (7, 27, "X")
    assert "named twice" in err.message


def test_syntax_error_points_into_the_file() -> None:
    err = _error("INSERT INTO matches\nSELECT b.id AS id\nFROM bids b JOIN asks a ON b.id = = a.id")
    assert (err.line, err.col, err.text) == (8, 35, "=")
    assert err.message.startswith("syntax error near '='")
    err = _error("INSERT INTO matches SELECT (b.id AS id\nFROM bids b JOIN asks a ON b.id = a.id")
    assert (err.line, err.col, err.text) == (7, 1, "FROM")


def test_syntax_error_in_a_statement_that_starts_mid_line() -> None:
    err = _error(
        "CREATE SINK x WITH (format = 'console'); INSERT INTO x\n"
        "SELECT b.id AS id FROM bids b JOIN asks a ON b.id = a.id)"
    )
    assert (err.line, err.col, err.text) == (7, 57, ")")


def test_insert_without_from() -> None:
    err = _error("INSERT INTO matches SELECT 1 AS one")
    assert (err.line, err.col) == (6, 1)
    assert "expected FROM <stream> JOIN <stream>" in err.message


# Valid SQL that streamjoin does not run: UnsupportedError naming the construct.


def test_outer_joins_of_three_inputs() -> None:
    err = _unsupported(
        "INSERT INTO matches SELECT b.id AS i\nFROM bids b LEFT JOIN asks a ON b.id = a.id "
        "JOIN asks c ON c.id = a.id"
    )
    assert (err.line, err.col, err.text) == (7, 13, "LEFT JOIN")
    assert "outer joins of more than two inputs are not supported yet" in err.message


def test_cross_join() -> None:
    err = _unsupported("INSERT INTO matches SELECT b.id AS i\nFROM bids b CROSS JOIN asks a")
    assert (err.line, err.col, err.text) == (7, 13, "CROSS JOIN")
    assert "CROSS JOIN is not supported" in err.message


def test_comma_join_is_an_inner_join_on_its_where() -> None:
    comma = "FROM bids b, asks a WHERE b.id = a.id AND b.price > 1"
    on = "FROM bids b JOIN asks a ON b.id = a.id WHERE b.price > 1"
    queries = [
        parse_job(PRELUDE + f"INSERT INTO matches SELECT b.id AS i\n{f}").queries[0]
        for f in (comma, on)
    ]
    assert queries[0] == queries[1]


def test_multi_way_on_sees_only_the_inputs_joined_before_it() -> None:
    err = _error(
        "INSERT INTO matches SELECT b.id AS i\n"
        "FROM bids b JOIN asks a ON c.id = a.id\n"
        "JOIN bids c ON c.id = a.id"
    )
    assert (err.line, err.col, err.text) == (7, 28, "c")
    assert "'c' is joined after this ON" in err.message
    err = _error(
        "INSERT INTO matches SELECT b.id AS i\n"
        "FROM bids b JOIN asks a ON b.id = a.id\n"
        "JOIN bids a ON b.id = a.id"
    )
    assert "two inputs are called 'a'" in err.message


def test_single_stream() -> None:
    err = _unsupported("INSERT INTO matches SELECT b.id AS i\nFROM bids b WHERE b.id = 1")
    assert (err.line, err.col, err.text) == (7, 6, "bids b")
    assert "single-stream queries are not supported yet" in err.message


def test_join_using() -> None:
    err = _unsupported("INSERT INTO matches SELECT b.id AS i\nFROM bids b JOIN asks a USING (id)")
    assert (err.line, err.col, err.text) == (7, 25, "USING")


def test_select_star_expands_to_the_inputs_columns() -> None:
    err = _error("INSERT INTO matches\nSELECT *\nFROM bids b JOIN asks a ON b.id = a.id")
    # Both inputs have an id: the same output name twice, pointed at the star.
    assert (err.line, err.col, err.text) == (7, 8, "*")
    assert "output column 'id' is named twice" in err.message
    job = parse_job(
        PRELUDE
        + "INSERT INTO matches\nSELECT b.*, a.price AS ask\nFROM bids b JOIN asks a ON b.id = a.id"
    )
    bids = job.stream("bids")
    select = job.queries[0].select
    assert [i.alias for i in select] == [*(c.name for c in bids.columns), "ask"]
    assert select[0].sql == f"b.{bids.columns[0].name}"


@pytest.mark.parametrize(
    ("clause", "text", "construct"),
    [
        ("ORDER BY b.id", "ORDER BY", "ORDER BY"),
        ("LIMIT 10", "LIMIT", "LIMIT"),
        ("UNION SELECT 1 AS i", "UNION", "UNION"),
    ],
)
def test_unsupported_clauses(clause: str, text: str, construct: str) -> None:
    err = _unsupported(
        f"INSERT INTO matches SELECT b.id AS i\nFROM bids b JOIN asks a ON b.id = a.id\n{clause}"
    )
    assert (err.line, err.col, err.text) == (8, 1, text)
    assert err.message.startswith(construct)


def test_distinct() -> None:
    err = _unsupported(
        "INSERT INTO matches\nSELECT DISTINCT b.id\nFROM bids b JOIN asks a ON b.id = a.id"
    )
    assert (err.line, err.col, err.text) == (7, 8, "DISTINCT")


def test_aggregate() -> None:
    err = _unsupported(
        "INSERT INTO matches\nSELECT count(*) AS n\nFROM bids b JOIN asks a ON b.id = a.id"
    )
    assert (err.line, err.col, err.text) == (7, 8, "count(*)")
    assert "needs GROUP BY window(<event time>, '<size>')" in err.message


def test_window_function() -> None:
    err = _unsupported(
        "INSERT INTO matches\nSELECT rank() OVER (ORDER BY b.id) AS r\n"
        "FROM bids b JOIN asks a ON b.id = a.id"
    )
    assert (err.line, err.col, err.text) == (7, 8, "rank() OVER (ORDER BY b.id)")
    assert "window functions" in err.message


def test_subqueries() -> None:
    err = _unsupported(
        "INSERT INTO matches SELECT b.id AS i\n"
        "FROM bids b JOIN (SELECT * FROM asks) a ON b.id = a.id"
    )
    assert (err.line, err.col, err.text) == (7, 18, "(SELECT * FROM asks)")
    assert "subqueries are not supported" in err.message
    err = _unsupported(
        "INSERT INTO matches SELECT b.id AS i\n"
        "FROM bids b JOIN asks a ON b.id IN (SELECT id FROM asks)"
    )
    assert (err.line, err.col, err.text) == (7, 36, "(SELECT id FROM asks)")


def test_insert_overwrite() -> None:
    err = _unsupported("INSERT OVERWRITE matches SELECT b.id AS i FROM bids b JOIN asks a ON TRUE")
    assert (err.line, err.col, err.text) == (6, 8, "OVERWRITE")


# Whatever the input, the parser fails with a JobError and nothing else.

VALID_JOB = PRELUDE + (
    "INSERT INTO matches\n"
    "SELECT b.id AS bid, a.id AS aid, CASE WHEN a.ok THEN upper(b.name) END AS n\n"
    "FROM bids b JOIN asks a\n"
    "  ON abs(b.price - a.price) <= 0.5 -- band\n"
    " AND a.ts BETWEEN b.ts - INTERVAL '10' SECOND AND b.ts + INTERVAL '10' SECOND\n"
    "WHERE NOT (b.id IN (1, 2)) AND CAST(a.id AS STRING) <> 'z';\n"
)

FRAGMENTS = [
    *"(),;.=<>-+*/'\"`\n\\",
    "CREATE", "STREAM", "SINK", "INSERT", "INTO", "SELECT", "FROM", "JOIN", "ON", "WHERE",
    "AND", "OR", "NOT", "WATERMARK", "FOR", "AS", "INTERVAL", "'3'", "SECOND", "WITH",
    "format", "'json'", "path", "BIGINT", "TIMESTAMP", "DECIMAL", "bids", "asks", "matches",
    "b.id", "a.ts", "1", "1.5", "NULL", "CASE", "WHEN", "END", "LEFT", "USING", "GROUP BY",
    "--", "/*", "*/", "count(", "CAST(", "é", "\x00", "::", "->", "[", "]", "@", " ",
]  # fmt: skip


def _check_only_job_errors(text: str) -> None:
    try:
        parse_job(text)
    except JobError as err:
        assert err.line >= 1
        assert err.col >= 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=len(VALID_JOB)))
def test_truncated_job_raises_only_job_errors(cut: int) -> None:
    _check_only_job_errors(VALID_JOB[:cut])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map(" ".join))
def test_token_soup_raises_only_job_errors(text: str) -> None:
    _check_only_job_errors(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60))
def test_random_text_raises_only_job_errors(text: str) -> None:
    _check_only_job_errors(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(min_value=0, max_value=len(VALID_JOB)),
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=3).map(" ".join),
)
def test_damaged_job_raises_only_job_errors(at: int, insert: str) -> None:
    _check_only_job_errors(VALID_JOB[:at] + insert + VALID_JOB[at:])


def test_absurd_nesting_is_a_job_error() -> None:
    err = _error("INSERT INTO matches SELECT b.id AS i FROM bids b JOIN asks a ON " + "(" * 500)
    assert err.line == 6
