"""A batch's input rows sorted into ok, late and malformed, and the rejected ones written out.

Every row of the unified input (`sources`) gets a status: ``malformed`` (unparsable, or no event
time, or one outside Spark's timestamp range, on a stream with a watermark), ``late`` (event time
behind the watermark the batch started with) or ``ok``; the join and the state take the ok rows,
the dead-letter directory of each stream the others, with the reason.
"""

from __future__ import annotations

import typing as t
from functools import partial

from pyspark.sql import functions as F

from streamjoin.runtime.sources import REPLACEMENT, prefixed
from streamjoin.runtime.state.sqlvalues import as_decimal, batch_constant
from streamjoin.runtime.threads import Background

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pyspark.sql import DataFrame

    from streamjoin.plan import JobPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.nextmanifest import StreamStats


EVENT_TIME_RANGE = (-62_135_596_800_000_000, 253_402_300_799_999_999)
"""The event times (epoch microseconds) a row may have: Spark's documented timestamp range,
0001-01-01 to 9999-12-31 UTC. Spark parses years beyond it, but one such row would move the
watermark past every later row (or out of the decimal the late test compares in)."""

NOT_UTF8 = "invalid UTF-8 (or U+FFFD) in the record"
"""The dead-letter reason of a record that held bytes that are not UTF-8 (`sources.raw_sql`)."""

OUT_OF_RANGE = "event time outside 0001-01-01 to 9999-12-31"
"""The dead-letter reason of a row whose event time is outside `EVENT_TIME_RANGE`."""


def _tests(timed: Sequence[int], watermark: int | None) -> tuple[str, str, str]:
    """SQL of the late, the null-event-time and the event-time-out-of-range tests of a unified
    input row."""
    late = "FALSE" if watermark is None else f"{as_decimal('_sj_ts')} < {batch_constant(watermark)}"
    if not timed:
        return late, "FALSE", "FALSE"
    streams = f"_sj_src IN ({', '.join(map(str, timed))})"
    low, high = EVENT_TIME_RANGE
    outside = f"{streams} AND _sj_ts NOT BETWEEN {low} AND {high}"
    return late, f"{streams} AND _sj_ts IS NULL", outside


def status_sql(timed: Sequence[int], watermark: int | None) -> str:
    """SQL of a unified input row's status (ok / late / malformed), for the streams `timed`
    (their indexes) having event times and a batch that started at `watermark`. (The state of
    a file stream read back from its files takes its rows by the same test,
    `runtime.state.stores`.)"""
    late, null_ts, out_of_range = _tests(timed, watermark)
    return (
        f"CASE WHEN _sj_raw IS NOT NULL THEN 'malformed' WHEN {null_ts} THEN 'malformed' "
        f"WHEN {out_of_range} THEN 'malformed' WHEN {late} THEN 'late' ELSE 'ok' END"
    )


def classify(df: DataFrame, plan: JobPlan, watermark: int | None) -> DataFrame:
    """`df` with ``_sj_status`` (ok / late / malformed) and ``_sj_reason`` for the others."""
    timed = [sp.index for sp in plan.streams if sp.stream.watermark]
    late, null_ts, out_of_range = _tests(timed, watermark)
    status = status_sql(timed, watermark)
    reason = (
        f"CASE WHEN instr(_sj_raw, '{REPLACEMENT}') > 0 OR NOT is_valid_utf8(_sj_raw) "
        f"THEN '{NOT_UTF8}' "
        "WHEN _sj_raw IS NOT NULL THEN 'unparsable record or wrong type' "
        f"WHEN {null_ts} THEN 'null event time' "
        f"WHEN {out_of_range} THEN '{OUT_OF_RANGE}' "
        + (
            f"WHEN {late} THEN concat('late: event time behind the watermark ', "
            f"CAST(timestamp_micros({watermark}) AS STRING)) "
            if watermark is not None
            else ""
        )
        + "END"
    )
    return df.select("*", F.expr(status).alias("_sj_status"), F.expr(reason).alias("_sj_reason"))


def write_deadletters(
    classified: DataFrame,
    plan: JobPlan,
    store: Checkpoint,
    batch_id: int,
    rejected: Mapping[str, int],
) -> None:
    """Write each stream's late and malformed rows (`rejected` counts them) as JSON lines under
    its dead-letter directory, one directory per batch (replaced when the batch is replayed);
    the streams' writes at once (each a job, mostly fixed cost)."""
    writes = []
    for sp in plan.streams:
        if not rejected.get(sp.name):
            continue
        cols = [F.col(prefixed(sp.index, c.name)).alias(c.name) for c in sp.stream.columns]
        bad = classified.where((F.col("_sj_src") == sp.index) & (F.col("_sj_status") != "ok"))
        rows = bad.select(
            F.lit(sp.name).alias("stream"),
            F.lit(batch_id).alias("batch"),
            F.col("_sj_status").alias("kind"),
            F.col("_sj_reason").alias("reason"),
            F.coalesce(F.col("_sj_raw"), F.to_json(F.struct(*cols))).alias("record"),
            F.expr("timestamp_micros(_sj_ts)").alias("event_time"),
        )
        path = f"{store.deadletter_dir(sp.stream)}/batch={batch_id}"
        writes.append(Background(partial(rows.write.mode("overwrite").json, path)))
    for write in writes:
        write.wait()  # (every write ended before an error is raised)
    for write in writes:
        write.result()


def start_deadletters(
    ctx: BatchContext,
    plan: JobPlan,
    store: Checkpoint,
    statistics: Callable[[], Mapping[str, StreamStats]],
    known: Mapping[str, StreamStats] | None = None,
) -> Background | None:
    """Batch `ctx`'s late and malformed rows written (`write_deadletters`) beside its sinks,
    once `statistics` tells which streams have any: each write is a job whose fixed cost would
    otherwise add to the batch's, and both replace what a replay of the batch wrote before, so
    neither waits for the other. The batch waits for it before its commit. (The batch's
    classified rows only where some were rejected: footers that give the statistics prove
    every row ok, and the state job that gives them otherwise has classified them.) None:
    the statistics are `known` from the footers, which prove every row ok
    (`StateJob.from_footers`): no thread is started for nothing."""
    if known is not None:
        return None

    def write() -> None:
        rejected = {name: st.late + st.malformed for name, st in statistics().items()}
        if any(rejected.values()):
            write_deadletters(ctx.classified(), plan, store, ctx.batch_id, rejected)

    letters = Background(write)
    ctx.scratch.running.append(letters)  # (a failed batch's writes end before a rerun's)
    return letters
