"""``GROUP BY window`` queries in a batch (`plan.aggregate`, `plan.groups`): their joins' new
rows, or their streams' rows, go to their buffers, and the windows the batch's watermark closes
are aggregated from the buffers for the sinks (two streams' groups joined first). A buffer unit
is written under the batch's id and overwritten by a replay; the manifest says which units are
live and up to which window end the groups were emitted."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.batch.context import view_tag
from streamjoin.runtime.state.manifest import GroupState, GroupUnit

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.plan import JobPlan
    from streamjoin.plan.aggregate import GroupBuffer
    from streamjoin.runtime.batch.context import BatchContext, Scratch
    from streamjoin.runtime.batch.heldgroups import HeldGroups
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.manifest import Manifest
    from streamjoin.runtime.state.stores import StoreViews


@dataclass
class Closing:
    """What a batch emits of its GROUP BY queries, and their buffers after it."""

    frames: dict[str, DataFrame] = field(default_factory=dict)
    """Per query, the groups of the windows the batch closed (none: no window closed)."""
    spans: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    """Per buffer in `frames`, the window ends it closed: ``(after, upto]`` (None: unbounded)."""
    states: dict[str, GroupState] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    """Units whose windows have all been emitted (deleted once no replay needs them)."""


def buffer_rows(
    plan: JobPlan,
    frames: dict[str, list[DataFrame]],
    reading: tuple[SparkSession, Checkpoint, int],
    held: HeldGroups,
) -> dict[str, GroupUnit]:
    """Take each GROUP BY query's new joined rows out of `frames` and write them to the query's
    buffer unit of the batch (every buffer's in one job), held in memory too; the units written
    (none for a query without new rows)."""
    spark, checkpoint, batch_id = reading
    buffered = []
    for ap in plan.buffers:
        parts = frames.pop(ap.name, [])
        if not parts:
            continue
        rows = parts[0]
        for p in parts[1:]:
            rows = rows.unionAll(p)
        buffered.append((ap, rows))
    return held.write_all(spark, buffered, batch_id, checkpoint) if buffered else {}


def close_windows(
    plan: JobPlan,
    prev: Manifest,
    new: dict[str, GroupUnit],
    watermark: int | None,
    reading: tuple[SparkSession, Scratch, Checkpoint, int],
    held: HeldGroups,
    *,
    final: bool = False,
) -> Closing:
    """The groups of each window that `watermark` (the one the batch leaves) closes, or with
    `final` of every window still open, and the buffers after them."""
    spark, _, checkpoint, _ = reading
    out = Closing()
    current = {ap.name: ap.buffer_signature for ap in plan.buffers}
    current |= {rp.state_name: rp.signature for rp in plan.rollups}  # (`batch.rollup`'s)
    for name, old in prev.groups.items():
        if current.get(name) != old.signature:  # (a query dropped or changed: its buffer goes)
            out.dropped += [u.path for u in old.units]
            held.drop(spark, name)
    for ap in plan.buffers:
        signature = ap.buffer_signature
        state = prev.groups.get(ap.name)
        if state is None or state.signature != signature:
            state = GroupState(_first_open(plan, ap, prev), [], signature)
        elif state.closed is not None:
            # (Rows in committed closed windows only: a batch run again closes no earlier one.)
            held.forget(spark, ap, state.closed)
        units = state.units + ([new[ap.name]] if ap.name in new else [])
        after = state.closed
        upto = None if final else ap.closed_below(watermark)
        if not final and (upto is None or (after is not None and _last_end(ap, upto) <= after)):
            # (No window ends in (after, upto]: none closes.)
            out.states[ap.name] = GroupState(after, units, signature)
            continue
        chosen = _overlapping(ap, units, after, upto)
        if chosen:
            out.frames[ap.name] = held.groups(spark, ap, chosen, (after, upto), checkpoint)
            out.spans[ap.name] = (after, upto)
        closed = after if upto is None else upto
        live = [] if final else _overlapping(ap, units, closed, None)
        out.dropped += [u.path for u in units if u not in live]
        out.states[ap.name] = GroupState(closed, live, signature)
    return out


def _last_end(ap: GroupBuffer, upto: int) -> int:
    """The end of the last window ending at or before `upto` (windows start at multiples of the
    slide, as Spark's)."""
    size, slide = ap.window.size_us, ap.window.slide_us
    return (upto - size) // slide * slide + size


def _overlapping(
    ap: GroupBuffer, units: Sequence[GroupUnit], after: int | None, upto: int | None
) -> list[GroupUnit]:
    """The units that may hold rows of a window ending in ``(after, upto]`` (None: unbounded)."""
    lo = None if after is None else ap.first_needed(after)
    return [
        u for u in units if (lo is None or u.max_ts >= lo) and (upto is None or u.min_ts < upto)
    ]


def stream_rows(
    ctx: BatchContext, deltas: Mapping[str, str], held: HeldGroups
) -> dict[str, list[DataFrame]]:
    """The rows of the batch each group query's input buffers: from the batch's rows by a plan
    made once (`HeldGroups.planned_rows`), else from its stream's delta."""
    out = {}
    for gq in ctx.plan.group_queries:
        for i, (group, buffer) in enumerate(zip(gq.query.inputs, gq.inputs, strict=True)):
            rows = held.planned_rows(ctx, gq, i)
            if rows is None:
                rows = ctx.spark.sql(gq.rows_sql(i, deltas[group.stream]))
            out[buffer.name] = [rows]
    return out


RowsOf = t.Callable[[str, "int | None"], str]
"""A relation (SQL text) of a stream's rows the batch knows, committed and its own, from an
event time on (None: all it keeps)."""


def rows_reader(
    spark: SparkSession,
    plan: JobPlan,
    prev: Manifest,
    stores: StoreViews,
    deltas: Mapping[str, str] | None,
    views: list[str],
) -> RowsOf:
    """What reads a stream's rows for the groups they join: its committed state (`prev`)
    read from the units' files, and its rows of the batch (`deltas`; none in a last batch)."""

    def rows_of(stream: str, least: int | None) -> str:
        delta = None if deltas is None else deltas[stream]
        return stores.state(spark, plan.stream(stream), prev, least, delta, views, cached=False)

    return rows_of


def group_outputs(
    plan: JobPlan,
    closing: Closing,
    scratch: Scratch,
    reading: tuple[SparkSession, int],
    rows_of: RowsOf,
    held: HeldGroups,
) -> None:
    """Replace, in `closing.frames`, each group query's inputs' groups by the query's rows:
    its one input's groups, the join of its two inputs', or its stream's rows joined with its
    groups, from those `rows_of` gives (none while an input has no group); as an RDD's rows,
    which the sinks' one write job takes (`HeldGroups.as_rows`)."""
    spark, batch_id = reading
    for gq in plan.group_queries:
        parts = [closing.frames.pop(b.name, None) for b in gq.inputs]
        if any(p is None for p in parts):
            continue
        planned = held.output(spark, gq)
        if planned is not None:
            closing.frames[gq.name] = planned
            continue
        views = tuple(
            scratch.view(t.cast("DataFrame", p), f"sj_{view_tag(b.name, batch_id)}")
            for p, b in zip(parts, gq.inputs, strict=True)
        )
        rows = None
        if gq.query.rows is not None and gq.rows is not None:
            after, _ = closing.spans[gq.inputs[0].name]
            rows = rows_of(gq.query.rows.stream, gq.rows.least(after))
        closing.frames[gq.name] = held.as_rows(spark, spark.sql(gq.output_sql(views, rows)))


def _first_open(plan: JobPlan, ap: GroupBuffer, prev: Manifest) -> int | None:
    """For a query new to the run: the windows it may not answer for end at or before this.
    The rows of earlier batches, never buffered for it, have event times up to the newest its
    time column's stream had seen, so only the windows starting after it are complete (None:
    the run's first batch, nothing was seen)."""
    stream = plan.stream(ap.time_stream).stream
    seen, mark = prev.stream_wm.get(stream.name), stream.watermark
    if seen is None or mark is None:
        return None
    if not ap.window.by_event_time(stream):
        # (Groups per row closed by a column, `sql.rowgroups`: a row read before the query
        # has its groups anywhere in that column, and pairs the query never saw.)
        msg = (
            f"query {ap.name}: its groups per row of {stream.name!r}, complete when the "
            f"watermark passes {ap.window.time}, cannot start in a run that has read rows of "
            f"{stream.name!r} (their groups would miss the pairs made before): start it with "
            "a new checkpoint"
        )
        raise StreamJoinError(msg)
    first = seen + mark.delay_us + ap.window.size_us
    for gq in plan.group_queries:
        mine = gq.query.rows
        if ap not in gq.inputs or mine is None or gq.rows is None:
            continue
        # (Its groups pair with rows from ``e + lo`` on: the rows its stream had read before
        # it, up to the newest seen, were not kept for it.)
        rows = plan.stream(mine.stream).stream
        read = prev.stream_wm.get(rows.name)
        if read is not None and rows.watermark is not None:
            first = max(first, read + rows.watermark.delay_us - gq.rows.lo_us)
    return first
