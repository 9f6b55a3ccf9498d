"""Flink's windowing table-valued functions, ``TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), size))``
and ``TABLE(HOP(TABLE s, DESCRIPTOR(ts), slide, size))``, read as Spark's ``window(ts, size[,
slide])``: the same windows, and ``window_start`` / ``window_end`` are ``window.start`` /
``window.end``.

sqlglot parses neither, so each call is blanked out of the statement's text before parsing,
leaving the stream's name where it was (every other offset unchanged, for error positions), and
the window it stood for is put back into the parsed SELECT (`apply_tvf`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

from streamjoin.model.aggregate import WINDOW
from streamjoin.sql.dialect import SPAN_KEY, StreamJoinSpark, node_error, span
from streamjoin.sql.positions import Statement

_KINDS = {"TUMBLE": 1, "HOP": 2}
"""The windowing functions read, with how many durations follow the descriptor."""
_BOUNDS = {"window_start": "start", "window_end": "end"}


@dataclass(frozen=True)
class Tvf:
    """One windowing call: the stream it windows, at `at` in the text, and its window as a
    Spark ``window(...)`` call's text."""

    at: int
    stream: str
    window: str
    span: tuple[int, int]


def blank_tvfs(stmt: Statement, tokens: list[Token]) -> tuple[Statement, dict[int, Tvf]]:
    """`stmt` with each windowing call replaced by its stream's name, and the calls by the
    offset of that name.

    Raises:
        JobError: a call that is not ``TABLE(TUMBLE|HOP(TABLE s, DESCRIPTOR(col), ...))``.
    """
    text, found = stmt.text, {}
    for i, tok in enumerate(tokens):
        if not _opens_tvf(tokens, i):
            continue
        kind = tokens[i + 2].text.upper()
        close = _closing(tokens, i + 1)
        args = _arguments(tokens, i + 4, _closing(tokens, i + 3))
        where = (tok.start, tokens[close].end + 1)
        usage = (
            f"TABLE({kind}(TABLE <stream>, DESCRIPTOR(<event time>), "
            + ("<slide>, <size>" if kind == "HOP" else "<size>")
            + "))"
        )
        if (
            len(args) != 2 + _KINDS.get(kind, 0)
            or len(args[0]) != 2
            or args[0][0].token_type != TokenType.TABLE
            or len(args[1]) != 4
            or args[1][0].text.upper() != "DESCRIPTOR"
        ):
            msg = (
                f"{kind} is not a windowing function streamjoin reads"
                if kind not in _KINDS
                else f"expected {usage}"
            )
            raise stmt.error(msg, where[0], where[1], unsupported=kind not in _KINDS)
        name, column = args[0][1], args[1][2]
        written = stmt.text[name.start : name.end + 1]  # (as written: quotes kept)
        durations = [stmt.text[a[0].start : a[-1].end + 1] for a in args[2:]]
        if kind == "HOP":
            durations.reverse()  # (HOP gives the slide first, window() the size)
        described = stmt.text[column.start : column.end + 1]
        call = f"{WINDOW}({described}, {', '.join(durations)})"
        found[name.start] = Tvf(name.start, name.text, call, where)
        blank = "".join(c if c == "\n" else " " for c in text[where[0] : where[1]])
        blank = blank[: name.start - where[0]] + written + blank[name.end + 1 - where[0] :]
        text = text[: where[0]] + blank + text[where[1] :]
    return Statement(stmt.src, stmt.start, text), found


def apply_tvf(stmt: Statement, select: exp.Select, tvf: Tvf) -> None:
    """Turn `select`, a SELECT over the windowing call `tvf`, into the same SELECT over its
    stream with ``GROUP BY window(...)``, in place.

    Raises:
        JobError: no GROUP BY with window_start and window_end, or a use of window_time.
    """
    group = select.args.get("group")
    bounds = [g for g in (group.expressions if group else []) if _bound(g)]
    if group is None or len(bounds) != 2:
        msg = (
            "a windowing function's rows are grouped by their window: "
            "GROUP BY window_start, window_end, <keys>"
        )
        raise stmt.error(msg, tvf.span[0], tvf.span[1], unsupported=True)
    try:
        call: exp.Expr = sqlglot.parse_one(tvf.window, dialect=StreamJoinSpark)
    except SqlglotError as err:  # (durations that are no expressions, e.g. a stray backslash)
        msg = f"cannot read this call's durations as {tvf.window}: {str(err).splitlines()[0]}"
        raise stmt.error(msg, tvf.span[0], tvf.span[1]) from None
    for node in call.walk():
        node.meta[SPAN_KEY] = tvf.span
    group.set("expressions", [call, *(g for g in group.expressions if not _bound(g))])
    where = select.args.get("where")
    for col in list(select.find_all(exp.Column)):
        if where is not None and col.find_ancestor(exp.Where) is where:
            continue  # (rows are filtered before they have a window)
        if col.name.lower() == "window_time" and not col.table:
            msg = "window_time is not supported: use window_end"
            raise node_error(stmt, col, msg, unsupported=True)
        if _bound(col) and col.parent is not group:
            where = span(col)
            bound: exp.Expr = exp.column(_BOUNDS[col.name.lower()], table=WINDOW)
            if where is not None:
                bound.meta[SPAN_KEY] = where
            if col.parent is select:  # (a bare SELECT item keeps its name, as in Flink)
                bound = exp.alias_(bound, col.name)
            col.replace(bound)


def distinct_by_window(select: exp.Select, tvfs: dict[int, Tvf]) -> None:
    """``SELECT DISTINCT cols FROM TABLE(TUMBLE(...))``, in place, as ``GROUP BY window_start,
    window_end, cols``: each window's distinct rows, written when it closes (Flink's window
    deduplication of values). Any other SELECT DISTINCT is left as written (and refused)."""
    from_ = select.args.get("from_")
    if not select.args.get("distinct") or select.args.get("group") or from_ is None:
        return
    where = span(from_.this)
    if where is None or where[0] not in tvfs or select.args.get("joins"):
        return
    keys = [exp.column(b) for b in _BOUNDS]
    for item in select.expressions:
        value = item.this if isinstance(item, exp.Alias) else item
        if not _bound(value):
            keys.append(value.copy())
    select.set("group", exp.Group(expressions=keys))
    select.set("distinct", None)


def _bound(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) and not node.table and node.name.lower() in _BOUNDS


def _opens_tvf(tokens: list[Token], i: int) -> bool:
    """``TABLE ( name (`` at token `i`."""
    return (
        i + 3 < len(tokens)
        and tokens[i].token_type == TokenType.TABLE
        and tokens[i + 1].token_type == TokenType.L_PAREN
        and tokens[i + 3].token_type == TokenType.L_PAREN
        and tokens[i + 2].text.isidentifier()
    )


def _closing(tokens: list[Token], opening: int) -> int:
    """The index of the parenthesis closing the one at `opening` (the last token if none)."""
    depth = 0
    for j in range(opening, len(tokens)):
        if tokens[j].token_type == TokenType.L_PAREN:
            depth += 1
        elif tokens[j].token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j
    return len(tokens) - 1


def _arguments(tokens: list[Token], first: int, close: int) -> list[list[Token]]:
    """The tokens of each comma-separated argument in ``[first, close)``."""
    args: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens[first:close]:
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        if tok.token_type == TokenType.COMMA and depth == 0:
            args.append([])
            continue
        args[-1].append(tok)
    return [a for a in args if a] if any(args) else []
