"""Hostile job files: mutations of valid jobs, huge names and numbers, deep nesting. The parser
returns a job or raises `JobError` at a line and column inside the text, never anything else.

Examples are counted as job texts parsed. ``STREAMJOIN_FUZZ_EXAMPLES=10000`` runs that many per
test; without it, `CI_EXAMPLES`.
"""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamjoin.errors import JobError
from streamjoin.sql import parse_job, parse_query_file
from tests.reference_cases import PRELUDE

CI_EXAMPLES = 200
_EXAMPLES = int(os.environ.get("STREAMJOIN_FUZZ_EXAMPLES", CI_EXAMPLES))
_FUZZ = settings(
    max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

_WINDOW = "a.ts BETWEEN b.ts - INTERVAL '10' SECOND AND b.ts + INTERVAL '10' SECOND"
VALID = [
    PRELUDE + "INSERT INTO matches\nSELECT b.id AS bid, a.id AS aid, upper(b.name) AS n\n"
    f"FROM bids b JOIN asks a\n  ON abs(b.price - a.price) <= 0.5 AND {_WINDOW}\n"
    "WHERE NOT (b.id IN (1, 2)) AND CAST(a.id AS STRING) <> 'z';\n",
    PRELUDE + "INSERT INTO matches SELECT window.start AS ws, b.name AS name, count(*) AS n, "
    "avg(a.price) AS p\nFROM bids b JOIN asks a ON b.id = a.id AND "
    f"{_WINDOW}\nGROUP BY window(a.ts, '10 seconds', '5 seconds'), b.name HAVING count(*) > 1;\n",
    PRELUDE + "INSERT INTO matches SELECT b.id AS bid, a.id AS aid\nFROM bids b LEFT JOIN asks a "
    f"ON b.id = a.id AND {_WINDOW};\n",
    PRELUDE + "INSERT INTO matches SELECT window_start AS ws, count(*) AS n\n"
    "FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))\n"
    "GROUP BY window_start, window_end;\n",
    "CREATE STREAM s (id BIGINT, d DECIMAL(38,10), ok BOOLEAN, ts TIMESTAMP,\n"
    "  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE)\n"
    "  WITH (format = 'csv', path = '/in', header = 'true', 'column.k' = 'id % 10');\n"
    "CREATE SINK o WITH (format = 'console');\n"
    "INSERT INTO o SELECT x.id AS i, y.d AS d FROM s x JOIN s y ON x.id = y.id + 1 "
    "AND y.ts BETWEEN x.ts - INTERVAL '1' SECOND AND x.ts;\n",
]
"""Valid jobs of every statement kind (each parses; `test_the_seeds_parse`)."""
_JOB = parse_job(VALID[0])

FRAGMENTS = [
    *"(),;.=<>-+*/%'\"`\n\t\\",
    "CREATE", "STREAM", "SINK", "INSERT", "INTO", "SELECT", "FROM", "JOIN", "LEFT", "FULL", "ON",
    "WHERE", "GROUP BY", "HAVING", "window(", "TUMBLE(", "TABLE", "DESCRIPTOR(", "OVER (",
    "ROW_NUMBER()", "PARTITION BY", "ORDER BY", "AND", "OR", "NOT", "BETWEEN", "WATERMARK",
    "FOR", "AS", "INTERVAL", "'3'", "SECOND", "WITH", "DECIMAL(", "DECIMAL(99,99)", "BIGINT",
    "1e999", "-0", "9" * 400, "NULL", "CASE", "WHEN", "END", "--", "/*", "*/", "$$", "é", "\x00",
    "\ufeff", "\u202e", "::", "->", "[", "]", "{", "}", "@", "?", "'unterminated", "x" * 5000,
]  # fmt: skip


def _check(text: str, parse: str = "job") -> None:
    try:
        if parse == "job":
            parse_job(text, "fuzz.sql")
        else:
            parse_query_file(text, _JOB, "fuzz.sql")
    except JobError as err:
        lines = text.split("\n")
        assert 1 <= err.line <= len(lines), (err.line, len(lines), str(err))
        assert err.col >= 1, str(err)
        assert str(err).startswith(f"fuzz.sql:{err.line}:{err.col}: ")


def test_the_seeds_parse() -> None:
    for text in VALID:
        parse_job(text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A valid job after one to four edits: a span cut, doubled or moved, fragments put in, a
    token replaced by a huge one."""
    text = draw(st.sampled_from(VALID))
    for _ in range(draw(st.integers(1, 4))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 40)))
        edit = draw(st.sampled_from(["cut", "double", "move", "insert", "replace", "huge"]))
        if edit == "cut":
            text = text[:i] + text[j:]
        elif edit == "double":
            text = text[:j] + text[i:j] + text[j:]
        elif edit == "move":
            k = draw(st.integers(0, n - (j - i)))
            rest = text[:i] + text[j:]
            text = rest[:k] + text[i:j] + rest[k:]
        elif edit == "insert":
            inserted = " ".join(draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4)))
            text = text[:i] + inserted + text[i:]
        else:
            words = list(re.finditer(r"[A-Za-z_]\w*|\d+", text))
            w = words[draw(st.integers(0, len(words) - 1))]
            new = (
                draw(st.sampled_from(FRAGMENTS))
                if edit == "replace"
                else (w.group() * draw(st.integers(100, 20_000)))[:100_000]
            )
            text = text[: w.start()] + new + text[w.end() :]
    return text


@_FUZZ
@given(mutated())
def test_mutated_jobs_parse_or_raise_job_errors(text: str) -> None:
    _check(text)


@_FUZZ
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60).map(" ".join))
def test_token_soup_raises_only_job_errors(text: str) -> None:
    _check(text)


@_FUZZ
@given(st.text(max_size=300))
def test_random_text_raises_only_job_errors(text: str) -> None:
    _check(text)


def _nest(kind: str, depth: int) -> str:
    e = "b.price"
    if kind == "parens":
        return "(" * depth + e + ")" * depth
    if kind == "plus":
        return " + ".join([e] * depth)
    if kind == "not":
        return "NOT " * depth + "b.id = 1"
    if kind == "case":
        return "CASE WHEN b.id = 1 THEN " * depth + e + " END" * depth
    if kind == "calls":
        return "abs(" * depth + e + ")" * depth
    return "(b.id = 1 AND " * depth + "TRUE" + ")" * depth


@settings(_FUZZ, max_examples=max(20, _EXAMPLES // 10))
@given(
    st.sampled_from(["parens", "plus", "not", "case", "calls", "and"]),
    st.integers(1, 3000),
    st.sampled_from(["select", "on", "where"]),
)
def test_deep_nesting_parses_or_raises_a_job_error(kind: str, depth: int, where: str) -> None:
    deep = _nest(kind, depth)
    select = (
        f"{deep} AS v" if where == "select" and kind in ("parens", "plus", "calls") else "b.id AS v"
    )
    on = f"({deep}) IS NOT NULL AND {_WINDOW}" if where == "on" else f"b.id = a.id AND {_WINDOW}"
    condition = f"\nWHERE ({deep}) IS NOT NULL" if where == "where" else ""
    _check(
        f"{PRELUDE}INSERT INTO matches SELECT {select}\nFROM bids b JOIN asks a ON {on}{condition};"
    )


@_FUZZ
@given(mutated())
def test_mutated_query_files_parse_or_raise_job_errors(text: str) -> None:
    # The query part of a job, as `streamjoin query add` reads it.
    query = text.replace(PRELUDE, "CREATE SINK extra WITH (format = 'console');\n")
    _check(query.replace("INSERT INTO matches", "INSERT INTO extra"), "query")


@pytest.mark.parametrize("size", [255, 100_000])
def test_huge_identifiers_raise_job_errors_or_parse(size: int) -> None:
    name = "s" * size
    _check(PRELUDE.replace("bids", name) + f"INSERT INTO matches SELECT b.id AS i FROM {name} b "
           f"JOIN asks a ON b.id = a.id AND {_WINDOW};")  # fmt: skip


def test_a_windowing_call_whose_durations_do_not_parse_is_a_job_error() -> None:
    # Found by the long mode: sqlglot's own ParseError escaped from the window's text.
    text = VALID[3].replace("DESCRIPTOR(ts),", "DESCRIPTOR(ts),\\")
    with pytest.raises(JobError) as info:
        parse_job(text, "job.sql")
    assert (info.value.line, info.value.col) == (7, 6)
    assert "cannot read this call's durations" in info.value.message


def _with(text: str, option: str) -> str:
    return text[: text.rindex(";")] + f" WITH ({option});\n"


@pytest.mark.parametrize(
    "text",
    [
        VALID[1].replace("'10 seconds'", "'" + "1" * 5000 + " seconds'"),
        _with(VALID[0], "units = '²'"),
        _with(VALID[0], "budget = '" + "9" * 5000 + "'"),
        _with(VALID[2], "ttl = '" + "9" * 5000 + " seconds'"),
        _with(VALID[2], "ttl = '² seconds'"),
        PRELUDE + "INSERT INTO matches SELECT * FROM (SELECT b.id AS i, ROW_NUMBER() OVER "
        "(PARTITION BY window(b.ts, '1 second') ORDER BY b.price) AS rn FROM bids b JOIN asks a "
        f"ON b.id = a.id AND {_WINDOW}) WHERE rn <= {'9' * 5000};",
    ],
    ids=["window size", "units", "budget", "ttl digits", "ttl superscript", "top-N"],
)
def test_numbers_python_cannot_read_are_job_errors(text: str) -> None:
    # Found by the long mode: int() refuses 4,301 digits, and '²'.isdigit() is True.
    with pytest.raises(JobError):
        parse_job(text)
