"""CREATE STREAM and CREATE SINK, parsed by hand over sqlglot's tokens.

sqlglot has no grammar for Flink-style stream DDL (WATERMARK FOR, WITH options), so these two
statements are read by a small recursive-descent parser; the tokens still come from sqlglot, so
quoting and comments mean the same as in the INSERT statements.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot.tokenizer_core import Token, TokenType

from streamjoin.model import Column, SinkDef, SqlType, StreamDef, Watermark
from streamjoin.model.intervals import MICROS_PER_UNIT, unit_micros
from streamjoin.model.types import TypeName
from streamjoin.sql.cursor import Cursor, is_word
from streamjoin.sql.options import parse_with

_TYPES: dict[str, TypeName] = {
    "BIGINT": "BIGINT",
    "INT": "INT",
    "INTEGER": "INT",
    "DOUBLE": "DOUBLE",
    "STRING": "STRING",
    "BOOLEAN": "BOOLEAN",
    "TIMESTAMP": "TIMESTAMP",
    "DECIMAL": "DECIMAL",
}
_TYPE_LIST = "BIGINT, INT (or INTEGER), DOUBLE, STRING, BOOLEAN, TIMESTAMP, DECIMAL(p,s)"

_UNIT_LIST = "MILLISECOND, SECOND, MINUTE, HOUR, DAY"
_MAX_DELAY_US = 100 * 366 * MICROS_PER_UNIT["DAY"]


def parse_create_stream(cur: Cursor) -> StreamDef:
    """``CREATE STREAM name (columns [, WATERMARK ...]) WITH (options)``.

    Args:
        cur: a cursor at the start of the statement.

    Returns:
        The stream definition, with ``line`` set to the line of CREATE.

    Raises:
        JobError: on any mistake, pointing at the offending token.
    """
    cur.expect_word("CREATE")
    cur.expect_word("STREAM")
    name = cur.expect_name("a stream name")
    cur.expect(TokenType.L_PAREN, f"'(' and the columns of stream {name.text!r}")
    columns: list[tuple[Column, Token]] = []
    watermark: tuple[Token, Token, Token, int] | None = None
    key: tuple[Token, list[Token]] | None = None
    while True:
        first = cur.peek()
        if first is not None and cur.match(TokenType.PRIMARY_KEY) is not None:
            if key is not None:
                msg = f"stream {name.text!r} has a PRIMARY KEY already; give at most one"
                raise cur.error_at(msg, first)
            key = (first, _parse_key(cur))
        elif first is not None and cur.match_word("WATERMARK", "FOR") is not None:
            if watermark is not None:
                msg = f"stream {name.text!r} has a WATERMARK already; give at most one"
                raise cur.error_at(msg, first)
            watermark = (first, *_parse_watermark(cur))
        else:
            col_tok = cur.expect_name("a column name")
            for prior, prior_tok in columns:
                if prior.name.lower() == col_tok.text.lower():
                    msg = f"column {col_tok.text!r} is declared twice (first as {prior_tok.text!r})"
                    raise cur.error_at(msg, col_tok)
            columns.append((Column(col_tok.text, _parse_type(cur)), col_tok))
        if cur.match(TokenType.COMMA) is None:
            cur.expect(TokenType.R_PAREN, "',' or ')' after the column")
            break
    if not columns:
        msg = f"stream {name.text!r} declares no columns"
        raise cur.error_at(msg, name)
    wm = None
    if watermark is not None:
        wm = _check_watermark(cur, [c for c, _ in columns], watermark)
    declared = {c.name.lower(): c.name for c, _ in columns}
    for tok in key[1] if key is not None else []:
        if tok.text.lower() not in declared:
            names = ", ".join(declared.values())
            msg = f"PRIMARY KEY column {tok.text!r}: no such column (columns: {names})"
            raise cur.error_at(msg, tok)
    clause = parse_with(cur, "stream")
    cur.expect_end("the WITH clause")
    return StreamDef(
        name=name.text,
        columns=tuple(c for c, _ in columns),
        format=clause.format,
        options=clause.options,
        watermark=wm,
        line=cur.stmt.line,
        key=tuple(declared[t.text.lower()] for t in key[1]) if key is not None else (),
    )


def parse_create_sink(cur: Cursor) -> SinkDef:
    """``CREATE SINK name WITH (options)``.

    Args:
        cur: a cursor at the start of the statement.

    Returns:
        The sink definition, with ``line`` set to the line of CREATE.

    Raises:
        JobError: on any mistake, pointing at the offending token.
    """
    cur.expect_word("CREATE")
    cur.expect_word("SINK")
    name = cur.expect_name("a sink name")
    clause = parse_with(cur, "sink")
    cur.expect_end("the WITH clause")
    return SinkDef(name=name.text, format=clause.format, options=clause.options, line=cur.stmt.line)


def _parse_type(cur: Cursor) -> SqlType:
    """A column type: a name from `_TYPES`, DECIMAL with ``(precision, scale)``."""
    tok = cur.peek()
    if tok is None or not is_word(tok):
        msg = f"a column type ({_TYPE_LIST})"
        raise cur.error_here(msg)
    cur.advance()
    type_name = _TYPES.get(tok.text.upper())
    if type_name is None:
        msg = f"unknown type {tok.text!r}; expected one of {_TYPE_LIST}"
        raise cur.error_at(msg, tok)
    if type_name != "DECIMAL":
        paren = cur.match(TokenType.L_PAREN)
        if paren is not None:
            msg = f"{type_name} takes no precision or scale"
            raise cur.error_at(msg, tok, paren)
        return SqlType(type_name)
    if cur.match(TokenType.L_PAREN) is None:
        msg = "DECIMAL needs a precision and a scale, e.g. DECIMAL(10,2)"
        raise cur.error_at(msg, tok)
    precision = cur.expect(TokenType.NUMBER, "the DECIMAL precision")
    cur.expect(TokenType.COMMA, "',' and the DECIMAL scale, e.g. DECIMAL(10,2)")
    scale = cur.expect(TokenType.NUMBER, "the DECIMAL scale")
    close = cur.expect(TokenType.R_PAREN, "')' after the DECIMAL scale")
    try:
        return SqlType("DECIMAL", int(precision.text), int(scale.text))
    except ValueError as err:
        raise cur.error_at(str(err), tok, close) from None


def _parse_key(cur: Cursor) -> list[Token]:
    """After ``PRIMARY KEY``: ``(col [, col ...]) NOT ENFORCED``; the columns' tokens."""
    cur.expect(TokenType.L_PAREN, "'(' and the key's columns after PRIMARY KEY")
    cols = [cur.expect_name("a key column")]
    while cur.match(TokenType.COMMA) is not None:
        cols.append(cur.expect_name("a key column"))
    cur.expect(TokenType.R_PAREN, "',' or ')' after the key column")
    for prior in range(len(cols)):
        for later in cols[prior + 1 :]:
            if later.text.lower() == cols[prior].text.lower():
                msg = f"PRIMARY KEY names column {later.text!r} twice"
                raise cur.error_at(msg, later)
    if cur.match(TokenType.NOT) is None or cur.match_word("ENFORCED") is None:
        msg = (
            "NOT ENFORCED after the key: the key is the source's promise, trusted, not checked "
            "(as in Flink)"
        )
        raise cur.error_here(msg)
    return cols


def _parse_watermark(cur: Cursor) -> tuple[Token, Token, int]:
    """After ``WATERMARK FOR``: ``col AS col [- INTERVAL 'n' UNIT]``; (col, col, delay in us)."""
    column = cur.expect_name("the event-time column after WATERMARK FOR")
    cur.expect_word("AS")
    example = f"{column.text} - INTERVAL '5' SECOND"
    again = cur.expect_name(f"{example} (or just {column.text})")
    if again.text.lower() != column.text.lower():
        msg = f"the watermark must be computed from {column.text!r}: AS {example}"
        raise cur.error_at(msg, again)
    sign = cur.peek()
    if sign is None or sign.token_type in (TokenType.COMMA, TokenType.R_PAREN):
        return column, again, 0
    if sign.token_type != TokenType.DASH:
        msg = f"the watermark must lag the event time: AS {example}"
        raise cur.error_at(msg, sign)
    cur.advance()
    cur.expect(TokenType.INTERVAL, "INTERVAL after '-'")
    return column, again, _parse_interval(cur)


def _parse_interval(cur: Cursor) -> int:
    """After INTERVAL: ``'n' UNIT``, ``n UNIT`` or ``'n UNIT'``, in microseconds."""
    amount = cur.peek()
    if amount is None or amount.token_type not in (TokenType.STRING, TokenType.NUMBER):
        msg = "the interval length, e.g. '5'"
        raise cur.error_here(msg)
    cur.advance()
    words = amount.text.split()
    if len(words) == 2 and amount.token_type == TokenType.STRING:
        number, unit_text = words
        unit_first = unit_last = amount
    else:
        number = amount.text.strip()
        unit_tok = cur.peek()
        if unit_tok is None or not is_word(unit_tok):
            msg = f"an interval unit ({_UNIT_LIST})"
            raise cur.error_here(msg)
        unit_first = unit_last = cur.advance()
        unit_text = unit_tok.text
    unit_us = unit_micros(unit_text)
    if unit_us is None:
        msg = f"unknown interval unit {unit_text!r}; expected one of {_UNIT_LIST}"
        raise cur.error_at(msg, unit_first, unit_last)
    try:
        value = Decimal(number)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value < 0:
        msg = f"the watermark delay must be a number >= 0, like '3' or '1.5', got {number!r}"
        raise cur.error_at(msg, amount)
    delay = value * unit_us
    if delay > _MAX_DELAY_US:
        msg = f"the watermark delay {number} {unit_text} is too large (at most 100 years)"
        raise cur.error_at(msg, amount, unit_last)
    if delay != delay.to_integral_value():
        msg = f"the watermark delay {number} {unit_text} is not a whole number of microseconds"
        raise cur.error_at(msg, amount, unit_last)
    return int(delay)


def _check_watermark(
    cur: Cursor, columns: list[Column], watermark: tuple[Token, Token, Token, int]
) -> Watermark:
    """The watermark, once its column is known to be declared and a TIMESTAMP."""
    _, column, _, delay = watermark
    declared = next((c for c in columns if c.name.lower() == column.text.lower()), None)
    if declared is None:
        names = ", ".join(c.name for c in columns)
        msg = f"WATERMARK FOR {column.text!r}: no such column (columns: {names})"
        raise cur.error_at(msg, column)
    if declared.type.name != "TIMESTAMP":
        msg = f"WATERMARK FOR {declared.name!r} needs a TIMESTAMP column, not {declared.type.ddl}"
        raise cur.error_at(msg, column)
    return Watermark(declared.name, delay)
