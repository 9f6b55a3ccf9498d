"""The Spark dialect of sqlglot, extended to remember where every expression starts and ends.

sqlglot only records positions on identifiers, literals and some function names; error messages
must point at whole operands (``CAST(x AS INT)``, ``(a.x + 1)``, ``NULL``), so the parser below
stamps the token span on each expression its precedence-climbing methods return.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.parsers.spark import SparkParser

from streamjoin.errors import JobError
from streamjoin.sql.positions import Statement

SPAN_KEY = "streamjoin_span"
"""Key in `exp.Expr.meta` of ``(start, end)``: 0-based offsets, end exclusive."""


class _SpanParser(SparkParser):
    # Spark's parser turns a JOIN without ON into ON TRUE; the job file must say what it means.
    ADD_JOIN_ON_TRUE = False

    def _stamp(self, node: exp.Expr | None, start_index: int) -> exp.Expr | None:
        # Innermost calls return first, so the first stamp is the tightest span of the node.
        if node is not None and self._index > start_index and SPAN_KEY not in node.meta:
            node.meta[SPAN_KEY] = (self._tokens[start_index].start, self._prev.end + 1)
        return node

    def _parse_assignment(self) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_assignment(), i)

    def _parse_disjunction(self) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_disjunction(), i)

    def _parse_conjunction(self) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_conjunction(), i)

    def _parse_equality(self, parse_is: bool = True) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_equality(parse_is), i)

    def _parse_comparison(self, this: exp.Expr | None = None) -> exp.Expr | None:
        i = self._index
        node = super()._parse_comparison(this)
        return node if this is not None else self._stamp(node, i)

    def _parse_range(self, this: exp.Expr | None = None, parse_is: bool = False) -> exp.Expr | None:
        i = self._index
        node = super()._parse_range(this, parse_is)
        return node if this is not None else self._stamp(node, i)

    def _parse_bitwise(self) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_bitwise(), i)

    def _parse_term(self, parse_mod: bool = True) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_term(parse_mod), i)

    def _parse_factor(self, parse_mod: bool = True) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_factor(parse_mod), i)

    def _parse_exponent(self) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_exponent(), i)

    def _parse_unary(self) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_unary(), i)

    def _parse_column(self) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_column(), i)

    def _parse_primary(self) -> exp.Expr | None:
        i = self._index
        return self._stamp(super()._parse_primary(), i)


class _Tokenizer(Spark.Tokenizer):
    # ``window`` is Spark's event-time window function (``GROUP BY window(ts, '10 seconds')``)
    # and its output column (``window.start``); a named WINDOW clause is not supported anyway.
    KEYWORDS: t.ClassVar = {k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k != "WINDOW"}


class StreamJoinSpark(Spark):
    """Spark SQL as sqlglot parses it, with expression spans, no implicit ``ON TRUE`` and
    ``window`` as Spark's window function."""

    Tokenizer = _Tokenizer
    Parser = _SpanParser


def span(node: exp.Expr) -> tuple[int, int] | None:
    """Where `node` was written in the parsed text.

    Args:
        node: an expression from a tree parsed with `StreamJoinSpark`.

    Returns:
        ``(start, end)`` as 0-based offsets into the parsed text (end exclusive), or None for a
        node that was synthesized by the parser and has no written position.
    """
    meta = node.meta
    stamped = meta.get(SPAN_KEY)
    if stamped is not None:
        return t.cast("tuple[int, int]", stamped)
    start: int | None = meta.get("start")
    end: int | None = meta["end"] + 1 if start is not None else None
    for child in node.iter_expressions():
        child_span = span(child)
        if child_span is None:
            continue
        start = child_span[0] if start is None else min(start, child_span[0])
        end = child_span[1] if end is None else max(end, child_span[1])
    if start is None or end is None:
        return None
    return (start, end)


def node_error(
    stmt: Statement, node: exp.Expr, message: str, *, unsupported: bool = False
) -> JobError:
    """An error about `node`, at its written position in `stmt` (its start if it has none).

    Args:
        stmt: the statement `node` was parsed from.
        node: the expression to point at.
        message: what is wrong.
        unsupported: raise `UnsupportedError` rather than `JobError`.
    """
    where = span(node)
    if where is None:
        where = (0, len(stmt.text.split("\n", 1)[0]))
    return stmt.error(message, where[0], where[1], unsupported=unsupported)
