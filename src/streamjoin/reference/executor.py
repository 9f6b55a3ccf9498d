"""The reference run of a job: the semantics contract that the Spark engine implements.

Input is a sequence of micro-batches; ``batches[i]`` maps a stream name to that stream's rows in
micro-batch i (a stream may be absent from a batch).

1. *Active streams* are the streams referenced by at least one query; only these are processed
   (rows of other streams are ignored). The global watermark W starts as None (minus infinity).
2. In batch i, for each active stream s with a watermark (``StreamDef.watermark``): a row whose
   event-time value is None is *malformed*; a row whose event time is strictly below W (W as it
   stood at the end of batch i-1; nothing is late while W is None) is *late*; every other row is
   *on-time*. Every row of a stream without a watermark is on-time.
3. After batch i, for each stream s with a watermark that had on-time rows in batch i:
   ``wm_s = max(wm_s, max on-time event time of s in batch i - delay_s)``. Then
   ``W = min(wm_s)`` over ALL active streams with a watermark, or None while any of them has no
   wm_s yet. W never decreases. W (epoch microseconds) is recorded after every batch.
4. Event times are epoch microseconds: ``(ts - 1970-01-01) // 1 µs`` on naive (UTC) datetimes.
5. The result of query q (inputs: stream S1 under alias a1, S2 under a2, ... in the order
   written, two or more, a stream possibly appearing twice: a self-join) is every combination
   (r1, r2, ...) of on-time rows ri of Si, from any batches, for which the predicate is TRUE
   (NULL is not TRUE) in the environment {a1: r1, a2: r2, ...}; each combination yields the tuple
   of the SELECT expressions. Duplicates are kept (multiset semantics); a self-join includes
   (x, x) when the predicate holds.
6. A result *arrives* in the batch of its last-arriving row: the largest batch index among its
   rows (`ReferenceResult.arrivals`). An engine emits it in that batch, so the results a query
   added to a job from batch b on must give are those arriving in b or later
   (`ReferenceResult.since`).

Rows are conformed to the declared schema before use: keys match column names
case-insensitively, a missing column is NULL (as Spark's JSON reader would make it), an
undeclared key is an error, a value of the wrong kind is an error (a float in a BIGINT column,
a string in a TIMESTAMP column, …), an int in a DOUBLE column becomes a float, a number in a
DECIMAL(p,s) column is cast to it (rounded HALF_UP to s places, NULL if too wide) and an aware
datetime becomes naive UTC. Late and malformed
rows are reported as given.

The join is a nested loop over all combinations, no indexes, nothing clever, so that it stays
obviously correct. The one shortcut is exact: a conjunction is TRUE only when every conjunct is,
so a conjunct is checked as soon as the inputs it names are bound, and a combination is given up
at the first conjunct that is not TRUE.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from streamjoin.model import Job, Query, SqlType, StreamDef
from streamjoin.plan.aggregate import plan_aggregate
from streamjoin.plan.outer import plan_outer
from streamjoin.plan.physical import window_lag
from streamjoin.reference import casts
from streamjoin.reference import values as v
from streamjoin.reference.aggregate import aggregate_results
from streamjoin.reference.evaluate import Evaluator, compile_expression
from streamjoin.reference.groups import group_query_results
from streamjoin.reference.outer import unmatched_results
from streamjoin.reference.rollup import rollup_results

Row = Mapping[str, object]


@dataclass(frozen=True)
class ReferenceResult:
    """What a reference run produced.

    Attributes:
        outputs: query name -> result rows, values in the query's SELECT order.
        late: active stream name -> its late rows, in input order.
        malformed: active stream name -> rows whose event-time column is None, in input order.
        watermarks: the global watermark (epoch microseconds, None = not yet) after each batch.
        arrivals: query name -> for each row of its output (same order), the batch in which
            the result arrives: the largest batch index of the rows it combines.
    """

    outputs: dict[str, list[tuple[object, ...]]]
    late: dict[str, list[Row]]
    malformed: dict[str, list[Row]]
    watermarks: list[int | None]
    arrivals: dict[str, list[int]] = field(default_factory=dict)

    def since(self, query: str, batch: int) -> list[tuple[object, ...]]:
        """The results of `query` that arrive in batch `batch` or later: what a query added to
        the job at batch `batch` (a restart from the same checkpoint) must produce."""
        return self.between(query, batch)

    def between(self, query: str, start: int, stop: int | None = None) -> list[tuple[object, ...]]:
        """The results of `query` that arrive in batches `start` to `stop` (excluded; None: to
        the end): what a query that ran in those batches must produce."""
        if query not in self.arrivals:
            msg = f"unknown query {query!r}; known: {sorted(self.arrivals)}"
            raise KeyError(msg)
        rows = self.outputs[query]
        return [
            row
            for row, b in zip(rows, self.arrivals[query], strict=True)
            if b >= start and (stop is None or b < stop)
        ]


def run_reference(
    job: Job, batches: Sequence[Mapping[str, Sequence[Row]]], *, final: bool = False
) -> ReferenceResult:
    """Run every query of `job` over `batches` by brute force (see the module docstring,
    `reference.aggregate` for GROUP BY queries and `reference.outer` for outer joins).

    Args:
        job: the streams and queries.
        batches: micro-batch i maps stream name -> rows of that stream in batch i.
        final: the input ends with the last batch; one more batch (index ``len(batches)``)
            emits every window still open and every row still waiting for a partner.

    Returns:
        The outputs of every query, the late and malformed rows of every active stream and the
        global watermark after each batch.

    Raises:
        KeyError: a batch names a stream the job does not declare.
        ValueError: a row has a key that is not a declared column of its stream.
        TypeError: a value does not fit its column's type.
    """
    active = _active_streams(job)
    known = {s.name for s in job.streams}
    conform = {s.name: _conformer(s) for s in active}
    on_time: dict[str, list[dict[str, object]]] = {s.name: [] for s in active}
    arrived: dict[str, list[int]] = {s.name: [] for s in active}
    """Per stream, the batch index of each of its on-time rows."""
    late: dict[str, list[Row]] = {s.name: [] for s in active}
    malformed: dict[str, list[Row]] = {s.name: [] for s in active}
    stream_wm: dict[str, int] = {}
    global_wm: int | None = None
    watermarks: list[int | None] = []

    for index, batch in enumerate(batches):
        unknown = set(batch) - known
        if unknown:
            msg = f"batch names unknown streams {sorted(unknown)}; known: {sorted(known)}"
            raise KeyError(msg)
        for stream in active:
            wm = stream.watermark
            newest: int | None = None
            for raw in batch.get(stream.name, ()):
                row = conform[stream.name](raw)
                if wm is None:
                    on_time[stream.name].append(row)
                    arrived[stream.name].append(index)
                    continue
                ts = row[wm.column.lower()]
                if ts is None:
                    malformed[stream.name].append(raw)
                    continue
                assert isinstance(ts, dt.datetime)  # guaranteed by the conformer
                us = v.event_time_us(ts)
                if global_wm is not None and us < global_wm:
                    late[stream.name].append(raw)
                    continue
                on_time[stream.name].append(row)
                arrived[stream.name].append(index)
                newest = us if newest is None else max(newest, us)
            if wm is not None and newest is not None:
                candidate = newest - wm.delay_us
                stream_wm[stream.name] = max(stream_wm.get(stream.name, candidate), candidate)
        global_wm = _advance(global_wm, active, stream_wm)
        watermarks.append(global_wm)

    outputs: dict[str, list[tuple[object, ...]]] = {}
    arrivals: dict[str, list[int]] = {}
    for q in job.queries:
        grouped = None
        if q.windowed is not None:
            grouped = plan_aggregate(q, window_lag(job, q))
        joins = grouped.join_query() if grouped else q
        inputs = [on_time[s.stream] for s in q.sides]
        batches_of = [arrived[s.stream] for s in q.sides]
        joined = _join(joins, inputs, batches_of)
        if q.outer is not None:
            op = plan_outer(job, q)
            joined += unmatched_results(job, joins, op, inputs, batches_of, watermarks, final)
        if grouped is not None:
            joined = aggregate_results(grouped, joined, watermarks, final)
        if q.rollup is not None:
            joined = rollup_results(q, joined)
        outputs[q.name] = [row for row, _ in joined]
        arrivals[q.name] = [b for _, b in joined]
    for g in job.group_queries:
        grouped_rows = group_query_results(g, on_time, arrived, watermarks, final)
        outputs[g.name] = [row for row, _ in grouped_rows]
        arrivals[g.name] = [b for _, b in grouped_rows]
    return ReferenceResult(outputs, late, malformed, watermarks, arrivals)


def reference_join(
    job: Job, query_name: str, left_rows: Sequence[Row], right_rows: Sequence[Row]
) -> list[tuple[object, ...]]:
    """The result of one query over given rows, all of them on-time (no watermark applies).

    Args:
        job: the job declaring the query and its streams.
        query_name: which query.
        left_rows: rows of the query's left stream.
        right_rows: rows of the query's right stream.

    Returns:
        The query's result rows (SELECT order), duplicates kept, in nested-loop order.
    """
    query = next((q for q in job.queries if q.name == query_name), None)
    if query is None:
        msg = f"unknown query {query_name!r}; known: {[q.name for q in job.queries]}"
        raise KeyError(msg)
    left = _conformer(job.stream(query.left.stream))
    right = _conformer(job.stream(query.right.stream))
    if query.multiway:
        msg = f"reference_join takes a two-way query; {query_name!r} joins {len(query.sides)}"
        raise ValueError(msg)
    inputs = [[left(r) for r in left_rows], [right(r) for r in right_rows]]
    return [row for row, _ in _join(query, inputs, [[0] * len(rows) for rows in inputs])]


def _active_streams(job: Job) -> list[StreamDef]:
    """Streams referenced by a query, in declaration order."""
    used = {side.stream for q in job.queries for side in q.sides}
    used |= {s for g in job.group_queries for s in g.streams}
    for name in used:
        job.stream(name)  # KeyError naming the known streams if a query names an unknown one
    return [s for s in job.streams if s.name in used]


def _advance(current: int | None, active: list[StreamDef], stream_wm: dict[str, int]) -> int | None:
    """The global watermark after a batch: min over watermarked active streams, never lower."""
    watermarked = [s.name for s in active if s.watermark is not None]
    if not watermarked or any(name not in stream_wm for name in watermarked):
        return current
    candidate = min(stream_wm[name] for name in watermarked)
    return candidate if current is None else max(current, candidate)


def _join(
    query: Query, inputs: list[list[dict[str, object]]], batches: list[list[int]]
) -> list[tuple[tuple[object, ...], int]]:
    """Nested loop over every combination of `inputs` (one list per side, in `query.sides`
    order); keep those whose predicate is TRUE, each with the largest batch index of its rows
    (`batches` holds each input row's batch index, parallel to `inputs`)."""
    aliases = [side.alias for side in query.sides]
    checks: list[list[Evaluator]] = [[] for _ in aliases]
    for depth, conjunct in _conjuncts_by_depth(query.predicate, aliases):
        checks[depth].append(compile_expression(conjunct))
    select = [compile_expression(item.sql) for item in query.select]
    env: dict[str, Mapping[str, object]] = {}
    out: list[tuple[tuple[object, ...], int]] = []

    def bind(depth: int, last: int) -> None:
        for row, batch in zip(inputs[depth], batches[depth], strict=True):
            env[aliases[depth]] = row
            if any(check(env) is not True for check in checks[depth]):
                continue
            if depth + 1 < len(inputs):
                bind(depth + 1, max(last, batch))
            else:
                out.append((tuple(f(env) for f in select), max(last, batch)))

    bind(0, -1)
    return out


def _conjuncts_by_depth(predicate: str, aliases: list[str]) -> list[tuple[int, str]]:
    """Each top-level conjunct of `predicate` with the position of the last input it names (it
    can be checked once the inputs up to that one are bound)."""
    if not predicate.strip():
        return []
    position = {alias.lower(): i for i, alias in enumerate(aliases)}
    node = sqlglot.parse_one(predicate, dialect="spark")
    stack, conjuncts = [node], []
    while stack:
        item = stack.pop()
        while isinstance(item, exp.Paren):
            item = item.this
        if isinstance(item, exp.And):
            stack += [item.expression, item.this]
        else:
            conjuncts.append(item)
    out = []
    for conjunct in conjuncts:
        named = [position.get(col.table.lower(), 0) for col in conjunct.find_all(exp.Column)]
        out.append((max(named, default=0), conjunct.sql(dialect="spark")))
    return out


def _conformer(stream: StreamDef) -> Callable[[Row], dict[str, object]]:
    """A function bringing a raw row to the declared schema (lower-case keys, fitting types)."""
    columns = {c.name.lower(): c for c in stream.columns}

    def conform(raw: Row) -> dict[str, object]:
        row: dict[str, object] = dict.fromkeys(columns)
        for key, value in raw.items():
            col = columns.get(key.lower())
            if col is None:
                msg = f"stream {stream.name!r} has no column {key!r}; declared: {list(columns)}"
                raise ValueError(msg)
            row[key.lower()] = _fit(stream.name, col.name, col.type, value)
        return row

    return conform


def _fit(stream: str, column: str, sql_type: SqlType, value: object) -> object:
    """`value` as Spark would hold it in a column of `sql_type`; TypeError if it cannot be."""
    if value is None:
        return None
    name = sql_type.name
    if v.category(value) != sql_type.category or (
        name in ("BIGINT", "INT") and not isinstance(value, int)
    ):
        msg = f"stream {stream!r}: column {column!r} is {sql_type.ddl}, got {value!r}"
        raise TypeError(msg)
    if name == "DOUBLE" and isinstance(value, int):
        return float(value)
    if name == "DECIMAL":
        assert sql_type.precision is not None and sql_type.scale is not None
        # Rounded to the declared scale, NULL when too wide: what Spark's reader stores.
        return casts.to_decimal(value, sql_type.precision, sql_type.scale)
    if isinstance(value, dt.datetime):
        return v.naive_utc(value)
    return value
