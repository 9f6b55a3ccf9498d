"""Splitting a job file into statements, and offsets into lines and columns."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError, UnsupportedError
from streamjoin.sql import parse_job
from streamjoin.sql.positions import SourceText
from streamjoin.sql.statements import split_statements


def _split(text: str) -> list[tuple[int, str]]:
    return [(s.start, s.text) for s in split_statements(SourceText(text))]


def test_split_respects_quotes_and_comments() -> None:
    text = "A 'x;y' \"p;q\" `i;j`;\n-- c; d\nB /* e; /* nested; */ f; */ 'it\\'s;';  C 'a''b;'"
    assert _split(text) == [
        (0, "A 'x;y' \"p;q\" `i;j`"),
        (29, "B /* e; /* nested; */ f; */ 'it\\'s;'"),
        (68, "C 'a''b;'"),
    ]


def test_split_skips_empty_statements() -> None:
    assert _split(" ;; -- only\n /* comments */ ;") == []
    assert _split("") == []


def test_split_keeps_backquote_escapes() -> None:
    assert _split("A `x``;y`; B") == [(0, "A `x``;y`"), (11, "B")]


@pytest.mark.parametrize(
    ("text", "line", "col", "bad"),
    [
        ("A;\n  B 'open", 2, 5, "'open"),
        ('A "open\nB', 1, 3, '"open'),
        ("A `open", 1, 3, "`open"),
        ("A /* x /* y */", 1, 3, "/*"),
    ],
)
def test_split_rejects_unterminated(text: str, line: int, col: int, bad: str) -> None:
    with pytest.raises(JobError) as info:
        split_statements(SourceText(text, "f.sql"))
    err = info.value
    assert (err.line, err.col, err.text, err.source) == (line, col, bad, "f.sql")


def test_line_col() -> None:
    src = SourceText("ab\ncd\n\nef")
    assert [src.line_col(i) for i in range(len(src.text) + 1)] == [
        (1, 1),
        (1, 2),
        (1, 3),
        (2, 1),
        (2, 2),
        (2, 3),
        (3, 1),
        (4, 1),
        (4, 2),
        (4, 3),
    ]


def test_error_kind_and_rendering() -> None:
    err = SourceText("x = 1", "a.sql").error("nope", 4, 5, unsupported=True)
    assert isinstance(err, UnsupportedError)
    assert str(err) == "a.sql:1:5: nope (at '1')"


def test_statement_lines_are_file_lines() -> None:
    job = parse_job(
        "\n\n  CREATE SINK a WITH (format = 'console'); CREATE SINK b WITH (format = 'console');\n"
        "/* x */ CREATE SINK c WITH (format = 'console')"
    )
    assert [s.line for s in job.sinks] == [3, 3, 4]


@pytest.mark.parametrize(
    ("statement", "col", "text", "kind"),
    [
        ("INSERT INTO o VALUES (1)", 15, "VALUES", JobError),
        ("INSERT INTO o (a, b) SELECT 1 AS a", 13, "o (a, b)", UnsupportedError),
        ("INSERT o SELECT 1 AS a", 8, "o", JobError),
        ("INSERT INTO o WITH c AS (SELECT 1) SELECT 1 AS a", 15, "WITH", UnsupportedError),
    ],
)
def test_malformed_inserts(statement: str, col: int, text: str, kind: type[JobError]) -> None:
    with pytest.raises(JobError) as info:
        parse_job("CREATE SINK o WITH (format = 'console');\n" + statement)
    err = info.value
    assert type(err) is kind
    assert (err.line, err.col, err.text) == (2, col, text)
