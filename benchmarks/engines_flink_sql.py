"""A job's SQL as Flink SQL (the ``flink`` engine, `benchmarks.engines_flink`), with the edits
the translation made, listed as the Nexmark edits are.

Flink's filesystem connector reads what Flink 2.3's bundled formats read (CSV, JSON: no
Parquet), so a stream is declared over CSV copies of its Parquet files
(`engines_flink.write_csv_copies`). The SQL is run in PyFlink's own venv by
`engines_flink_runner`, which declares each query's sink itself, from the columns Flink plans.
Flink's event-time attribute (the column a watermark is declared on) has millisecond precision
at most, and only a condition on the attributes of both sides makes a join an interval join
(state kept within the window) rather than a regular one (state kept forever). So each stream
keeps its microsecond event time as declared (``ts TIMESTAMP(6)``), read by the query's own
predicate as written, and adds a millisecond copy (``ts__rt``) carrying the watermark; the query
gets the window again over the copies, widened by one millisecond each side: truncation moves
a difference by less than that, so the widened window holds every pair the exact one does, and
the exact one, kept in the ON condition, decides.

Any other query (an aggregation, a top-N, a stream joined with its windows' groups, a multi-way
join) runs as the job file writes it (`written_query`): Nexmark's queries are Flink's own SQL.
Its edits: a column Flink's parser reserves back-quoted, a window function's ``DESCRIPTOR`` on
the millisecond copy, interval literals as above; and for an updating result, the output
columns its changes are applied by (`upsert_key`).
"""

from __future__ import annotations

import re
import typing as t
from dataclasses import dataclass
from decimal import Decimal

from benchmarks.engines_peers import _out_path
from streamjoin.model import GroupQuery, Query
from streamjoin.model.aggregate import POINT_US

if t.TYPE_CHECKING:
    from streamjoin.model import Job, StreamDef

ROWTIME_SUFFIX = "__rt"
"""Suffix of a stream's millisecond event-time column, the one its watermark is declared on."""

FILE_COLUMN = "__file"
"""A live source's column of the name of the file each row came from (Flink's metadata)."""

TRACE_COLUMNS = ("__lf", "__rf", "__at")
"""What a live query's rows carry beside its own columns (`query_select` with `traced`): the
files its left and right rows came from, and when Flink made the row (UTC, milliseconds)."""

_WIDEN_MS = 1
_LITERALS_EDIT = "interval literals over two digits written DAY TO SECOND"


@dataclass(frozen=True)
class FlinkJob:
    """A job in Flink SQL: the sources' DDL, each query's SELECT and its sink folder, and the
    edits made to the job's own SQL."""

    sources: tuple[str, ...]
    selects: dict[str, str]
    """Each query's SELECT in Flink's SQL, by query name."""
    sinks: dict[str, str]
    """The folder Flink writes each query's rows to (CSV), by query name."""
    outputs: dict[str, str]
    """The query's own sink folder, where the harness wants Parquet (`_out_path`)."""
    edits: tuple[str, ...]
    keys: dict[str, tuple[str, ...]]
    """The output columns each updating query's rows are keyed by (`upsert_key`), by name."""


def upsert_key(q: Query | GroupQuery) -> tuple[str, ...]:
    """The output columns that name each row of `q`'s result when it updates rows it wrote: a
    top-1's partition keys and the event-time column it is partitioned by (not a window: its
    start is not written), a rollup's group keys; empty when the query has none or does not
    write them all (its changes must then carry their old rows)."""
    if isinstance(q, GroupQuery):
        return ()
    if q.topn is not None and q.topn.limit == 1:
        if q.topn.window.size_us != POINT_US:
            return ()  # (keyed by a window's start, which the query does not write)
        keys, items = (*q.topn.keys, q.topn.window.time), q.select
    elif q.rollup is not None:
        keys, items = q.rollup.keys, q.rollup.select
    else:
        return ()
    written = {item.sql: item.alias for item in items}
    if not all(k in written for k in keys):
        return ()
    return tuple(dict.fromkeys(written[k] for k in keys))


def _flink_type(name: str, precision: int | None, scale: int | None) -> str:
    if name == "TIMESTAMP":
        return "TIMESTAMP(6)"  # (Spark's precision; Flink's TIMESTAMP alone is 6 too, said here)
    if name == "DECIMAL":
        return f"DECIMAL({precision},{scale})"
    return name


def source_ddl(s: StreamDef, csv_dir: str, monitor: str | None = None) -> str:
    """``CREATE TABLE`` of stream `s` over its CSV copy in `csv_dir`, with its watermark on the
    millisecond copy of its event time. With `monitor` (an interval: a live feed's), the folder
    is listed again at that interval for new files, and each row has its file's name."""
    cols = [
        f"`{c.name}` {_flink_type(c.type.name, c.type.precision, c.type.scale)}" for c in s.columns
    ]
    if monitor is not None:
        cols.append(f"`{FILE_COLUMN}` STRING NOT NULL METADATA FROM 'file.name' VIRTUAL")
    if s.watermark is not None:
        ts, rt = s.watermark.column, s.watermark.column + ROWTIME_SUFFIX
        cols.append(f"`{rt}` AS CAST(`{ts}` AS TIMESTAMP(3))")
        # The delay in whole milliseconds, rounded up: never a row later than Spark's.
        delay_ms = -(-s.watermark.delay_us // 1000)
        cols.append(f"WATERMARK FOR `{rt}` AS `{rt}` - INTERVAL '{delay_ms / 1000:g}' SECOND")
    body = ",\n  ".join(cols)
    listed = "" if monitor is None else f", 'source.monitor-interval' = '{monitor}'"
    return (
        f"CREATE TABLE `{s.name}` (\n  {body}\n) WITH ('connector' = 'filesystem', "
        f"'path' = '{csv_dir}', 'format' = 'csv'{listed})"
    )


_INTERVAL = re.compile(
    r"INTERVAL\s+'?(\d+)(\.\d+)?'?\s+(SECOND|MINUTE|HOUR|DAY)S?\b(?!\s*\()", re.IGNORECASE
)


def flink_expr(sql: str) -> tuple[str, bool]:
    """Spark SQL expression `sql` in Flink's SQL, and whether it changed: an interval literal
    of more than two digits is written ``DAY TO SECOND``, since Flink (Calcite) gives a unit
    two digits by default, refuses ``INTERVAL '300' SECOND``, and runs no leading precision
    above 3 (``SECOND(4)``: "DAY_INTERVAL_TYPES precision is not supported").

    >>> flink_expr("a.ts - INTERVAL '3600' SECOND < b.ts + INTERVAL 10 SECONDS")
    ("a.ts - INTERVAL '0 01:00:00.000000' DAY TO SECOND < b.ts + INTERVAL '10' SECOND", True)
    """

    def literal(m: re.Match[str]) -> str:
        whole, fraction, unit = m.group(1), m.group(2) or "", m.group(3).upper()
        if len(whole) <= 2:
            return f"INTERVAL '{whole}{fraction}' {unit}"
        us = round(Decimal(whole + fraction) * _UNIT_SECONDS[unit] * 1_000_000)
        seconds, micros = divmod(us, 1_000_000)
        minutes, sec = divmod(seconds, 60)
        hours, minute = divmod(minutes, 60)
        days, hour = divmod(hours, 24)
        return f"INTERVAL '{days} {hour:02d}:{minute:02d}:{sec:02d}.{micros:06d}' DAY TO SECOND"

    out = _INTERVAL.sub(literal, sql)
    return out, out != sql


_UNIT_SECONDS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}


def _interval(ms: int) -> str:
    sign = "+" if ms >= 0 else "-"
    literal, _ = flink_expr(f"INTERVAL '{abs(ms) / 1000:g}' SECOND")
    return f"{sign} {literal}"


def _rowtime_window(q: Query, job: Job) -> str | None:
    """The query's window over the sides' millisecond event times, widened by `_WIDEN_MS`
    (None: no window, or a stream without a watermark)."""
    from streamjoin.plan import classify_predicate

    left, right = job.stream(q.left.stream), job.stream(q.right.stream)
    lt, rt = left.event_time, right.event_time
    if lt is None or rt is None:
        return None
    on = q.outer.on if q.outer is not None else q.predicate
    window = classify_predicate(on, q.left.alias, q.right.alias, lt, rt).window
    if window is None or window.lo_us is None or window.hi_us is None:
        return None  # (Flink's interval join needs both bounds: a regular join then)
    lo_ms, hi_ms = window.lo_us // 1000 - _WIDEN_MS, -(-window.hi_us // 1000) + _WIDEN_MS
    lc, rc = f"{q.left.alias}.`{lt}{ROWTIME_SUFFIX}`", f"{q.right.alias}.`{rt}{ROWTIME_SUFFIX}`"
    return f"{rc} >= {lc} {_interval(lo_ms)} AND {rc} <= {lc} {_interval(hi_ms)}"


def query_select(q: Query, job: Job, traced: bool = False) -> tuple[str, list[str]]:
    """The Flink SELECT of two-way join `q` (`_structured`) and the edits it needed; `traced`:
    with `TRACE_COLUMNS` after its own (a live run's: its sources have `FILE_COLUMN`)."""
    edits = []
    select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
    if traced:
        lf, rf, at = TRACE_COLUMNS
        select += (
            f", {q.left.alias}.`{FILE_COLUMN}` AS `{lf}`, {q.right.alias}.`{FILE_COLUMN}` AS "
            f"`{rf}`, DATE_FORMAT(CURRENT_TIMESTAMP, 'yyyy-MM-dd HH:mm:ss.SSS') AS `{at}`"
        )
    window = _rowtime_window(q, job)
    on, where = (q.predicate, None) if q.outer is None else (q.outer.on, q.outer.where)
    (select, a), (on, b) = flink_expr(select), flink_expr(on)
    where, c = flink_expr(where) if where else (where, False)
    if a or b or c:
        edits.append(f"{q.name}: {_LITERALS_EDIT}")
    if window is not None:
        on = f"({on}) AND {window}"
        edits.append(
            f"{q.name}: the window repeated over the millisecond event times, ±{_WIDEN_MS} ms "
            "(an interval join; the exact window stays in ON)"
        )
    kind = "JOIN" if q.outer is None else f"{q.outer.kind.upper()} JOIN"
    sql = (
        f"SELECT {select} FROM `{q.left.stream}` AS {q.left.alias} {kind} "
        f"`{q.right.stream}` AS {q.right.alias} ON {on}"
    )
    return sql + (f" WHERE {where}" if where else ""), edits


_INSERT = re.compile(r"INSERT\s+INTO\s+\S+\s+(.*?)\s*;", re.IGNORECASE | re.DOTALL)
_DESCRIPTOR = re.compile(r"DESCRIPTOR\(\s*`?(\w+)`?\s*\)", re.IGNORECASE)


def written_select(text: str, line: int) -> str:
    """The SELECT of the ``INSERT INTO`` statement at `line` (1-based) of job `text`, as the job
    file writes it; ValueError when no INSERT starts on that line."""
    for m in _INSERT.finditer(text):
        if text.count("\n", 0, m.start()) + 1 == line:
            return m.group(1)
    msg = f"flink: no INSERT INTO statement on line {line} of the job"
    raise ValueError(msg)


FLINK_RESERVED = frozenset({"datetime"})
"""Column names Flink 2.3's SQL parser takes for a keyword unless back-quoted (of Nexmark's 20
columns, measured one by one: ``dateTime`` alone)."""

_LITERAL = re.compile(r"('(?:[^']|'')*')")


def quote_reserved(sql: str, columns: t.Iterable[str]) -> str:
    """`sql` with each of `columns` that Flink reserves (`FLINK_RESERVED`) back-quoted where
    it stands bare, outside string literals."""
    words = [c for c in columns if c.lower() in FLINK_RESERVED]
    if not words:
        return sql
    bare = re.compile(r"(?<![`\w])(" + "|".join(map(re.escape, words)) + r")(?![`\w])")
    parts = _LITERAL.split(sql)  # (odd parts: the literals, kept as they are)
    return "".join(p if i % 2 else bare.sub(r"`\1`", p) for i, p in enumerate(parts))


def written_query(q: Query | GroupQuery, job: Job, text: str) -> tuple[str, list[str]]:
    """The SELECT of `q` as the job writes it, in Flink's SQL: a window table function's
    ``DESCRIPTOR`` names the millisecond copy of a stream's event time (Flink's time attribute;
    the same windows, for a window's width is whole milliseconds), interval literals as
    `flink_expr` writes them, a column Flink's parser reserves back-quoted. And the edits this
    made."""
    written = written_select(text, q.line)
    select, literals = flink_expr(written)
    edits = [f"{q.name}: {_LITERALS_EDIT}"] if literals else []
    columns = {c.name for s in job.streams for c in s.columns}
    quoted = quote_reserved(select, columns)
    if quoted != select:
        words = ", ".join(sorted(c for c in columns if c.lower() in FLINK_RESERVED))
        edits.append(f"{q.name}: {words} back-quoted (reserved in Flink's SQL)")
        select = quoted
    times = {s.watermark.column for s in job.streams if s.watermark is not None}

    def attribute(m: re.Match[str]) -> str:
        return f"DESCRIPTOR(`{m.group(1)}{ROWTIME_SUFFIX}`)" if m.group(1) in times else m.group(0)

    windowed = _DESCRIPTOR.sub(attribute, select)
    if windowed != select:
        edits.append(
            f"{q.name}: window functions over the millisecond event times (DESCRIPTOR(… "
            f"{ROWTIME_SUFFIX})), Flink's time attributes: the same windows"
        )
    return windowed, edits


def _structured(q: Query) -> bool:
    """Whether `q` is a two-way join `query_select` writes (else the job's own text is run)."""
    return not q.multiway and q.windowed is None and q.rollup is None


def translate(
    job: Job,
    csv_dirs: t.Mapping[str, str],
    sink_root: str,
    text: str | None = None,
    monitor: str | None = None,
) -> FlinkJob:
    """`job` in Flink SQL over the CSV copies `csv_dirs` (by stream), each query's rows written
    under `sink_root`. A two-way join is written from its parts (`query_select`); any other
    query (an aggregation, a top-N, a multi-way join, one stream's groups) is run as the job's
    `text` writes it (`written_query`), which Flink's SQL mostly shares (Nexmark's queries
    are Flink's); without `text`, a ValueError names such a query. With `monitor` (a live
    run's listing interval, `source_ddl`) every query is a traced two-way join, or a
    ValueError names it."""
    read = "CSV copies of its Parquet files" if monitor is None else "the feed's CSV files"
    edits = [
        f"stream {s.name}: read from {read} (Flink 2.3 bundles no Parquet format)"
        for s in job.streams
    ]
    edits += [
        f"stream {s.name}: watermark on {s.watermark.column}{ROWTIME_SUFFIX} = "
        f"CAST({s.watermark.column} AS TIMESTAMP(3)) (Flink's event time has millisecond "
        f"precision); {s.watermark.column} stays TIMESTAMP(6)"
        for s in job.streams
        if s.watermark is not None
    ]
    selects, sinks, outputs, keys = {}, {}, {}, {}
    every: list[Query | GroupQuery] = [*job.queries, *job.group_queries]
    for q in every:
        if monitor is not None and (isinstance(q, GroupQuery) or not _structured(q)):
            msg = (
                f"flink: query {q.name} is not a two-way join; a live run (--rate) times each "
                "result by the files of its two rows"
            )
            raise ValueError(msg)
        if isinstance(q, GroupQuery) or not _structured(q):
            if text is None:
                msg = f"flink: query {q.name} is run from the job's text, which was not given"
                raise ValueError(msg)
            selects[q.name], more = written_query(q, job, text)
            if isinstance(q, Query) and q.multiway:
                more.append(
                    f"{q.name}: a multi-way join as written, which Flink runs as regular joins "
                    "(state kept for good; its interval join takes two inputs)"
                )
            if key := upsert_key(q):
                keys[q.name] = key
        else:
            selects[q.name], more = query_select(q, job, traced=monitor is not None)
            if monitor is not None:
                more.append(
                    f"{q.name}: each result with its rows' file names and the time Flink made it "
                    "(CURRENT_TIMESTAMP, evaluated per row), which time it; not in its output"
                )
        sinks[q.name] = f"{sink_root}/{q.name}"
        outputs[q.name] = _out_path(job, q)
        edits += more
    if monitor is not None:
        edits += [
            f"stream {s.name}: a live feed's folder, listed for new files every {monitor}"
            for s in job.streams
        ]
    sources = tuple(source_ddl(s, csv_dirs[s.name], monitor) for s in job.streams)
    return FlinkJob(sources, selects, sinks, outputs, tuple(edits), keys)
