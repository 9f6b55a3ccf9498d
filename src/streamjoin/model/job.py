"""Streams, sinks and join queries as parsed from a job file (or built from Python).

Expressions are kept as Spark SQL text (the dialect users write), with every column reference
qualified by its side's alias (``b.price``), so that the runtime can hand them to Spark SQL as
they are and the reference executor can evaluate the very same text.
"""

from __future__ import annotations

import hashlib
import typing as t
from dataclasses import dataclass, field

from streamjoin.model.aggregate import Aggregation, Rollup, TopN
from streamjoin.model.types import SqlType

if t.TYPE_CHECKING:
    from streamjoin.model.groups import GroupQuery


@dataclass(frozen=True, slots=True)
class Column:
    """A declared column of a stream."""

    name: str
    type: SqlType


@dataclass(frozen=True, slots=True)
class Watermark:
    """``WATERMARK FOR column AS column - INTERVAL 'n' SECOND``: event time and allowed disorder.

    A row of the stream is *late* when its event time is strictly below the global watermark in
    force at the start of its micro-batch; see `streamjoin.reference` for the exact rule.
    """

    column: str
    delay_us: int

    def __post_init__(self) -> None:
        if self.delay_us < 0:
            msg = f"watermark delay must be >= 0, got {self.delay_us} us for {self.column!r}"
            raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class StreamDef:
    """``CREATE STREAM name (columns, WATERMARK ..., PRIMARY KEY ...) WITH (options)``.

    `options` holds every WITH option except `format`, keys lower-cased, values as strings, in the
    order written (they are passed to the Spark reader as they are, except streamjoin's own:
    `path` and `deadletter`).
    """

    name: str
    columns: tuple[Column, ...]
    format: str
    options: tuple[tuple[str, str], ...] = ()
    watermark: Watermark | None = None
    line: int = 0
    key: tuple[str, ...] = ()
    """``PRIMARY KEY (columns) NOT ENFORCED``: no two rows share these columns' values, as the
    source promises (trusted, not checked). A GROUP BY or top-N that holds a keyed input's key
    then groups per row of it, complete when no later result can pair with that row."""

    def __post_init__(self) -> None:
        names = [c.name.lower() for c in self.columns]
        if len(set(names)) != len(names):
            msg = f"stream {self.name!r} declares a column twice: {names}"
            raise ValueError(msg)
        for k in self.key:
            if self.column(k) is None:
                msg = f"stream {self.name!r}: PRIMARY KEY column {k!r} is not declared"
                raise ValueError(msg)
        if self.watermark is not None:
            col = self.column(self.watermark.column)
            if col is None or col.type.name != "TIMESTAMP":
                msg = (
                    f"stream {self.name!r}: WATERMARK FOR {self.watermark.column!r} needs a "
                    "declared TIMESTAMP column"
                )
                raise ValueError(msg)

    def column(self, name: str) -> Column | None:
        """The column called `name` (case-insensitive), or None."""
        lowered = name.lower()
        return next((c for c in self.columns if c.name.lower() == lowered), None)

    def option(self, key: str, default: str | None = None) -> str | None:
        """The WITH option `key` (lower-case), or `default`."""
        return dict(self.options).get(key, default)

    @property
    def event_time(self) -> str | None:
        """The event-time column, if the stream declares a watermark."""
        return self.watermark.column if self.watermark else None


@dataclass(frozen=True, slots=True)
class SinkDef:
    """``CREATE SINK name WITH (format = ..., path = ...)``."""

    name: str
    format: str
    options: tuple[tuple[str, str], ...] = ()
    line: int = 0

    def option(self, key: str, default: str | None = None) -> str | None:
        """The WITH option `key` (lower-case), or `default`."""
        return dict(self.options).get(key, default)


@dataclass(frozen=True, slots=True)
class JoinSide:
    """One input of a join: a stream under an alias (the alias is the stream name if none given)."""

    stream: str
    alias: str


@dataclass(frozen=True, slots=True)
class SelectItem:
    """``expression AS alias`` in the SELECT list; `sql` is qualified Spark SQL text."""

    sql: str
    alias: str


@dataclass(frozen=True, slots=True)
class OuterJoin:
    """``a LEFT | RIGHT | FULL [OUTER] JOIN b ON on [WHERE where]``: besides the pairs, each row
    of a preserved side that no row of the other side matches on `on` is in the result once,
    the other side's columns NULL, if `where` holds on it."""

    kind: t.Literal["left", "right", "full"]
    on: str
    """The ON condition (qualified Spark SQL): what matching means."""
    where: str | None = None

    def preserves(self, index: int) -> bool:
        """Whether input `index` (0 left, 1 right) keeps its unmatched rows."""
        return self.kind == "full" or (self.kind == "left") == (index == 0)


@dataclass(frozen=True, slots=True)
class Query:
    """``INSERT INTO sink SELECT items FROM left JOIN right ON ... [JOIN further ON ...] [WHERE]``.

    `predicate` is the whole join condition (every ON and WHERE conjunct) as qualified Spark SQL
    text; a combination of one row per input is in the result exactly when it evaluates to TRUE
    (NULL is not TRUE). `further` holds the third and later inputs of a multi-way join, in the
    order written.
    """

    name: str
    sink: str
    left: JoinSide
    right: JoinSide
    predicate: str
    select: tuple[SelectItem, ...]
    line: int = 0
    options: tuple[tuple[str, str], ...] = ()
    further: tuple[JoinSide, ...] = ()
    aggregation: Aggregation | None = None
    """``GROUP BY window(...)``: `select` is then over each group (`model.aggregate`)."""
    outer: OuterJoin | None = None
    """An outer join's kind and ON condition (`predicate` stays ON and WHERE, for the pairs)."""
    topn: TopN | None = None
    """``ROW_NUMBER() OVER (...) <= N`` over the joined rows (`model.aggregate`)."""
    rollup: Rollup | None = None
    """Groups with no window over the rows of the query's GROUP BY (`model.aggregate`): the
    query's output is then the rollup's, `select` what the GROUP BY feeds it."""

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for side in self.sides:
            if side.alias.lower() in seen:
                msg = f"query {self.name!r}: two inputs are called {side.alias!r}; alias one"
                raise ValueError(msg)
            seen.add(side.alias.lower())
        aliases = [s.alias for s in self.select]
        if len(set(aliases)) != len(aliases):
            msg = f"query {self.name!r}: output column names repeat: {aliases}"
            raise ValueError(msg)

    @property
    def output(self) -> tuple[SelectItem, ...]:
        """The columns the query writes to its sink (its rollup's, if it has one)."""
        return self.rollup.select if self.rollup is not None else self.select

    @property
    def windowed(self) -> Aggregation | TopN | None:
        """What the query does per event-time window after its join, if anything."""
        return self.aggregation or self.topn

    @property
    def sides(self) -> tuple[JoinSide, ...]:
        """Every input in the order written: (left, right, *further)."""
        return (self.left, self.right, *self.further)

    @property
    def multiway(self) -> bool:
        """True when the query joins three or more inputs."""
        return bool(self.further)

    def option(self, key: str, default: str | None = None) -> str | None:
        """The query's WITH option `key` (lower-case), or `default`."""
        return dict(self.options).get(key, default)

    @property
    def signature(self) -> str:
        """A digest of what the query joins and how it runs: its inputs (stream and alias, in
        order), its predicate and its WITH options (not its sink or SELECT list). Queries are
        named by position (``q1``, ``q2``, ...), so after an edit of the job file a name may
        stand for another query; run state saved under the name (partitioning, probe orders)
        carries over only to a query of equal signature."""
        sides = ", ".join(f"{s.stream} {s.alias}" for s in self.sides)
        options = ", ".join(f"{k}={v}" for k, v in sorted(self.options))
        text = f"{sides} ON {self.predicate} WITH ({options})"
        if self.aggregation is not None:
            text += f" GROUP BY {self.aggregation!r}"
        if self.outer is not None:
            text += f" OUTER {self.outer!r}"
        if self.topn is not None:
            text += f" TOP {self.topn!r}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Job:
    """A whole job file: streams, sinks and queries, each name unique within its kind."""

    streams: tuple[StreamDef, ...]
    sinks: tuple[SinkDef, ...]
    queries: tuple[Query, ...]
    source: str = field(default="<string>", compare=False)
    group_queries: tuple[GroupQuery, ...] = ()
    """The queries over windowed groups of single streams, with no join before (`model.groups`)."""

    @property
    def outputs(self) -> dict[str, str]:
        """Every query's sink, by query name (joins and group queries)."""
        return {q.name: q.sink for q in self.queries} | {q.name: q.sink for q in self.group_queries}

    def stream(self, name: str) -> StreamDef:
        """The stream called `name`; KeyError naming the known streams otherwise."""
        for s in self.streams:
            if s.name == name:
                return s
        msg = f"unknown stream {name!r}; known: {', '.join(s.name for s in self.streams)}"
        raise KeyError(msg)

    def sink(self, name: str) -> SinkDef:
        """The sink called `name`; KeyError naming the known sinks otherwise."""
        for s in self.sinks:
            if s.name == name:
                return s
        msg = f"unknown sink {name!r}; known: {', '.join(s.name for s in self.sinks)}"
        raise KeyError(msg)

    def with_query(self, query: Query, sink: SinkDef | None = None) -> Job:
        """This job with `query` added (and its `sink`, if it declares one)."""
        sinks = (*self.sinks, sink) if sink is not None else self.sinks
        return Job(self.streams, sinks, (*self.queries, query), self.source, self.group_queries)

    def without_query(self, name: str) -> Job:
        """This job without the query called `name` (its sink stays declared)."""
        kept = tuple(q for q in self.queries if q.name != name)
        return Job(self.streams, self.sinks, kept, self.source, self.group_queries)
