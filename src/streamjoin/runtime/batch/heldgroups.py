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
import warnings

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from streamjoin.errors import StreamJoinError, StreamJoinWarning
from streamjoin.plan.aggregate import AFTER, END, UPTO
from streamjoin.plan.partials import FOLDED, PartialBuffer, partial_buffer
from streamjoin.runtime.batch import indexplans
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
        self._folds: dict[str, PartialBuffer | None] = {}
        """Each buffer → its partial aggregates, where a batch's rows are folded (`folded`)."""
        self._made: dict[tuple[str, tuple[str, ...]], t.Any] = {}
        """Each buffer (and the columns a fold keeps last: a read back's unit batch) → the
        ``PaneFold`` that folds its rows in their tasks, planned once."""

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

    def write(
        self,
        spark: SparkSession,
        buffer: GroupBuffer,
        rows: DataFrame,
        batch_id: int,
        checkpoint: Checkpoint,
    ) -> GroupUnit | None:
        """Write batch `batch_id`'s `rows` of `buffer` as its unit, folded per pane and key
        where its groups merge from partial aggregates (`folded`), and hold them where the
        driver's JVM runs the tasks; the unit (None: no row, nothing kept)."""
        rows = self.folded(spark, buffer, rows)
        unit = GroupUnit(buffer.name, batch_id, 0, 0, 0)
        path = checkpoint.path(unit.path)
        groups = self._groups(spark)
        if groups is not None and self._local:
            time = rows.columns.index(buffer.time_column)
            args = (path, batch_id, self._key(buffer), time, buffer.window.slide_us)
            n, lo, hi = groups.write(rows._jdf, *args)
        else:
            micros = F.expr(f"unix_micros({buffer.time_column})")
            obs = Observation(f"sj_groups_{buffer.name}_{batch_id}")
            counts = (F.count(F.lit(1)).alias("rows"), F.min(micros).alias("lo"))
            observed = rows.observe(obs, *counts, F.max(micros).alias("hi"))
            observed.write.mode("overwrite").parquet(path)
            seen = metrics(obs)
            n, lo, hi = int(seen.get("rows") or 0), seen.get("lo"), seen.get("hi")
        checkpoint.schemas.wrote(path, rows)
        if n == 0:
            checkpoint.fs.delete(path)
            checkpoint.schemas.forget([path])
            return None
        # (Rows without an event time are in no window: a unit of only those has no range.)
        lo, hi = (0, -1) if lo is None or lo == _MOST else (lo, hi)
        return GroupUnit(buffer.name, batch_id, n, lo, hi)

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

    def _plan_once(
        self, spark: SparkSession, buffer: GroupBuffer, handed: DataFrame
    ) -> DataFrame | None:
        """The groups of the rows `handed` at each close, in one partition (its RDD, made once,
        is each close's rows, in the session of the batch that reads them: `as_rows`); None
        where that plan shuffles (a sliding window's or a DISTINCT's groups): an RDD run again
        would take its shuffle's output of the run before, so those closes plan their own."""
        partial, types = self._merging(buffer, handed)

        def held(view: str) -> str:
            return buffer.held_sql(view) if partial is None else partial.held_sql(view, types)

        grouped = _over(spark, [handed.coalesce(1)], held).drop(END)
        if "Exchange" in grouped._jdf.queryExecution().executedPlan().toString():
            return None
        return grouped

    def _grouped(
        self,
        spark: SparkSession,
        buffer: GroupBuffer,
        rows: DataFrame,
        ends: tuple[int | None, int | None],
    ) -> DataFrame:
        """`buffer`'s groups of `rows` (a close planned on its own)."""
        partial, types = self._merging(buffer, rows)

        def grouped(view: str) -> str:
            if partial is None:
                return buffer.group_sql(view, *ends)
            return partial.group_sql(view, *ends, types)

        return self.as_rows(spark, _over(spark, [rows], grouped).drop(END))

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
        """`rows` (of `buffer`'s columns, and `batch`'s, the column of each row's unit's
        batch, if given: kept last) folded per pane and key where `buffer`'s groups merge from
        partial aggregates (`plan.partials`), decided once per buffer by the rows' types; else
        as they are. The fold is planned once per buffer (``PaneFold.java``) and runs in the
        tasks that make the rows; a run without the jar has Spark plan it each batch."""
        key = self._key(buffer)
        if key not in self._folds:
            self._folds[key] = self._fold_of(spark, buffer, rows)
        partial = self._folds[key]
        if partial is None or FOLDED in rows.columns:
            return rows
        if self._groups(spark) is None:
            return self._fold_sql(spark, partial, rows, batch)
        made = self._made.get((key, batch))
        if made is None:
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            none = DataFrame(jvm.streamjoin.operator.PaneFold.placeholder(rows._jdf), spark)
            planned = self._fold_sql(spark, partial, none, batch)
            made = self._made[(key, batch)] = jvm.streamjoin.operator.PaneFold.of(planned._jdf)
            if made is None:
                plan = planned._jdf.queryExecution().optimizedPlan().toString()
                msg = f"{buffer.name}: a batch's fold was planned as no GROUP BY of its own: {plan}"
                raise StreamJoinError(msg)
        return DataFrame(made.apply(rows._jdf), spark)

    def _fold_sql(
        self, spark: SparkSession, partial: PartialBuffer, rows: DataFrame, batch: tuple[str, ...]
    ) -> DataFrame:
        """`partial`'s fold of `rows` as Spark plans it."""
        return _over(spark, [rows], lambda view: partial.fold_sql(view, *batch))

    def _fold_of(
        self, spark: SparkSession, buffer: GroupBuffer, rows: DataFrame
    ) -> PartialBuffer | None:
        """`buffer`'s partial aggregates, where the groups merged from them have the columns
        and types of its groups of its rows (`rows`, of its columns: an avg of decimals, say,
        merges as a double), planned over no rows; else None."""
        partial = partial_buffer(buffer)
        if partial is None or FOLDED in rows.columns:
            return partial
        none = rows.limit(0)
        try:
            folded = self._fold_sql(spark, partial, none, ())
            types = _types(folded)
            raw = _over(spark, [none], lambda view: buffer.group_sql(view, None, None))
            merged = _over(spark, [folded], lambda view: partial.group_sql(view, None, None, types))
        except indexplans.PLAN_ERRORS as err:  # (a type the fold's SQL cannot take)
            reason = indexplans.spark_reason(err)
            msg = f"{buffer.name}: its rows are buffered as they are, not folded ({reason})"
            warnings.warn(msg, StreamJoinWarning, stacklevel=2)
            return None
        same = [f.dataType for f in raw.schema.fields] == [f.dataType for f in merged.schema.fields]
        return partial if same else None

    def _merging(
        self, buffer: GroupBuffer, rows: DataFrame
    ) -> tuple[PartialBuffer | None, dict[str, str]]:
        """How `buffer`'s groups of `rows` are made: merged from partial aggregates (with the
        rows' column types) where the rows are folded, else as a GROUP BY of the rows."""
        if FOLDED not in rows.columns:
            return None, {}
        partial = self._folds.get(self._key(buffer)) or partial_buffer(buffer)
        assert partial is not None  # (folded rows of a buffer that folds)
        return partial, _types(rows)

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
        for key in [k for k in self._folds if k.startswith(f"{self._prefix}{name}/")]:
            del self._folds[key]
        for made in [m for m in self._made if m[0].startswith(f"{self._prefix}{name}/")]:
            del self._made[made]

    def clear(self, spark: SparkSession) -> None:
        """Let go of every buffer held (the processor is done)."""
        groups = self._groups(spark)
        if groups is not None:
            groups.drop(self._prefix)
        self._planned = {}
        self._inputs = {}
        self._folds, self._made = {}, {}

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


def _types(frame: DataFrame) -> dict[str, str]:
    """`frame`'s column types as Spark SQL writes them, by column."""
    return {f.name: f.dataType.simpleString() for f in frame.schema.fields}


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


def _over(spark: SparkSession, frames: Sequence[DataFrame], sql: t.Callable[..., str]) -> DataFrame:
    """Spark's plan of the SQL `sql` makes of the names of temp views of `frames` (in order),
    which go once it is analysed."""
    names = [f"sj_held_{uuid.uuid4().hex[:12]}" for _ in frames]
    for frame, name in zip(frames, names, strict=True):
        frame.createOrReplaceTempView(name)
    try:
        return spark.sql(sql(*names))
    finally:
        for name in names:
            spark.catalog.dropTempView(name)
