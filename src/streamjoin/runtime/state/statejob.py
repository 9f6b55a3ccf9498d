"""Step 2 of a batch (`runtime.batch.processor`): the streams' new state units, and the batch's
statistics.

One Spark job reads the batch's classified input once. It writes the ok rows of every stream that
keeps a copy of its state (Parquet under the checkpoint, one directory per stream and batch), and
observes on the way, per stream, the ok / late / malformed counts and the ok rows' event-time
range (which feed watermarks, pruning and counters) and, for queries on the automatic hash path,
each side's rows per unit (`runtime.routing.unitcounts`). A stream whose state is read back from
its own input files (`runtime.state.sourcefiles`) writes nothing: its unit is the files Spark's
logs name. When no stream writes, the statistics are a plain aggregate; and when every stream's
units are its files and their footers prove every row ok (`runtime.state.footers`), they are the
footers' and no job runs (the batches that count rows per unit count them from the files' keys:
`adapt.skewcheck.checks_skew`).
"""

from __future__ import annotations

import typing as t
from dataclasses import replace
from functools import partial

from pyspark.sql import Observation
from pyspark.sql import functions as F

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.sources import prefixed
from streamjoin.runtime.state.inputrows import count_input_rows
from streamjoin.runtime.state.manifest import StateUnit
from streamjoin.runtime.state.nextmanifest import StreamStats
from streamjoin.runtime.threads import Background

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.plan import JobPlan, StreamPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.routing.router import QueryRouter
    from streamjoin.runtime.routing.unitcounts import InputUnitCounts
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.footers import Footers
    from streamjoin.runtime.state.sourcefiles import BatchFiles


LEAST = -(2**63)
"""The least long: a unit's `bound` when every row's expiry column is NULL."""


class StateJob:
    """The state job of each batch of one job plan."""

    def __init__(
        self, plan: JobPlan, store: Checkpoint, source_log: BatchFiles | None = None
    ) -> None:
        self.plan = plan
        self.store = store
        self.source_log = source_log
        """Where the files of streams whose state is read back from them are named
        (`runtime.state.sourcefiles`; None: every stream keeps a copy)."""

    def run(
        self,
        classified: DataFrame,
        batch_id: int,
        watermark: int | None,
        input_units: InputUnitCounts,
        routers: Mapping[str, QueryRouter],
        files: Mapping[str, list[str]],
    ) -> dict[str, StreamStats]:
        """Append every copied stream's ok rows of the batch `classified` (which started at
        `watermark`) to its state in one Spark job, observing per stream the ok / late /
        malformed counts and the ok rows' event-time range on the way, and `input_units`'
        rows per unit for the queries of `routers`. The streams in `files` (`batch_files`)
        keep their units in those files instead."""
        aggs = []
        for sp in self.plan.streams:
            i, ok = sp.index, f"_sj_src = {sp.index} AND _sj_status = 'ok'"
            aggs += [
                F.expr(f"count_if({ok})").alias(f"ok_{i}"),
                F.expr(f"count_if(_sj_src = {i} AND _sj_status = 'late')").alias(f"late_{i}"),
                F.expr(f"count_if(_sj_src = {i} AND _sj_status = 'malformed')").alias(f"bad_{i}"),
                F.expr(f"min(CASE WHEN {ok} THEN _sj_ts END)").alias(f"lo_{i}"),
                F.expr(f"max(CASE WHEN {ok} THEN _sj_ts END)").alias(f"hi_{i}"),
            ]
            if sp.expiry is not None:  # (a NULL lets its row go at once: the least long)
                c = f"coalesce(unix_micros(`{prefixed(i, sp.expiry.column)}`), {LEAST})"
                aggs.append(F.expr(f"max(CASE WHEN {ok} THEN {c} END)").alias(f"bound_{i}"))
        units = input_units.columns()
        if units:
            classified = classified.select("*", *units)
            aggs += input_units.aggregates(routers)
        # Streams whose files Spark's logs name keep their units there, not in a copy.
        copied = [sp for sp in self.plan.streams if sp.name not in files]
        if copied:
            obs = Observation(f"sj_input_{batch_id}")
            self._write_state(classified.observe(obs, *aggs), copied, batch_id)
            got = obs.get
        else:
            # Nothing to write: a plain aggregate, which Spark compiles (an observation's
            # aggregates are interpreted row by row).
            got = classified.agg(*aggs).collect()[0].asDict()
        input_units.read(got, routers)
        stats = {}
        for sp in self.plan.streams:
            i = sp.index
            s = StreamStats(
                ok=int(got[f"ok_{i}"]),
                late=int(got[f"late_{i}"]),
                malformed=int(got[f"bad_{i}"]),
                min_ts=got[f"lo_{i}"],
                max_ts=got[f"hi_{i}"],
            )
            if s.ok:
                bound = got.get(f"bound_{i}") if sp.expiry is not None else None
                unit = StateUnit(sp.name, batch_id, s.ok, s.min_ts, s.max_ts)
                unit = _bounded(unit, sp, bound)
                if sp.name in files:
                    whole = s.late == 0 and s.malformed == 0
                    unit = self._sourced_unit(unit, sp, files[sp.name], watermark, whole)
                else:
                    # One metadata call per stream: the bytes per unit in the statistics.
                    unit = replace(unit, bytes=self.store.fs.size(self.store.path(unit.path)))
                s.unit = unit
            stats[sp.name] = s
        return stats

    def from_footers(
        self,
        streaming: SparkSession,
        batch_id: int,
        watermark: int | None,
        files: Mapping[str, list[str]],
        footers: Mapping[str, Footers],
        *,
        counted: bool = False,
        idle: frozenset[str] = frozenset(),
    ) -> dict[str, StreamStats] | None:
        """The statistics of batch `batch_id` (which started at `watermark`) from its `files'`
        `footers` (`runtime.state.footers`), with Spark's count of the batch's input rows set from
        them (`streaming` started the stream) unless a job of the batch reads them (`counted`);
        or None when this job must run: some stream copies its state, the footers do not prove
        every row ok, or Spark's plan could not take the count. (A job is a fixed cost: its
        planning, its scheduling and a scan of every column of the batch's input.) A stream of
        `idle` read no file in the batch: it has no row, and needs no footer."""
        if any(footers.get(sp.name) is None and sp.name not in idle for sp in self.plan.streams):
            return None
        stats = {}
        for sp in self.plan.streams:
            if sp.name not in footers:  # (idle)
                stats[sp.name] = StreamStats()
                continue
            f = footers[sp.name]
            if not f.all_ok(watermark) or (sp.expiry is not None and f.bound is None):
                return None
            ok = f.total
            s = StreamStats(ok=ok, min_ts=f.least, max_ts=f.greatest)
            if ok:
                unit = _bounded(StateUnit(sp.name, batch_id, ok, f.least, f.greatest), sp, f.bound)
                s.unit = self._sourced_unit(unit, sp, files[sp.name], watermark, whole=True)
            stats[sp.name] = s
        rows = {file: n for f in footers.values() for file, n in f.rows.items()}
        return stats if counted or count_input_rows(streaming, rows) else None

    def start(
        self, streaming: SparkSession, ctx: BatchContext, *, counted: bool
    ) -> tuple[dict[str, StreamStats] | None, Callable[[], dict[str, StreamStats]]]:
        """Batch `ctx`'s statistics where its footers tell them (a final batch has no rows),
        and a call that returns them: those, or this job's, started here beside the joins
        (`streaming` started the stream; `counted`: a job of the batch reads its rows, which
        Spark counts)."""
        if ctx.final:  # (no rows: no state to write)
            none = {sp.name: StreamStats() for sp in self.plan.streams}
            return none, lambda: none
        args = (ctx.batch_id, ctx.watermark, ctx.files, ctx.footers)
        known = self.from_footers(streaming, *args, counted=counted, idle=ctx.idle)
        if known is not None:
            return known, lambda: known
        append = partial(self.run, ctx.classified(), ctx.batch_id, ctx.watermark)
        job = Background(lambda: append(ctx.counted, ctx.routers, ctx.files))
        ctx.scratch.running.append(job)  # (a failed batch's own write ends before a rerun's)
        return None, job.result

    def batch_files(self, batch_id: int) -> dict[str, list[str]]:
        """Per stream whose state is read back from its input files, the files batch
        `batch_id` reads (`runtime.state.sourcefiles.SourceLog`); the others are left out."""
        return self.source_log.files(batch_id) if self.source_log is not None else {}

    def batch_idle(self, batch_id: int) -> frozenset[str]:
        """The streams of `batch_files` that batch `batch_id` is known to read no file of."""
        return self.source_log.idle(batch_id) if self.source_log is not None else frozenset()

    def _write_state(self, classified: DataFrame, streams: list[StreamPlan], batch_id: int) -> None:
        """Write the ok rows of `streams` as this batch's state units, in one job."""
        names = " ".join(f"WHEN {sp.index} THEN '{sp.name}'" for sp in streams)
        data = [prefixed(sp.index, c.name) for sp in self.plan.streams for c in sp.stream.columns]
        ok = F.col("_sj_status") == "ok"
        if len(streams) < len(self.plan.streams):
            ok = ok & F.col("_sj_src").isin([sp.index for sp in streams])
        # State files keep the unified column names of every stream (all NULL but the owner's,
        # which Parquet stores in a few bytes): one write serves all streams.
        classified.where(ok).select(
            *data, F.expr(f"CASE _sj_src {names} END").alias("sj_stream")
        ).write.mode("overwrite").partitionBy("sj_stream").option(
            # State files are read back a few times and dropped: dictionary pages cost more to
            # build (hash maps per column, a profile's top item) than they save.
            "parquet.enable.dictionary",
            "false",
        ).parquet(self.store.batch_dir(batch_id))

    def _sourced_unit(
        self,
        unit: StateUnit,
        sp: StreamPlan,
        files: list[str],
        watermark: int | None,
        whole: bool,
    ) -> StateUnit:
        """`unit` kept as the stream's input `files` it was read from
        (`runtime.state.sourcefiles`); `whole`: every row of them was ok."""
        sizes = [self.store.fs.file_size(f) for f in files]
        gone = [f for f, n in zip(files, sizes, strict=True) if n is None]
        if gone:
            msg = (
                f"stream {sp.name!r}: input file {gone[0]} went away as batch {unit.batch} read it"
            )
            raise StreamJoinError(msg)
        known = [n or 0 for n in sizes]
        return replace(
            unit,
            files=tuple(files),
            sizes=tuple(known),
            watermark=watermark,
            bytes=sum(known),
            whole=whole,
        )


def _bounded(unit: StateUnit, sp: StreamPlan, bound: int | None) -> StateUnit:
    """`unit` with the greatest value of `sp`'s expiry column over its rows (none without)."""
    if sp.expiry is None or bound is None:
        return unit
    return replace(unit, bound=bound, bound_of=sp.expiry.column)
