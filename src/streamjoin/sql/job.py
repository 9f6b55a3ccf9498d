"""A whole job file: statements in, `Job` out."""

from __future__ import annotations

import dataclasses

from streamjoin.model import GroupQuery, Job, Query, SinkDef, StreamDef
from streamjoin.sql.cursor import Cursor
from streamjoin.sql.ddl import parse_create_sink, parse_create_stream
from streamjoin.sql.positions import SourceText
from streamjoin.sql.query import parse_insert
from streamjoin.sql.statements import split_statements

_EXPECTED = "expected CREATE STREAM, CREATE SINK or INSERT INTO"


def parse_job(text: str, source: str = "<string>") -> Job:
    """Parse a job file into streams, sinks and queries.

    CREATE statements are read first, so an INSERT may use a stream or sink declared further
    down the file; queries are named ``q1``, ``q2``, ... in the order of their INSERTs.

    Args:
        text: the job file's content.
        source: the file name, for error messages.

    Returns:
        The job.

    Raises:
        JobError: for every mistake, with the line, column and text it was found at;
            `UnsupportedError` for valid SQL that streamjoin does not run.
    """
    src = SourceText(text, source)
    streams: list[StreamDef] = []
    sinks: list[SinkDef] = []
    inserts: list[Cursor] = []
    for stmt in split_statements(src):
        cur = Cursor(stmt)
        kind = _kind(cur)
        if kind == "insert":
            inserts.append(cur)
        elif kind == "stream":
            stream = parse_create_stream(cur)
            _check_unique(cur, "stream", stream.name, [s.name for s in streams])
            streams.append(stream)
        else:
            sink = parse_create_sink(cur)
            _check_unique(cur, "sink", sink.name, [s.name for s in sinks])
            sinks.append(sink)
    queries: list[Query] = []
    groups: list[GroupQuery] = []
    for n, cur in enumerate(inserts, start=1):
        try:
            query = parse_insert(cur, f"q{n}", streams, sinks)
            if isinstance(query, GroupQuery):
                groups.append(query)
            else:
                queries.append(query)
        except RecursionError:
            # sqlglot and the checks recurse over the expression tree; absurd nesting ends here.
            msg = "this statement nests too deeply (too many parentheses or operators)"
            raise cur.error_at(msg, cur.tokens[0]) from None
    return Job(
        streams=tuple(streams),
        sinks=tuple(sinks),
        queries=tuple(queries),
        source=source,
        group_queries=tuple(groups),
    )


def parse_query_file(text: str, job: Job, source: str = "<query>") -> tuple[SinkDef | None, Query]:
    """Parse a query to add to a running `job`: at most one ``CREATE SINK`` and exactly one
    ``INSERT INTO``, over the job's streams. The query is named after its sink.

    Raises:
        JobError: for every mistake, at its line, column and text in `text`: a CREATE STREAM
            (streams are the job's), a sink the job has already, a second INSERT.
    """
    src = SourceText(text, source)
    sink: SinkDef | None = None
    insert: Cursor | None = None
    for stmt in split_statements(src):
        cur = Cursor(stmt)
        kind = _kind(cur)
        if kind == "stream":
            msg = "a query file cannot declare streams; it reads the running job's streams"
            raise cur.error_at(msg, cur.tokens[0], cur.tokens[1])
        if kind == "sink":
            if sink is not None:
                msg = "a query file declares one sink (for its one INSERT INTO)"
                raise cur.error_at(msg, cur.tokens[0], cur.tokens[2])
            sink = parse_create_sink(cur)
            _check_unique(cur, "sink", sink.name, [s.name for s in job.sinks])
        elif insert is not None:
            msg = "a query file holds one INSERT INTO; add each query on its own"
            raise cur.error_at(msg, cur.tokens[0], cur.tokens[-1])
        else:
            insert = cur
    if insert is None:
        msg = "expected an INSERT INTO statement"
        raise src.error(msg, 0, len(text))
    sinks = [*job.sinks, sink] if sink is not None else list(job.sinks)
    try:
        query = parse_insert(insert, "", job.streams, sinks)
    except RecursionError:
        msg = "this statement nests too deeply (too many parentheses or operators)"
        raise insert.error_at(msg, insert.tokens[0]) from None
    if isinstance(query, GroupQuery):
        msg = "a query over grouped streams cannot be added to a running job yet; restart with it"
        raise insert.error_at(msg, insert.tokens[0], insert.tokens[-1], unsupported=True)
    return sink, dataclasses.replace(query, name=query.sink)


def _kind(cur: Cursor) -> str:
    """``stream``, ``sink`` or ``insert``, from the statement's first words."""
    first = cur.peek()
    if first is None:
        raise cur.error_here(_EXPECTED)
    word = first.text.upper()
    if word == "INSERT":
        return "insert"
    if word == "CREATE":
        second = cur.peek(1)
        if second is not None and second.text.upper() in ("STREAM", "SINK"):
            return second.text.lower()
        if second is not None:
            msg = f"expected STREAM or SINK after CREATE, found {cur.raw(second)!r}"
            raise cur.error_at(msg, second)
    msg = f"{_EXPECTED}, found {cur.raw(first)!r}"
    raise cur.error_at(msg, first)


def _check_unique(cur: Cursor, kind: str, name: str, known: list[str]) -> None:
    """Fail at the statement's name if a `kind` called `name` exists already."""
    if name.lower() in (k.lower() for k in known):
        msg = f"{kind} {name!r} is defined twice"
        raise cur.error_at(msg, cur.tokens[2])
