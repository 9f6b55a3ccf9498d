"""``INSERT INTO sink SELECT ... FROM a JOIN b ON ... [JOIN c ON ...] [WHERE ...]`` into a
`Query`."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokenizer_core import Token, TokenType

from streamjoin.model import GroupQuery, JoinSide, OuterJoin, Query, SinkDef, StreamDef
from streamjoin.model.aggregate import WINDOW
from streamjoin.model.intervals import seconds_of
from streamjoin.sql.aggregate import parse_aggregation
from streamjoin.sql.cursor import Cursor
from streamjoin.sql.dialect import StreamJoinSpark, node_error, span
from streamjoin.sql.groups import is_group_query, parse_group_query
from streamjoin.sql.options import parse_query_with
from streamjoin.sql.positions import Statement
from streamjoin.sql.relations import check_clauses, find_relations, select_items
from streamjoin.sql.resolve import Resolver, Side, identifier
from streamjoin.sql.rollup import parse_rollup, unwrap_rollup
from streamjoin.sql.topn import unwrap_ranked
from streamjoin.sql.tvf import blank_tvfs, distinct_by_window
from streamjoin.sql.typecheck import TypeCheckError, infer_category

_CLASS_REPR = re.compile(r"<class '(?:[\w]+\.)*(\w+)'>")


def parse_insert(
    cur: Cursor, name: str, streams: Sequence[StreamDef], sinks: Sequence[SinkDef]
) -> Query | GroupQuery:
    """Parse one INSERT statement into the query called `name`.

    Args:
        cur: a cursor over the statement's tokens, at its start.
        name: the query's name (``q1``, ``q2``, ... in file order).
        streams: the streams of the job.
        sinks: the sinks of the job.

    Returns:
        The query, its expressions qualified by alias and rendered as Spark SQL (a
        `GroupQuery` when it groups single streams with no join before).

    Raises:
        JobError: on syntax errors, unknown names, type mistakes.
        UnsupportedError: on valid SQL that streamjoin does not run.
    """
    stmt = cur.stmt
    cur.expect_word("INSERT")
    overwrite = cur.match_word("OVERWRITE")
    if overwrite is not None:
        msg = "INSERT OVERWRITE is not supported; use INSERT INTO"
        raise cur.error_at(msg, overwrite, unsupported=True)
    cur.expect_word("INTO")
    stmt, options = _split_options(cur)
    stmt, tvfs = blank_tvfs(stmt, cur.tokens)
    tree = _parse(stmt, cur.tokens)
    if not isinstance(tree, exp.Insert) or tree.args.get("overwrite"):
        msg = "expected INSERT INTO <sink> SELECT ... FROM <stream> JOIN <stream> ON ..."
        raise cur.error_at(msg, cur.tokens[0], cur.tokens[-1])
    sink = _sink(stmt, cur.tokens, tree, sinks)
    select = _select(stmt, cur.tokens, tree)
    distinct_by_window(select, tvfs)
    if is_group_query(select):
        if options:
            msg = "WITH options of a query over grouped streams are not supported"
            raise cur.error_at(msg, cur.tokens[-1], unsupported=True)
        return parse_group_query(stmt, cur.tokens, select, streams, tvfs, (name, sink.name))
    if tvfs:
        at = next(iter(tvfs.values())).span
        msg = "a windowing function's rows are grouped (GROUP BY window_start, window_end, ...)"
        raise stmt.error(msg, at[0], at[1], unsupported=True)
    rolled = unwrap_rollup(select)
    if rolled is not None:
        select = rolled[1]
    ranked = unwrap_ranked(stmt, select)
    if ranked is not None:
        select = ranked.inner
    check_clauses(stmt, cur.tokens, select)
    rel = find_relations(stmt, cur.tokens, select, streams)
    Resolver(stmt, rel.sides).expand_stars(select)
    if ranked is not None:
        ranked.keep(stmt)
    windowed = select.args.get("group") is not None
    if windowed and any(s.alias.lower() == WINDOW for s in rel.sides):
        msg = f"an input called {WINDOW!r} would hide the group's window: give it another alias"
        raise node_error(stmt, select, msg)
    resolver = Resolver(stmt, rel.sides, windowed=windowed)
    where_clause = select.args.get("where")
    # A comma join's ON is TRUE: it adds nothing to the predicate.
    conditions: list[tuple[str, exp.Expr]] = [("ON", on) for on in rel.ons if on != exp.true()]
    for i, on in enumerate(rel.ons):
        # An ON sees the inputs joined before it (and its own), as in SQL.
        Resolver(stmt, rel.sides[: i + 2], rel.sides[i + 2 :]).qualify(on)
    if where_clause is not None:
        conditions.append(("WHERE", where_clause.this))
        resolver.qualify(where_clause.this)
    for item in select.expressions:
        resolver.qualify(item)
    joined = _sql(_conjunction([c.copy() for _, c in conditions])) if conditions else None
    aggregation = parse_aggregation(stmt, select, resolver, joined)
    topn = None
    if ranked is not None:
        if aggregation is not None:
            msg = "a top-N of an aggregation is not supported yet"
            raise node_error(stmt, ranked.over, msg, unsupported=True)
        topn = ranked.top(stmt, resolver, joined)
    try:
        for item in select.expressions:
            infer_category(item.this if isinstance(item, exp.Alias) else item, resolver.column_type)
        for clause, condition in conditions:
            category = infer_category(condition, resolver.column_type)
            if category not in ("boolean", "null", "unknown"):
                msg = f"the {clause} condition must be boolean, got {category}"
                raise node_error(stmt, condition, msg)
    except TypeCheckError as err:
        raise node_error(stmt, err.node, err.message) from None
    left, right, *further = (JoinSide(s.stream.name, s.alias) for s in rel.sides)
    ttl = _ttl(stmt, dict(options).get("ttl"), rel.sides)
    if ttl is not None:
        conditions.append(("ON", ttl))
        if rel.outer is not None:  # (it bounds matching: a pair further apart is no match)
            rel = dataclasses.replace(rel, ons=(exp.and_(rel.ons[0], ttl.copy()),))
    items = select_items(stmt, select)
    rollup = None if rolled is None else parse_rollup(stmt, rolled[0], items)
    outer = None
    if rel.outer is not None:
        where = None if where_clause is None else _sql(where_clause.this)
        outer = OuterJoin(rel.outer, _sql(rel.ons[0]), where)
    return Query(
        name=name,
        sink=sink.name,
        left=left,
        right=right,
        predicate=_sql(_conjunction([c for _, c in conditions])) if conditions else "TRUE",
        select=ranked.select(items) if ranked else items,
        line=stmt.line,
        options=options,
        further=tuple(further),
        aggregation=aggregation,
        outer=outer,
        topn=topn,
        rollup=rollup,
    )


def _ttl(stmt: Statement, ttl: str | None, sides: Sequence[Side]) -> exp.Expr | None:
    """The time window a ``ttl`` option puts on a two-way join: the inputs' event times at most
    that far apart (a row then lives that long after the watermark passes it)."""
    if ttl is None:
        return None
    seconds = seconds_of(ttl)
    assert seconds is not None  # (checked with the options)
    if len(sides) != 2 or any(s.stream.event_time is None for s in sides):
        msg = "ttl bounds a join of two streams with event times (WATERMARK FOR ...)"
        raise stmt.error(msg, 0, len(stmt.text.split("\n", 1)[0]), unsupported=True)
    a, b = (
        f"{s.alias}.{identifier(s.stream.event_time or '').sql(dialect='spark')}" for s in sides
    )
    window = f"INTERVAL '{seconds}' SECOND"
    return sqlglot.parse_one(
        f"{b} BETWEEN {a} - {window} AND {a} + {window}", dialect=StreamJoinSpark
    )


def _split_options(cur: Cursor) -> tuple[Statement, tuple[tuple[str, str], ...]]:
    """The statement without its trailing ``WITH (...)`` query options, and those options."""
    stmt, tokens = cur.stmt, cur.tokens
    depth, at = 0, None
    for i, tok in enumerate(tokens):
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and tok.text.upper() == "WITH" and i > 2:
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if nxt is not None and nxt.token_type == TokenType.L_PAREN:
                at = i
    if at is None:
        return stmt, ()
    opts = Cursor(stmt)
    opts.pos = at
    options = parse_query_with(opts)
    cur.tokens = tokens[:at]
    return Statement(stmt.src, stmt.start, stmt.text[: tokens[at].start]), options


def _parse(stmt: Statement, tokens: list[Token]) -> exp.Expr:
    """sqlglot's tree of the statement, with its errors turned into `JobError`."""
    try:
        tree = sqlglot.parse_one(stmt.text, dialect=StreamJoinSpark)
    except ParseError as err:
        info = err.errors[0] if err.errors else {}
        description = _CLASS_REPR.sub(r"\1", str(info.get("description") or err))
        description = description.replace("Invalid expression / Unexpected token", "unexpected")
        start, end = _error_span(stmt, tokens, info.get("line"), info.get("col"))
        msg = f"syntax error near {stmt.text[start:end]!r}: {description}"
        raise stmt.error(msg, start, end) from None
    except RecursionError:
        raise
    except Exception as err:  # sqlglot may fail in many ways on odd input
        msg = f"cannot parse this statement: {err}"
        raise stmt.error(msg, tokens[0].start, tokens[0].end + 1) from None
    return tree


def _error_span(stmt: Statement, tokens: list[Token], line: object, col: object) -> tuple[int, int]:
    """The statement offsets of the token sqlglot reports at (`line`, `col`) (its last char)."""
    if isinstance(line, int) and isinstance(col, int):
        for tok in tokens:
            if tok.line == line and tok.col == col:
                return tok.start, tok.end + 1
        # Not a token boundary: find the character, then the token that covers it.
        lines = stmt.text.split("\n")
        if 1 <= line <= len(lines):
            offset = sum(len(x) + 1 for x in lines[: line - 1]) + max(col - 1, 0)
            for tok in tokens:
                if tok.start <= offset <= tok.end:
                    return tok.start, tok.end + 1
    last = tokens[-1]
    return last.start, last.end + 1


def _sink(
    stmt: Statement, tokens: list[Token], tree: exp.Insert, sinks: Sequence[SinkDef]
) -> SinkDef:
    target = tree.this
    if isinstance(target, exp.Schema):
        msg = "a column list after the sink name is not supported; name the outputs with AS"
        where = span(target)
        after = _token_after(tokens, where)
        if where is None or after is None or after.token_type != TokenType.R_PAREN:
            raise node_error(stmt, target, msg, unsupported=True)
        raise stmt.error(msg, where[0], after.end + 1, unsupported=True)
    if not isinstance(target, exp.Table) or not isinstance(target.this, exp.Identifier):
        msg = "expected the name of a sink after INSERT INTO"
        raise node_error(stmt, target, msg)
    name = target.sql(dialect="spark") if target.args.get("db") else target.name
    for sink in sinks:
        if sink.name.lower() == name.lower():
            return sink
    known = ", ".join(s.name for s in sinks)
    msg = f"unknown sink {name!r} " + (f"(sinks: {known})" if known else "(no sink is declared)")
    raise node_error(stmt, target, msg)


def _select(stmt: Statement, tokens: list[Token], tree: exp.Insert) -> exp.Select:
    if tree.args.get("with_") is not None:
        msg = "WITH (common table expressions) is not supported"
        raise node_error(stmt, tree.args["with_"], msg, unsupported=True)
    body = tree.expression
    if isinstance(body, exp.SetOperation):
        kind = {exp.Union: "UNION", exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}
        word = kind.get(type(body), "UNION")
        at = next((t for t in tokens if t.text.upper() == word), None)
        msg = f"{word} is not supported; write one INSERT per query"
        if at is None:
            raise node_error(stmt, body, msg, unsupported=True)
        raise stmt.error(msg, at.start, at.end + 1, unsupported=True)
    if isinstance(body, exp.Subquery):
        msg = "subqueries are not supported"
        raise node_error(stmt, body, msg, unsupported=True)
    if not isinstance(body, exp.Select):
        msg = "expected SELECT ... FROM <stream> JOIN <stream> ON ... after the sink name"
        after = _token_after(tokens, span(tree.this))
        if after is None:
            raise node_error(stmt, tree.this, msg)
        raise stmt.error(msg, after.start, after.end + 1)
    return body


def _token_after(tokens: list[Token], where: tuple[int, int] | None) -> Token | None:
    """The first token after the span `where`, if any."""
    if where is None:
        return None
    return next((t for t in tokens if t.start >= where[1]), None)


def _conjunction(conditions: list[exp.Expr]) -> exp.Expr:
    """``c1 AND c2 AND ...`` over the flattened conjuncts of `conditions`."""
    conjuncts: list[exp.Expr] = []
    for condition in conditions:
        conjuncts.extend(_conjuncts(condition))
    if len(conditions) == 1:
        return conditions[0]
    parts = [exp.Paren(this=c) if isinstance(c, exp.Connector) else c for c in conjuncts]
    return functools.reduce(lambda a, b: exp.And(this=a, expression=b), parts)


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="spark", comments=False)
