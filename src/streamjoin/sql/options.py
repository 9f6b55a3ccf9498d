"""``WITH (key = 'value', ...)`` clauses of CREATE STREAM and CREATE SINK."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.tokenizer_core import Token, TokenType

from streamjoin.model.intervals import seconds_of, whole_number
from streamjoin.sql.cursor import Cursor, is_name

STREAM_FORMATS = ("json", "csv", "parquet", "rate", "kafka", "python")
SINK_FORMATS = ("json", "parquet", "csv", "console")
_STREAM_NEED_PATH = frozenset({"json", "csv", "parquet"})
_SINK_NEED_PATH = frozenset({"json", "parquet", "csv"})


@dataclass(frozen=True)
class Option:
    """One ``key = value`` pair with the tokens it was written with."""

    key: str
    value: str
    key_first: Token
    key_last: Token
    value_first: Token
    value_last: Token


@dataclass(frozen=True)
class WithClause:
    """A parsed WITH clause: `format` apart, the other options in the order written."""

    format: str
    options: tuple[tuple[str, str], ...]


def parse_with(cur: Cursor, kind: str) -> WithClause:
    """Parse ``WITH (options)`` at the cursor and check it for a stream or a sink.

    Args:
        cur: positioned at the WITH keyword (or at whatever stands where it should be).
        kind: ``"stream"`` or ``"sink"``.

    Returns:
        The format (lower-cased) and the other options (keys lower-cased, values as strings).

    Raises:
        JobError: on a syntax error, a repeated key, a missing or unknown format, a missing or
            empty path.
    """
    formats = STREAM_FORMATS if kind == "stream" else SINK_FORMATS
    example = f"WITH (format = '{formats[0]}', path = '...')"
    if cur.at_end():
        raise cur.error_here(example)
    with_tok = cur.expect_word("WITH")
    cur.expect(TokenType.L_PAREN, "'(' after WITH")
    options: list[Option] = []
    if cur.match(TokenType.R_PAREN) is None:
        while True:
            option = _parse_option(cur)
            for prior in options:
                if prior.key == option.key:
                    msg = f"option {option.key!r} is given twice"
                    raise cur.error_at(msg, option.key_first, option.key_last)
            options.append(option)
            if cur.match(TokenType.COMMA) is None:
                cur.expect(TokenType.R_PAREN, "',' or ')' in the WITH options")
                break
    by_key = {o.key: o for o in options}
    fmt = by_key.get("format")
    if fmt is None:
        msg = f"the {kind} needs a format: {example}"
        raise cur.error_at(msg, with_tok)
    fmt_value = fmt.value.lower()
    if fmt_value not in formats:
        msg = f"unknown {kind} format {fmt.value!r}; expected one of {', '.join(formats)}"
        raise cur.error_at(msg, fmt.value_first, fmt.value_last)
    needs_path = _STREAM_NEED_PATH if kind == "stream" else _SINK_NEED_PATH
    path = by_key.get("path")
    if path is None and fmt_value in needs_path:
        msg = f"format {fmt_value!r} needs a path: WITH (format = '{fmt_value}', path = '...')"
        raise cur.error_at(msg, with_tok)
    if path is not None and not path.value.strip():
        msg = "path must not be empty"
        raise cur.error_at(msg, path.value_first, path.value_last)
    source = by_key.get("source")
    if fmt_value == "python" and (source is None or not source.value.strip()):
        msg = (
            "a python stream needs its data source class: WITH (format = 'python', "
            "source = 'package.module.Class')"
        )
        raise cur.error_at(msg, with_tok)
    rest = tuple((o.key, o.value) for o in options if o.key != "format")
    return WithClause(format=fmt_value, options=rest)


def _parse_option(cur: Cursor) -> Option:
    """``key = value`` where key is a name, a dotted name or a string."""
    first = cur.peek()
    if first is not None and first.token_type == TokenType.STRING:
        last = cur.advance()
        key = first.text
    else:
        last = first = cur.expect_name("an option name such as format or path")
        parts = [first.text]
        while cur.match(TokenType.DOT) is not None:
            last = cur.expect_name("the rest of the dotted option name")
            parts.append(last.text)
        key = ".".join(parts)
    if not key.strip():
        msg = "an option name must not be empty"
        raise cur.error_at(msg, first, last)
    cur.expect(TokenType.EQ, f"'=' after the option name {key!r}")
    value_first, value_last, value = _parse_value(cur, key)
    return Option(key.lower(), value, first, last, value_first, value_last)


def _parse_value(cur: Cursor, key: str) -> tuple[Token, Token, str]:
    """A string, number or boolean option value, as a string."""
    tok = cur.peek()
    if tok is not None:
        if tok.token_type == TokenType.STRING:
            cur.advance()
            last, value = tok, tok.text
            # 'it''s': the tokenizer sees two adjacent strings; SQL means one quote inside.
            while (nxt := cur.peek()) is not None and _continues(cur, last, nxt):
                last = cur.advance()
                value += "'" + last.text
            return tok, last, value
        if tok.token_type in (TokenType.TRUE, TokenType.FALSE):
            cur.advance()
            return tok, tok, tok.text.lower()
        if tok.token_type == TokenType.NUMBER:
            cur.advance()
            return tok, tok, tok.text
        if tok.token_type == TokenType.DASH:
            nxt = cur.peek(1)
            if nxt is not None and nxt.token_type == TokenType.NUMBER:
                cur.advance()
                cur.advance()
                return tok, nxt, "-" + nxt.text
        if is_name(tok) and tok.token_type != TokenType.IDENTIFIER:
            msg = f"the value of option {key!r} must be quoted: {key} = '{tok.text}'"
            raise cur.error_at(msg, tok)
    expected = f"a value for option {key!r} (a quoted string, number or boolean)"
    raise cur.error_here(expected)


def _continues(cur: Cursor, last: Token, nxt: Token) -> bool:
    """Whether `nxt` is a string literal written right after `last`, both single-quoted."""
    text = cur.stmt.text
    return (
        nxt.token_type == TokenType.STRING
        and nxt.start == last.end + 1
        and text[last.end] == "'"
        and text[nxt.start] == "'"
    )


PARTITIONINGS = ("auto", "hash", "matrix", "biclique", "contrand", "range")
"""Values of a query's ``partitioning`` option (``auto``: chosen by the cost formulas)."""


def parse_query_with(cur: Cursor) -> tuple[tuple[str, str], ...]:
    """Parse a query's trailing ``WITH (partitioning = 'matrix', units = 8, adapt = true)``.

    Raises:
        JobError: naming the option and its value, for an unknown option or a bad value.
    """
    cur.expect_word("WITH")
    cur.expect(TokenType.L_PAREN, "'(' after WITH")
    options: list[Option] = []
    if cur.match(TokenType.R_PAREN) is None:
        while True:
            option = _parse_option(cur)
            if any(prior.key == option.key for prior in options):
                msg = f"option {option.key!r} is given twice"
                raise cur.error_at(msg, option.key_first, option.key_last)
            _check_query_option(cur, option)
            options.append(option)
            if cur.match(TokenType.COMMA) is None:
                cur.expect(TokenType.R_PAREN, "',' or ')' in the WITH options")
                break
    if not cur.at_end():
        tok = cur.advance()
        msg = "nothing may follow the query's WITH options"
        raise cur.error_at(msg, tok)
    return tuple((o.key, o.value.lower()) for o in options)


def _check_query_option(cur: Cursor, o: Option) -> None:
    value = o.value.lower()
    if o.key == "partitioning":
        if value not in PARTITIONINGS:
            msg = f"unknown partitioning {o.value!r}; expected one of {', '.join(PARTITIONINGS)}"
            raise cur.error_at(msg, o.value_first, o.value_last)
    elif o.key == "units":
        n = whole_number(value)
        if n is None or not 1 <= n <= 4096:
            msg = f"units must be a whole number from 1 to 4096, got {o.value!r}"
            raise cur.error_at(msg, o.value_first, o.value_last)
    elif o.key in ("unit_rows", "epoch"):
        n = whole_number(value)
        if n is None or n < 1:
            msg = f"{o.key} must be a whole number >= 1, got {o.value!r}"
            raise cur.error_at(msg, o.value_first, o.value_last)
    elif o.key == "adapt":
        if value not in ("true", "false"):
            msg = f"adapt must be true or false, got {o.value!r}"
            raise cur.error_at(msg, o.value_first, o.value_last)
    elif o.key == "time_buckets":
        if value not in ("auto", "true", "false"):
            msg = f"time_buckets must be auto, true or false, got {o.value!r}"
            raise cur.error_at(msg, o.value_first, o.value_last)
    elif o.key == "overload":
        if value not in ("exact", "shed"):
            msg = f"overload must be 'exact' or 'shed', got {o.value!r}"
            raise cur.error_at(msg, o.value_first, o.value_last)
    elif o.key == "budget":
        n = whole_number(value)
        if n is None or n < 1:
            msg = f"budget is the probes a batch may make, a whole number >= 1, got {o.value!r}"
            raise cur.error_at(msg, o.value_first, o.value_last)
    elif o.key == "shed_count":
        if value not in ("estimate", "exact"):
            msg = f"shed_count must be 'estimate' or 'exact', got {o.value!r}"
            raise cur.error_at(msg, o.value_first, o.value_last)
    elif o.key == "shed_policy":
        if value not in ("jaqpot", "uniform"):
            msg = f"shed_policy must be 'jaqpot' or 'uniform', got {o.value!r}"
            raise cur.error_at(msg, o.value_first, o.value_last)
    elif o.key == "freshness":
        if seconds_of(o.value) is None:
            msg = (
                "freshness is a duration of whole seconds, as '30 seconds' or '2 minutes', "
                f"not {o.value!r}"
            )
            raise cur.error_at(msg, o.value_first, o.value_last)
    elif o.key == "ttl":
        if seconds_of(o.value) is None:
            msg = (
                f"ttl is a duration of whole seconds, as '30 seconds' or '1 hour', not {o.value!r}"
            )
            raise cur.error_at(msg, o.value_first, o.value_last)
    else:
        msg = (
            f"unknown query option {o.key!r}; "
            "expected partitioning, units, unit_rows, adapt, time_buckets, epoch, ttl, "
            "overload, budget, shed_count, shed_policy or freshness"
        )
        raise cur.error_at(msg, o.key_first, o.key_last)
