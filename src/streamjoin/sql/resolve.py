"""Resolve the column references of a join query and qualify them with their side's alias."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from streamjoin.model import Column, SqlType, StreamDef
from streamjoin.model.aggregate import WINDOW
from streamjoin.sql.cursor import WORD_RE
from streamjoin.sql.dialect import SPAN_KEY, StreamJoinSpark, node_error, span
from streamjoin.sql.positions import Statement


@dataclass(frozen=True)
class Side:
    """One input of the query: the stream and the alias it goes by."""

    alias: str
    stream: StreamDef


class Resolver:
    """Resolves columns against the inputs of one query (those in scope where a column is).

    Args:
        stmt: the INSERT statement, for error positions.
        sides: the inputs in scope, with distinct aliases.
        later: inputs joined after the scope (named in the error if a column uses one).
        windowed: ``window.start`` and ``window.end`` name the bounds of a group's window.
    """

    def __init__(
        self,
        stmt: Statement,
        sides: tuple[Side, ...],
        later: tuple[Side, ...] = (),
        windowed: bool = False,
    ) -> None:
        self.stmt = stmt
        self.sides = sides
        self.later = later
        self.windowed = windowed

    def qualify(self, root: exp.Expr) -> None:
        """Rewrite every column under `root` in place to ``alias.column`` (declared spelling).

        Raises:
            JobError: an unknown alias, an unknown or ambiguous column.
        """
        for col in list(root.find_all(exp.Column)):
            where = span(col)
            if where is not None:
                # The rewritten identifiers carry no position; keep the one written.
                col.meta[SPAN_KEY] = where
            if self.windowed and col.table.lower() == WINDOW:
                if col.name.lower() not in ("start", "end"):
                    msg = f"a window has a start and an end, not {col.name!r}"
                    raise node_error(self.stmt, col, msg)
                continue
            side, column = self._resolve(col)
            col.set("this", identifier(column.name))
            col.set("table", identifier(side.alias))

    def column_type(self, col: exp.Column) -> SqlType | None:
        """The declared type of a qualified column, or None if it is not one of ours."""
        for side in self.sides:
            if side.alias.lower() == col.table.lower():
                found = side.stream.column(col.name)
                return None if found is None else found.type
        return None

    def expand_stars(self, select: exp.Select) -> None:
        """Replace ``*`` and ``alias.*`` in the SELECT list, in place, by the columns they stand
        for, in the inputs' declared order (the columns of a star's stream, qualified)."""
        items: list[exp.Expr] = []
        for item in select.expressions:
            star = isinstance(item, exp.Star) or (
                isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            )
            if not star:
                items.append(item)
                continue
            table = item.args.get("table") if isinstance(item, exp.Column) else None
            sides = self.sides if table is None else (self._side(table),)
            for side in sides:
                for column in side.stream.columns:
                    ref = exp.Column(this=identifier(column.name), table=identifier(side.alias))
                    where = span(item)
                    if where is not None:
                        ref.meta[SPAN_KEY] = where
                    items.append(ref)
        select.set("expressions", items)

    def _resolve(self, col: exp.Column) -> tuple[Side, Column]:
        if col.args.get("db") is not None or not isinstance(col.this, exp.Identifier):
            msg = f"expected alias.column or column, got {col.sql(dialect='spark')}"
            raise node_error(self.stmt, col, msg)
        name = col.name
        table = col.args.get("table")
        if table is not None:
            side = self._side(table)
            found = side.stream.column(name)
            if found is None:
                columns = ", ".join(c.name for c in side.stream.columns)
                msg = f"unknown column {name!r} in stream {side.stream.name!r} (columns: {columns})"
                raise node_error(self.stmt, col.this, msg)
            return side, found
        matches = [(s, c) for s in self.sides if (c := s.stream.column(name)) is not None]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            listing = "; ".join(
                f"{s.alias}: {', '.join(c.name for c in s.stream.columns)}" for s in self.sides
            )
            msg = f"unknown column {name!r} (columns of {listing})"
        else:
            having = [s.alias for s, _ in matches]
            owners = f"both {having[0]} and {having[1]}" if len(having) == 2 else ", ".join(having)
            qualified = " or ".join(f"{a}.{name}" for a in having)
            msg = f"ambiguous column {name!r}: {owners} have it; write {qualified}"
        raise node_error(self.stmt, col, msg)

    def _side(self, table: exp.Expr) -> Side:
        alias = table.name
        for side in self.sides:
            if side.alias.lower() == alias.lower():
                return side
        aliases = ", ".join(s.alias for s in self.sides)
        msg = f"unknown alias {alias!r} (the query's aliases: {aliases})"
        if any(side.alias.lower() == alias.lower() for side in self.later):
            msg = (
                f"{alias!r} is joined after this ON: an ON condition can use only the inputs "
                f"joined before it ({aliases}); move the condition to a later ON or to WHERE"
            )
        for side in self.sides:
            if side.stream.name.lower() == alias.lower():
                msg = f"{msg}; stream {side.stream.name!r} is called {side.alias!r} here"
        raise node_error(self.stmt, table, msg)


@functools.lru_cache(maxsize=1024)
def _needs_quotes(name: str) -> bool:
    if WORD_RE.fullmatch(name) is None:
        return True
    # A keyword as a bare name may not parse back (e.g. a column called `date`).
    tokens = StreamJoinSpark().tokenize(name)
    return len(tokens) != 1 or tokens[0].token_type != TokenType.VAR


def identifier(name: str) -> exp.Identifier:
    """`name` as an identifier, quoted if Spark SQL could not read it bare."""
    return exp.Identifier(this=name, quoted=_needs_quotes(name))
