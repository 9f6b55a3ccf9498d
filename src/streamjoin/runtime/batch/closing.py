"""The windows a batch closes (GROUP BY queries, their rollups) and each outer join's rows without
a partner it decides; in the last batch of an input declared finished (``--final``), every one
still open (`nextmanifest.leaving_watermark`)."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.batch.context import Scratch
from streamjoin.runtime.batch.groups import (
    Closing,
    RowsOf,
    buffer_rows,
    close_windows,
    group_outputs,
    rows_reader,
    stream_rows,
)
from streamjoin.runtime.batch.outer import add_unmatched
from streamjoin.runtime.batch.rollup import roll_up
from streamjoin.runtime.state.nextmanifest import leaving_watermark

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.plan import JobPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.heldgroups import HeldGroups
    from streamjoin.runtime.batch.indexreads import ProbeReads
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.manifest import Manifest
    from streamjoin.runtime.state.nextmanifest import StreamStats
    from streamjoin.runtime.state.stores import StoreViews

Reading = tuple["SparkSession", Scratch, "Checkpoint", int]
"""What a batch reads with: its session, its scratch, the checkpoint and the batch's id."""


Kept = tuple["ProbeReads", "StoreViews", "HeldGroups", "Checkpoint"]
"""What the processor keeps across batches that closing reads: the probes' reads, the state's
views, the GROUP BY buffers' rows and the checkpoint."""


def close_batch(
    ctx: BatchContext,
    frames: dict[str, list[DataFrame]],
    deltas: Mapping[str, str],
    statistics: Callable[[], dict[str, StreamStats]],
    kept: Kept,
) -> Closing | None:
    """The end of a batch's joins: add to `frames` the rows of the streams that GROUP BY
    queries join with their groups, each outer join's rows without a partner and the windows
    closed, decided by the watermark the batch leaves (from its `statistics`; past every row
    in a final batch). The windows' closing (None: the job keeps no window and no outer
    join)."""
    plan, spark = ctx.plan, ctx.spark
    reads, stores, held, checkpoint = kept
    if plan.group_queries:
        frames |= stream_rows(ctx, deltas, held)
    if not (plan.buffers or plan.outers):
        return None
    watermark = leaving_watermark(plan, ctx.prev, statistics(), final=ctx.final)
    add_unmatched(ctx, frames, reads, stores, deltas, watermark)
    reading = (spark, ctx.scratch, checkpoint, ctx.batch_id)
    rows_of = rows_reader(spark, plan, ctx.prev, stores, deltas, ctx.scratch.views)
    closing = close_batch_windows(
        plan, ctx.prev, frames, watermark, reading, held, rows_of, final=ctx.final
    )
    frames |= {n: [frame] for n, frame in closing.frames.items()}
    return closing


def close_batch_windows(
    plan: JobPlan,
    prev: Manifest,
    frames: dict[str, list[DataFrame]],
    watermark: int | None,
    reading: Reading,
    held: HeldGroups,
    rows_of: RowsOf,
    *,
    final: bool = False,
) -> Closing:
    """Buffer the GROUP BY queries' new rows (out of `frames`) and aggregate the windows that
    `watermark`, the one the batch leaves, closes (every window, when `final`); a stream's
    rows that a query joins with its groups are those `rows_of` gives."""
    spark, scratch, checkpoint, batch_id = reading
    units = buffer_rows(plan, frames, (spark, checkpoint, batch_id), held)
    closing = close_windows(plan, prev, units, watermark, reading, held, final=final)
    group_outputs(plan, closing, scratch, (spark, batch_id), rows_of, held)
    roll_up(plan, prev, closing, reading)
    return closing
