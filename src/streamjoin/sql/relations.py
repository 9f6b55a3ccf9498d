"""The shape of a join query: its clauses, its relations and the inner JOIN ... ON of each."""

from __future__ import annotations

import typing as t
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokenizer_core import Token, TokenType

from streamjoin.model import SelectItem, StreamDef
from streamjoin.sql.dialect import node_error, span
from streamjoin.sql.positions import Statement
from streamjoin.sql.resolve import Side

# Select clauses streamjoin does not run, with the token that introduces them and why.
_CLAUSES: dict[str, tuple[TokenType, str]] = {
    "distinct": (
        TokenType.DISTINCT,
        "SELECT DISTINCT is supported over a window: SELECT DISTINCT window_start, window_end, "
        "cols FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), size))",
    ),
    "qualify": (TokenType.QUALIFY, "QUALIFY is not supported"),
    "windows": (TokenType.WINDOW, "WINDOW is not supported: window functions are not supported"),
    "order": (TokenType.ORDER_BY, "ORDER BY is not supported: a stream has no end to sort"),
    "sort": (TokenType.SORT_BY, "SORT BY is not supported: a stream has no end to sort"),
    "cluster": (TokenType.CLUSTER_BY, "CLUSTER BY is not supported"),
    "distribute": (TokenType.DISTRIBUTE_BY, "DISTRIBUTE BY is not supported"),
    "limit": (TokenType.LIMIT, "LIMIT is not supported on a continuous query"),
    "offset": (TokenType.OFFSET, "OFFSET is not supported on a continuous query"),
    "laterals": (TokenType.LATERAL, "LATERAL VIEW is not supported"),
    "with_": (TokenType.WITH, "WITH (common table expressions) is not supported"),
}
_ALLOWED = frozenset({"expressions", "from_", "joins", "where", "hint", "group", "having"})
AGGREGATES: dict[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}
"""The aggregate functions a GROUP BY query may use (count also as count(DISTINCT x))."""
_JOIN_WORDS = frozenset(
    {
        TokenType.JOIN,
        TokenType.INNER,
        TokenType.LEFT,
        TokenType.RIGHT,
        TokenType.FULL,
        TokenType.OUTER,
        TokenType.CROSS,
        TokenType.SEMI,
        TokenType.ANTI,
        TokenType.NATURAL,
    }
)


@dataclass(frozen=True)
class Relations:
    """The inputs of the query in the order written, and the ON condition of each JOIN
    (``ons[i]`` joins ``sides[i + 1]`` to the inputs before it)."""

    sides: tuple[Side, ...]
    ons: tuple[exp.Expr, ...]
    outer: t.Literal["left", "right", "full"] | None = None
    """The kind of an outer join of two inputs (None: inner)."""


def check_clauses(stmt: Statement, tokens: list[Token], select: exp.Select) -> None:
    """Reject clauses and expressions that a continuous two-way join does not support.

    Raises:
        UnsupportedError: naming the construct, at its keyword.
    """
    for arg, value in select.args.items():
        if value is None or value is False or value == [] or arg in _ALLOWED:
            continue
        token_type, msg = _CLAUSES.get(arg, (None, f"this clause ({arg}) is not supported"))
        if isinstance(value, list):
            value = value[0]
        node = value if isinstance(value, exp.Expr) else select
        at = None if token_type is None else _keyword(tokens, {token_type}, span(node))
        if at is None:
            raise node_error(stmt, node, msg, unsupported=True)
        raise stmt.error(msg, at.start, at.end + 1, unsupported=True)
    for node in select.walk():
        if node is select:
            continue
        problem = _unsupported_expression(node, select.args.get("group") is not None)
        if problem is None:
            continue
        if isinstance(node, (exp.Subquery, exp.Select)):
            where = _parenthesized(tokens, node.this if isinstance(node, exp.Subquery) else node)
            if where is not None:
                raise stmt.error(problem, where[0], where[1], unsupported=True)
        raise node_error(stmt, node, problem, unsupported=True)


def _parenthesized(tokens: list[Token], node: exp.Expr) -> tuple[int, int] | None:
    """The span of ``( node )``: a subquery's parentheses are not part of any node's span."""
    inner = span(node)
    if inner is None:
        return None
    opening = [t for t in tokens if t.token_type == TokenType.L_PAREN and t.start < inner[0]]
    closing = next(
        (t for t in tokens if t.token_type == TokenType.R_PAREN and t.start >= inner[1]), None
    )
    if not opening or closing is None:
        return None
    return opening[-1].start, closing.end + 1


def _unsupported_expression(node: exp.Expr, grouped: bool) -> str | None:
    if isinstance(node, (exp.Select, exp.Subquery, exp.Exists, exp.SetOperation)):
        return "subqueries are not supported"
    if isinstance(node, exp.Window):
        return "window functions (OVER ...) are not supported"
    if isinstance(node, exp.AggFunc):
        written = node.sql(dialect="spark")
        if not grouped:
            return (
                f"an aggregate ({written}) needs GROUP BY window(<event time>, '<size>'): "
                "a stream's groups are counted per event-time window"
            )
        if type(node) not in AGGREGATES:
            known = ", ".join(AGGREGATES.values())
            return f"aggregate function {written} is not supported; use {known}"
    return None


def find_relations(
    stmt: Statement, tokens: list[Token], select: exp.Select, streams: Sequence[StreamDef]
) -> Relations:
    """The streams of ``FROM a [AS x] [INNER] JOIN b [AS y] ON ... [JOIN c ON ...]...`` (or of
    ``FROM a, b``: a join on TRUE, its condition in WHERE).

    Raises:
        JobError: unknown stream, repeated alias, JOIN without ON.
        UnsupportedError: one relation, cross/semi/anti joins, USING.
    """
    from_ = select.args.get("from_")
    if from_ is None:
        msg = "expected FROM <stream> JOIN <stream> ON <condition>"
        raise stmt.error(msg, tokens[0].start, tokens[-1].end + 1)
    first = from_.this
    joins: list[exp.Join] = list(select.args.get("joins") or [])
    if isinstance(first, exp.Table) and first.args.get("joins"):
        joins = list(first.args["joins"]) + joins
    sides = [stream_side(stmt, first, streams)]
    if not joins:
        msg = (
            "a query joins two streams: FROM a JOIN b ON ...; "
            "single-stream queries are not supported yet"
        )
        raise node_error(stmt, first, msg, unsupported=True)
    ons: list[exp.Expr] = []
    outer = None
    for join in joins:
        outer = _check_join_kind(stmt, tokens, join, len(joins)) or outer
        side = stream_side(stmt, join.this, streams)
        taken = next((s for s in sides if s.alias.lower() == side.alias.lower()), None)
        if taken is not None:
            msg = (
                f"two inputs are called {side.alias!r}; give them different aliases, "
                f"e.g. FROM {taken.stream.name} x JOIN {side.stream.name} y"
            )
            raise node_error(stmt, join.this, msg)
        on = join.args.get("on")
        comma = _join_keywords(tokens, join)[0]
        if on is None and comma.token_type == TokenType.COMMA:
            if select.args.get("where") is None:
                msg = "a comma join pairs every row with every other: give WHERE its condition"
                raise stmt.error(msg, comma.start, comma.end + 1, unsupported=True)
            on = exp.true()  # FROM a, b WHERE ...: the pairs WHERE keeps
        if on is None:
            first_tok, last_tok = _join_keywords(tokens, join)
            after = span(join.this)
            dangling = next((t for t in tokens if after and t.start >= after[1]), None)
            if dangling is not None and dangling.token_type == TokenType.ON:
                msg = "expected a condition after ON"
                raise stmt.error(msg, dangling.start, dangling.end + 1)
            msg = f"JOIN needs an ON condition: JOIN {side.stream.name} ON <condition>"
            raise stmt.error(msg, first_tok.start, last_tok.end + 1)
        sides.append(side)
        ons.append(on)
    return Relations(sides=tuple(sides), ons=tuple(ons), outer=outer)


def stream_side(stmt: Statement, relation: exp.Expr, streams: Sequence[StreamDef]) -> Side:
    """The declared stream `relation` names, under its alias.

    Raises:
        JobError: an unknown stream; UnsupportedError: a subquery or other relation.
    """
    if isinstance(relation, exp.Subquery):
        msg = "subqueries are not supported: join declared streams"
        raise node_error(stmt, relation, msg, unsupported=True)
    if not isinstance(relation, exp.Table) or not isinstance(relation.this, exp.Identifier):
        msg = "only declared streams can be joined"
        raise node_error(stmt, relation, msg, unsupported=True)
    alias = relation.args.get("alias")
    if alias is not None and alias.columns:
        msg = "column aliases on a stream are not supported"
        raise node_error(stmt, alias, msg, unsupported=True)
    for arg in ("pivots", "sample", "laterals", "version"):
        if relation.args.get(arg):
            msg = f"{arg} on a stream is not supported"
            raise node_error(stmt, relation, msg, unsupported=True)
    name = relation.name
    for stream in streams:
        if stream.name.lower() == name.lower() and not relation.args.get("db"):
            return Side(alias=relation.alias or stream.name, stream=stream)
    known = ", ".join(s.name for s in streams) or "none declared"
    written = relation.sql(dialect="spark") if relation.args.get("db") else name
    msg = f"unknown stream {written!r} (streams: {known})"
    raise node_error(stmt, relation.this, msg)


def _check_join_kind(
    stmt: Statement, tokens: list[Token], join: exp.Join, joins: int
) -> t.Literal["left", "right", "full"] | None:
    """The kind of an outer join (None: inner); raises on a join streamjoin does not run."""
    first_tok, last_tok = _join_keywords(tokens, join)
    words = " ".join(t.text.upper() for t in tokens if first_tok.start <= t.start <= last_tok.start)
    msg = None
    if first_tok.token_type == TokenType.COMMA:
        return None  # an inner join whose condition is in WHERE
    if join.kind in ("SEMI", "ANTI", "CROSS") or join.method:
        msg = f"{words} is not supported; use JOIN ... ON <condition>"
    elif join.kind == "OUTER" and not join.side:
        msg = f"{words} needs a side: LEFT, RIGHT or FULL OUTER JOIN"
    elif join.side and joins > 1:
        msg = f"outer joins of more than two inputs are not supported yet ({words})"
    elif join.kind not in ("", "INNER", "OUTER"):
        msg = f"{words} is not supported; use JOIN ... ON <condition>"
    if msg is not None:
        raise stmt.error(msg, first_tok.start, last_tok.end + 1, unsupported=True)
    using = join.args.get("using")
    if using:
        at = _keyword(tokens, {TokenType.USING}, span(using[0]))
        msg = "JOIN ... USING is not supported; write ON a.col = b.col"
        if at is None:
            raise node_error(stmt, using[0], msg, unsupported=True)
        raise stmt.error(msg, at.start, at.end + 1, unsupported=True)
    side = str(join.side).lower()
    return t.cast("t.Literal['left', 'right', 'full']", side) if side else None


def _join_keywords(tokens: list[Token], join: exp.Join) -> tuple[Token, Token]:
    """The first and last token of the keywords (or the comma) that introduce `join`."""
    table_span = span(join.this)
    index = next(
        (i for i, t in enumerate(tokens) if table_span and t.start >= table_span[0]), len(tokens)
    )
    first = last = tokens[max(index - 1, 0)]
    if last.token_type in _JOIN_WORDS:
        i = index - 1
        while i > 0 and tokens[i - 1].token_type in _JOIN_WORDS:
            i -= 1
        first = tokens[i]
    return first, last


def _keyword(
    tokens: list[Token], types: set[TokenType], before: tuple[int, int] | None
) -> Token | None:
    """The last token of `types` before the span `before` (or the first one at all)."""
    candidates = [
        t for t in tokens if t.token_type in types and (before is None or t.start < before[0])
    ]
    if not candidates:
        return None
    return candidates[-1] if before is not None else candidates[0]


def select_items(stmt: Statement, select: exp.Select) -> tuple[SelectItem, ...]:
    """The SELECT list as named items (qualified Spark SQL), each name once.

    Raises:
        JobError: an expression without a name, or a name given twice.
    """
    items: list[SelectItem] = []
    seen: dict[str, str] = {}
    for item in select.expressions:
        if isinstance(item, exp.Alias):
            expr, alias, at = item.this, item.alias, item.args["alias"]
        elif isinstance(item, exp.Column):
            expr, alias, at = item, item.name, item
        else:
            where = span(item)
            written = stmt.text[where[0] : where[1]] if where else item.sql(dialect="spark")
            msg = f"give the expression a name: {written} AS name"
            raise node_error(stmt, item, msg)
        if alias.lower() in seen:
            msg = f"output column {alias!r} is named twice; rename one with AS"
            raise node_error(stmt, at, msg)
        seen[alias.lower()] = alias
        items.append(SelectItem(sql=expr.sql(dialect="spark", comments=False), alias=alias))
    return tuple(items)
