"""The rows of GROUP BY and top-N buffers held in the driver's memory by pane (``GroupRows.java``):
a batch's unit is written by the tasks that make its rows, which hand them back, and a closing
window reads its panes' rows from memory instead of every live unit from the checkpoint. The
units stay the durable state; a unit not held (after a restart, or written by Spark's writer on
a cluster) is read back once, by the close that first needs it. A GROUP BY over a stream takes
its rows of each batch from the batch's own rows by a projection and filter planned once per
buffer (`planned_rows`). Where a buffer's aggregates merge from partial ones (`plan.partials`),
a batch's rows are folded per pane and key before they are written and held (`folded`)."""

from __future__ import annotations

import typing as t
import uuid

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from streamjoin.plan.aggregate import AFTER, END, UPTO
from streamjoin.runtime.batch import indexplans
from streamjoin.runtime.batch.panefolds import PaneFolds, over
from streamjoin.runtime.jvm.statics import StaticMethods
from streamjoin.runtime.state.manifest import GroupUnit
from streamjoin.runtime.threads import metrics

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import SparkSession

    from streamjoin.plan.aggregate import GroupBuffer
    from streamjoin.plan.groups import GroupQueryPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.state.checkpoint import Checkpoint

_LEAST, _MOST = -(2**63), 2**63 - 1
_BATCH = "_sj_unit_batch"
_ONE_PARTITION_BYTES = "spark.sql.maxSinglePartitionBytes"


class HeldGroups:
    """One processor's held buffer rows (none where the run has no streamjoin jar:
    ``STREAMJOIN_LOCAL=off``; then every close reads its units)."""

    def __init__(self) -> None:
        self._prefix = f"sj-groups-{uuid.uuid4().hex[:12]}/"
        self._jvm: t.Any = None
        self._local: bool | None = None
        self._planned: dict[str, DataFrame | None] = {}
        """Each buffer's groups over the rows handed at a close, planned once (`groups`)."""
        self._inputs: dict[str, t.Any] = {}
        """Each buffer of a stream's rows → the ``BatchInput`` of its rows of a batch (False:
        none can be planned once; `planned_rows`)."""
        self._folds = PaneFolds()
        self._outputs: dict[str, DataFrame | None] = {}
        """Each group query of groups alone (one stream's, or two joined), by its inputs' keys →
        its rows from their closes planned once (`output`; None: planned at each close)."""

    def planned_rows(self, ctx: BatchContext, gq: GroupQueryPlan, i: int) -> DataFrame | None:
        """Input `i` of group query `gq`: its stream's rows of the batch to buffer, late ones
        left out, made from the rows Spark planned for the batch in the batch's tasks by a plan
        made once per buffer and layout (``BatchInput.onTime``: the batch plans nothing for
        them); None where the batch's rows are not rows Spark planned, or the rows' plan
        cannot be made once (the current time in its WHERE, say)."""
        if self._groups(ctx.spark) is None:
            return None
        key = self._key(gq.inputs[i])
        made = indexplans.planned_once(self._inputs, key, ctx, lambda: self._plan_rows(ctx, gq, i))
        if made is None:
            return None
        late = _LEAST if ctx.watermark is None else ctx.watermark
        return DataFrame(made.onTime(ctx.rows._jdf, late), ctx.spark)

    def _plan_rows(self, ctx: BatchContext, gq: GroupQueryPlan, i: int) -> t.Any:
        """The ``BatchInput`` of `gq`'s input `i` over the batch's rows, its stream's event
        time last (for the late test), or None."""
        group = gq.query.inputs[i]
        event = ctx.plan.stream(group.stream).stream.event_time
        evt = f"unix_micros(`{group.alias}`.`{event}`)" if event else "CAST(NULL AS BIGINT)"
        try:
            sp = ctx.plan.stream(group.stream)
            rows = indexplans.batch_rows(ctx)(sp)
            sides = [gq.rows_sql(i, rows, f"{evt} AS _sj_evt")]
            return indexplans.batch_input(ctx, sides, [sp.index])
        except indexplans.PLAN_ERRORS as err:  # (the batch plans its rows instead)
            subject = f"query {gq.name}: its rows of stream {group.stream!r}"
            indexplans.planned_each_batch(subject, err)
            return None

    def write_all(
        self,
        spark: SparkSession,
        buffered: Sequence[tuple[GroupBuffer, DataFrame]],
        batch_id: int,
        checkpoint: Checkpoint,
    ) -> dict[str, GroupUnit]:
        """Write batch `batch_id`'s rows of each buffer (`buffered`) as its unit, folded per
        pane and key where its groups merge from partial aggregates (`folded`); where the
        driver's JVM runs the tasks, in one job that holds them too. The units written, by
        buffer (none for a buffer without a row: nothing kept)."""
        folded = [(b, self.folded(spark, b, rows)) for b, rows in buffered]
        groups = self._groups(spark)
        paths = [checkpoint.path(GroupUnit(b.name, batch_id, 0, 0, 0).path) for b, _ in folded]
        if groups is not None and self._local:
            figures = groups.writeAll(*self._arrays(spark, folded, paths), batch_id)
            counts = [(int(f[0]), int(f[1]), int(f[2])) for f in figures]
        else:
            counts = [
                self._written(b, rows, path, batch_id)
                for (b, rows), path in zip(folded, paths, strict=True)
            ]
        units = {}
        for (buffer, rows), path, (n, lo, hi) in zip(folded, paths, counts, strict=True):
            checkpoint.schemas.wrote(path, rows)
            if n == 0:
                checkpoint.fs.delete(path)
                checkpoint.schemas.forget([path])
                continue
            # (Rows without an event time are in no window: a unit of only those has no range.)
            lo, hi = (0, -1) if lo == _MOST else (lo, hi)
            units[buffer.name] = GroupUnit(buffer.name, batch_id, n, lo, hi)
        return units

    def _arrays(
        self,
        spark: SparkSession,
        folded: Sequence[tuple[GroupBuffer, DataFrame]],
        paths: Sequence[str],
    ) -> tuple[t.Any, ...]:
        """``GroupRows.writeAll``'s arrays of `folded` buffers' rows, their `paths`, keys,
        time columns and slides (its batch last)."""
        jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
        assert jvm is not None and gateway is not None
        n = len(folded)
        frames = gateway.new_array(jvm.org.apache.spark.sql.classic.Dataset, n)
        dirs, keys = (gateway.new_array(jvm.java.lang.String, n) for _ in range(2))
        times, slides = gateway.new_array(jvm.int, n), gateway.new_array(jvm.long, n)
        for i, ((buffer, rows), path) in enumerate(zip(folded, paths, strict=True)):
            frames[i], dirs[i], keys[i] = rows._jdf, path, self._key(buffer)
            times[i] = rows.columns.index(buffer.time_column)
            slides[i] = buffer.window.slide_us
        return frames, dirs, keys, times, slides

    @staticmethod
    def _written(
        buffer: GroupBuffer, rows: DataFrame, path: str, batch_id: int
    ) -> tuple[int, int, int]:
        """Write `rows` at `path` by Spark's writer (no rows held): their count, and their
        least and greatest event time (`_MOST` for none)."""
        micros = F.expr(f"unix_micros({buffer.time_column})")
        obs = Observation(f"sj_groups_{buffer.name}_{batch_id}")
        counts = (F.count(F.lit(1)).alias("rows"), F.min(micros).alias("lo"))
        observed = rows.observe(obs, *counts, F.max(micros).alias("hi"))
        observed.write.mode("overwrite").parquet(path)
        seen = metrics(obs)
        lo = seen.get("lo")
        return int(seen.get("rows") or 0), _MOST if lo is None else lo, seen.get("hi") or 0

    def groups(
        self,
        spark: SparkSession,
        buffer: GroupBuffer,
        units: Sequence[GroupUnit],
        ends: tuple[int | None, int | None],
        checkpoint: Checkpoint,
    ) -> DataFrame:
        """`buffer`'s groups of the windows ending in ``(after, upto]`` (`ends`, None:
        unbounded) from the rows of `units`, held (each unit not held read back first), without
        the window end. Where the driver's JVM runs the tasks, the rows are handed to a plan
        made once per buffer (`GroupBuffer.held_sql`) where it needs no shuffle; elsewhere each
        close plans its own."""
        after, upto = ends
        paths = [checkpoint.path(u.path) for u in units]
        groups = self._groups(spark)
        if groups is None:
            return self._grouped(spark, buffer, self._read(spark, buffer, paths, checkpoint), ends)
        key = self._key(buffer)
        missing = [p for u, p in zip(units, paths, strict=True) if not groups.holds(key, u.batch)]
        if missing:
            self._read_back(spark, buffer, missing, checkpoint)
        batches = ",".join(str(u.batch) for u in units)
        first = _LEAST if after is None else buffer.first_needed(after)
        below = _MOST if upto is None else upto
        if not self._local:
            rows = DataFrame(groups.rows(spark._jsparkSession, key, batches, first, below), spark)
            return self._grouped(spark, buffer, rows, ends)
        if key not in self._planned:
            handed = DataFrame(groups.handed(spark._jsparkSession, key, AFTER, UPTO), spark)
            self._planned[key] = self._plan_once(spark, buffer, handed)
        planned = self._planned[key]
        if planned is None:
            rows = DataFrame(groups.rows(spark._jsparkSession, key, batches, first, below), spark)
            return self._grouped(spark, buffer, rows, ends)
        groups.hand(key, batches, first, below, _LEAST if after is None else after, below)
        return self.as_rows(spark, planned)

    def output(self, spark: SparkSession, gq: GroupQueryPlan) -> DataFrame | None:
        """`gq`'s rows of this batch's closes from its inputs' groups (`output_sql`), planned
        once over the plans each input's close runs again (`_plan_once`): where every input's
        groups are planned once and the query joins no stream's rows. None elsewhere, or where
        the plan shuffles or would not give the same rows at every run (the current time in
        its SELECT, say): the batch plans its own."""
        keys = [self._key(b) for b in gq.inputs]
        if gq.query.rows is not None or not all(self._planned.get(k) is not None for k in keys):
            return None
        name = " ".join(keys)  # (each buffer's key names its query and signature)
        if name not in self._outputs:
            frames = [t.cast("DataFrame", self._planned[k]) for k in keys]
            joined = over(spark, frames, lambda *views: gq.output_sql(views))
            self._outputs[name] = joined if self._runs_again(spark, joined) else None
        planned = self._outputs[name]
        return None if planned is None else self.as_rows(spark, planned)

    def _plan_once(
        self, spark: SparkSession, buffer: GroupBuffer, handed: DataFrame
    ) -> DataFrame | None:
        """The groups of the rows `handed` at each close, in one partition (its RDD, made once,
        is each close's rows, in the session of the batch that reads them: `as_rows`); None
        where that plan shuffles (a sliding window's or a DISTINCT's groups: an RDD run again
        would take its shuffle's output of the run before) or would not give the same rows at
        every run (`GroupRows.runsAlike`): those closes plan their own."""
        partial, types = self._folds.merging(buffer, self._key(buffer), handed)

        def held(view: str) -> str:
            return buffer.held_sql(view) if partial is None else partial.held_sql(view, types)

        grouped = over(spark, [handed.coalesce(1)], held).drop(END)
        return grouped if self._runs_again(spark, grouped) else None

    def _runs_again(self, spark: SparkSession, frame: DataFrame) -> bool:
        """Whether `frame`'s plan, made now, may be run again at every close: no shuffle or
        broadcast (a run again would take the first run's output of it) and the same rows of
        the same input at every run (``GroupRows.runsAlike``: no current time, random value or
        subquery). Spark shuffles even inputs of one partition each where it cannot size them
        (an RDD's rows, as the closes' are): the plan is made with no such bound."""
        bound = spark.conf.get(_ONE_PARTITION_BYTES, None)
        spark.conf.set(_ONE_PARTITION_BYTES, str(_MOST))
        try:
            plan = frame._jdf.queryExecution().executedPlan().toString()
        finally:
            if bound is None:
                spark.conf.unset(_ONE_PARTITION_BYTES)
            else:
                spark.conf.set(_ONE_PARTITION_BYTES, bound)
        return "Exchange" not in plan and bool(self._groups(spark).runsAlike(frame._jdf))

    def _grouped(
        self,
        spark: SparkSession,
        buffer: GroupBuffer,
        rows: DataFrame,
        ends: tuple[int | None, int | None],
    ) -> DataFrame:
        """`buffer`'s groups of `rows` (a close planned on its own)."""
        partial, types = self._folds.merging(buffer, self._key(buffer), rows)

        def grouped(view: str) -> str:
            if partial is None:
                return buffer.group_sql(view, *ends)
            return partial.group_sql(view, *ends, types)

        return self.as_rows(spark, over(spark, [rows], grouped).drop(END))

    def _read_back(
        self, spark: SparkSession, buffer: GroupBuffer, paths: Sequence[str], checkpoint: Checkpoint
    ) -> None:
        """Hold the rows of `buffer`'s units at `paths`, read back in one job, each row with its
        unit's batch (the ``b=<id>`` of its path)."""
        read = self._read(spark, buffer, paths, checkpoint, _BATCH)
        ordinal = read.columns.index(buffer.time_column)
        self._groups(spark).hold(read._jdf, self._key(buffer), ordinal, buffer.window.slide_us)

    def folded(
        self, spark: SparkSession, buffer: GroupBuffer, rows: DataFrame, *batch: str
    ) -> DataFrame:
        """`rows` folded per pane and key where `buffer` folds (`PaneFolds.folded`)."""
        jar = self._groups(spark) is not None
        return self._folds.folded(spark, buffer, self._key(buffer), rows, jar, *batch)

    def _read(
        self,
        spark: SparkSession,
        buffer: GroupBuffer,
        paths: Sequence[str],
        checkpoint: Checkpoint,
        batch: str | None = None,
    ) -> DataFrame:
        """The rows of `buffer`'s units at `paths` (with `batch`, each row's unit's batch, the
        ``b=<id>`` of its path, in that column), folded where the buffer folds (`folded`). A
        unit written unfolded (by a version that did not fold) is read apart and folded."""
        frames = []
        for group in _alike(spark, paths, checkpoint):
            read = checkpoint.schemas.read(spark, group)
            if batch is not None:
                unit = F.regexp_extract(F.input_file_name(), r"/b=(-?[0-9]+)/", 1).cast("long")
                read = read.withColumn(batch, unit)
            frames.append(self.folded(spark, buffer, read, *([batch] if batch else [])))
        rows = frames[0]
        for frame in frames[1:]:
            rows = rows.unionByName(frame)
        return rows

    def as_rows(self, spark: SparkSession, frame: DataFrame) -> DataFrame:
        """`frame` as the rows of an RDD (made when it is written) in `spark`'s session: a sink's
        writer then takes it as it takes a probe's rows, in one job with no plan of a write
        (`sinks.write_direct`)."""
        groups = self._groups(spark)
        return (
            frame
            if groups is None
            else DataFrame(groups.asRows(frame._jdf, spark._jsparkSession), spark)
        )

    def forget(self, spark: SparkSession, buffer: GroupBuffer, below: int) -> None:
        """Let go of `buffer`'s rows in windows ending at or before `below` only."""
        groups = self._groups(spark)
        if groups is not None:
            groups.forget(self._key(buffer), buffer.first_needed(below))

    def drop(self, spark: SparkSession, name: str) -> None:
        """Let go of every buffer of query (or buffer) `name`."""
        groups = self._groups(spark)
        if groups is not None:
            groups.drop(f"{self._prefix}{name}/")
        for key in [k for k in self._planned if k.startswith(f"{self._prefix}{name}/")]:
            del self._planned[key]
        for key in [k for k in self._inputs if k.startswith(f"{self._prefix}{name}/")]:
            del self._inputs[key]
        self._folds.drop(f"{self._prefix}{name}/")
        for key in [k for k in self._outputs if f"{self._prefix}{name}/" in k]:
            del self._outputs[key]

    def clear(self, spark: SparkSession) -> None:
        """Let go of every buffer held (the processor is done)."""
        groups = self._groups(spark)
        if groups is not None:
            groups.drop(self._prefix)
        self._planned = {}
        self._inputs = {}
        self._folds, self._outputs = PaneFolds(), {}

    def _key(self, buffer: GroupBuffer) -> str:
        return f"{self._prefix}{buffer.name}/{buffer.buffer_signature}"

    def _groups(self, spark: SparkSession) -> t.Any:
        if self._jvm is None:
            from streamjoin.runtime.batch.indexed import index_class
            from streamjoin.runtime.batch.placed import on_cluster

            found = index_class(spark)
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            self._jvm = False if found is None else StaticMethods(jvm.streamjoin.operator.GroupRows)
            self._local = not on_cluster(spark)
        return self._jvm or None


def _alike(spark: SparkSession, paths: Sequence[str], checkpoint: Checkpoint) -> list[list[str]]:
    """`paths` (Parquet directories of one buffer's units) in groups of one schema, known
    where this run wrote them, else read from each (once: then known)."""
    known = checkpoint.schemas.known
    written: dict[str, list[str]] = {}
    others = [p for p in paths if known(p) is None]
    for p in paths:
        if (schema := known(p)) is not None:
            written.setdefault(schema.json(), []).append(p)
    if not others:
        return list(written.values())
    # (Units of an earlier run: a version that did not fold wrote rows, one that did wrote
    # panes; Spark would read them all with the schema of one of them.)
    kinds: dict[str, list[str]] = {}
    for p in others:
        read = spark.read.parquet(p)
        checkpoint.schemas.wrote(p, read)  # (as written: inferred once)
        kinds.setdefault(read.schema.json(), []).append(p)
    return [*written.values(), *kinds.values()]
