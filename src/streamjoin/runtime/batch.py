"""One micro-batch: classify input, dead-letter the bad rows, append to state, join, commit.

Per batch, with W the global watermark committed by the previous batch:

1. every input row is ok, malformed (unparsable, or NULL event time) or late (event time < W);
2. one aggregate over the cached batch gives, per stream and time slice, the row counts and the
   event-time range — the only collect of the batch; it feeds watermarks, pruning and counters;
3. bad rows go to the dead-letter location, ok rows are appended to their stream's state as new
   slice files keyed by the batch id;
4. each query computes ``ΔL ⋈ (R_old ∪ ΔR) ∪ L_old ⋈ ΔR`` (each new pair exactly once), reading
   only the state slices whose event times can meet the delta's;
5. each sink receives its queries' rows under ``<path>/batch=<id>/`` (overwritten on replay);
6. the manifest for the batch is written: this is the commit.
"""

from __future__ import annotations

import time
import typing as t
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import Observation
from pyspark.sql import functions as F

from streamjoin.runtime.faults import maybe_crash
from streamjoin.runtime.joins import BROADCAST_MAX_ROWS, delta_join_sql
from streamjoin.runtime.manifest import Manifest, SliceFiles, Totals
from streamjoin.runtime.sinks import write_sink
from streamjoin.runtime.sources import prefixed, schema_ddl

if t.TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.plan import JobPlan, QueryPlan, StreamPlan
    from streamjoin.runtime.state import StateStore


@dataclass(frozen=True)
class BatchReport:
    """What one batch did, for progress lines and summaries."""

    batch: int
    rows_in: int
    late: int
    malformed: int
    out: dict[str, int]
    state_rows: int
    watermark: int | None
    seconds: float
    manifest: Manifest = field(repr=False)


@dataclass
class _StreamStats:
    ok: int = 0
    late: int = 0
    malformed: int = 0
    min_ts: int | None = None
    max_ts: int | None = None
    slices: list[SliceFiles] = field(default_factory=list)


class BatchProcessor:
    """The foreachBatch function of a job (also callable directly with a unified DataFrame)."""

    def __init__(
        self,
        spark: SparkSession,
        plan: JobPlan,
        store: StateStore,
        on_batch: Callable[[BatchReport], None] | None = None,
    ) -> None:
        self.spark = spark
        self.plan = plan
        self.store = store
        self.on_batch = on_batch
        self.error: BaseException | None = None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self.process(df, batch_id)
        except BaseException as err:
            # Spark wraps errors raised here in a StreamingQueryException with a JVM trace;
            # keep the original so the caller can report it plainly.
            self.error = err
            raise

    def process(self, df: DataFrame, batch_id: int) -> BatchReport:
        """Run batch `batch_id` on the unified input `df`; idempotent for a given input."""
        started = time.monotonic()
        # foreachBatch hands over a DataFrame of a cloned session: temp views must live there.
        self.spark = df.sparkSession
        prev = self.store.previous(batch_id)
        classified = self._classify(df, prev.global_wm).persist(StorageLevel.MEMORY_AND_DISK)
        views: list[str] = []
        try:
            stats = self._stats(classified)
            self._write_deadletters(classified, batch_id, stats)
            maybe_crash("after-deadletter", batch_id)
            deltas = self._append_state(classified, batch_id, stats, views)
            maybe_crash("after-state", batch_id)
            out = self._join_and_write(batch_id, prev, stats, deltas, views)
            maybe_crash("after-sink", batch_id)
            manifest = self._next_manifest(prev, batch_id, stats, out)
            self.store.commit(manifest, prev)
            maybe_crash("after-commit", batch_id)
        finally:
            classified.unpersist()
            for view in views:
                self.spark.catalog.dropTempView(view)
        report = BatchReport(
            batch=batch_id,
            rows_in=sum(s.ok + s.late + s.malformed for s in stats.values()),
            late=sum(s.late for s in stats.values()),
            malformed=sum(s.malformed for s in stats.values()),
            out=out,
            state_rows=sum(manifest.state_rows().values()),
            watermark=manifest.global_wm,
            seconds=time.monotonic() - started,
            manifest=manifest,
        )
        if self.on_batch is not None:
            self.on_batch(report)
        return report

    # -- 1. classification -------------------------------------------------------------------
    def _classify(self, df: DataFrame, watermark: int | None) -> DataFrame:
        timed = [sp.index for sp in self.plan.streams if sp.stream.watermark]
        late = "FALSE" if watermark is None else f"_sj_ts < {watermark}"
        null_ts = (
            f"_sj_src IN ({', '.join(map(str, timed))}) AND _sj_ts IS NULL" if timed else "FALSE"
        )
        status = (
            f"CASE WHEN _sj_raw IS NOT NULL THEN 'malformed' WHEN {null_ts} THEN 'malformed' "
            f"WHEN {late} THEN 'late' ELSE 'ok' END"
        )
        wm_text = "" if watermark is None else f"timestamp_micros({watermark})"
        reason = (
            "CASE WHEN _sj_raw IS NOT NULL THEN 'unparsable record or wrong type' "
            f"WHEN {null_ts} THEN 'null event time' "
            + (
                f"WHEN {late} THEN concat('late: event time behind the watermark ', "
                f"CAST({wm_text} AS STRING)) "
                if watermark is not None
                else ""
            )
            + "END"
        )
        slices = " ".join(
            f"WHEN {sp.index} THEN (_sj_ts - pmod(_sj_ts, {sp.slice_us})) div {sp.slice_us}"
            for sp in self.plan.streams
            if sp.stream.watermark
        )
        slice_expr = f"coalesce(CASE _sj_src {slices} END, 0)" if slices else "0"
        return df.select(
            "*",
            F.expr(status).alias("_sj_status"),
            F.expr(reason).alias("_sj_reason"),
            F.expr(slice_expr).cast("bigint").alias("_sj_slice"),
        )

    # -- 2. the batch's one collect -------------------------------------------------------------
    def _stats(self, classified: DataFrame) -> dict[str, _StreamStats]:
        rows = (
            classified.groupBy("_sj_src", "_sj_status", "_sj_slice")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.min("_sj_ts").alias("lo"),
                F.max("_sj_ts").alias("hi"),
            )
            .collect()
        )
        by_index = {sp.index: sp for sp in self.plan.streams}
        stats = {sp.name: _StreamStats() for sp in self.plan.streams}
        for r in rows:
            sp = by_index[r["_sj_src"]]
            s = stats[sp.name]
            n, lo, hi = int(r["n"]), r["lo"], r["hi"]
            if r["_sj_status"] == "late":
                s.late += n
            elif r["_sj_status"] == "malformed":
                s.malformed += n
            else:
                s.ok += n
                s.min_ts = (
                    lo if s.min_ts is None else min(s.min_ts, lo) if lo is not None else s.min_ts
                )
                s.max_ts = (
                    hi if s.max_ts is None else max(s.max_ts, hi) if hi is not None else s.max_ts
                )
                s.slices.append(SliceFiles(sp.name, -1, int(r["_sj_slice"]), n, lo, hi))
        return stats

    # -- 3. dead letters and state --------------------------------------------------------------
    def _write_deadletters(
        self, classified: DataFrame, batch_id: int, stats: dict[str, _StreamStats]
    ) -> None:
        for sp in self.plan.streams:
            s = stats[sp.name]
            if s.late + s.malformed == 0:
                continue
            cols = [F.col(prefixed(sp.index, c.name)).alias(c.name) for c in sp.stream.columns]
            bad = classified.where((F.col("_sj_src") == sp.index) & (F.col("_sj_status") != "ok"))
            bad.select(
                F.lit(sp.name).alias("stream"),
                F.lit(batch_id).alias("batch"),
                F.col("_sj_status").alias("kind"),
                F.col("_sj_reason").alias("reason"),
                F.coalesce(F.col("_sj_raw"), F.to_json(F.struct(*cols))).alias("record"),
                F.expr("timestamp_micros(_sj_ts)").alias("event_time"),
            ).write.mode("overwrite").json(
                f"{self.store.deadletter_dir(sp.stream)}/batch={batch_id}"
            )

    def _append_state(
        self, classified: DataFrame, batch_id: int, stats: dict[str, _StreamStats], views: list[str]
    ) -> dict[str, str]:
        """Write each stream's ok rows as new slice files; return the delta views by stream."""
        deltas: dict[str, str] = {}
        for sp in self.plan.streams:
            s = stats[sp.name]
            if s.ok == 0:
                continue
            cols = [F.col(prefixed(sp.index, c.name)).alias(c.name) for c in sp.stream.columns]
            delta = classified.where(
                (F.col("_sj_src") == sp.index) & (F.col("_sj_status") == "ok")
            ).select(*cols, F.col("_sj_slice").alias("sj_slice"))
            delta.write.mode("overwrite").partitionBy("sj_slice").parquet(
                self.store.batch_dir(sp.name, batch_id)
            )
            s.slices = [
                SliceFiles(sp.name, batch_id, f.slice, f.rows, f.min_ts, f.max_ts) for f in s.slices
            ]
            view = f"_sj_delta_{sp.index}"
            delta.drop("sj_slice").createOrReplaceTempView(view)
            views.append(view)
            deltas[sp.name] = view
        return deltas

    # -- 4./5. joins and sinks ------------------------------------------------------------------
    def _join_and_write(
        self,
        batch_id: int,
        prev: Manifest,
        stats: dict[str, _StreamStats],
        deltas: dict[str, str],
        views: list[str],
    ) -> dict[str, int]:
        per_sink: dict[str, list[tuple[str, DataFrame, Observation]]] = {}
        for qp in self.plan.queries:
            parts = self._query_parts(qp, prev, stats, deltas, views)
            if not parts:
                continue
            out = parts[0]
            for p in parts[1:]:
                out = out.unionAll(p)
            obs = Observation(f"sj_{qp.query.name}_{batch_id}")
            out = out.observe(obs, F.count(F.lit(1)).alias("rows"))
            per_sink.setdefault(qp.query.sink, []).append((qp.query.name, out, obs))
        counts: dict[str, int] = {}
        for sink_name, outputs in per_sink.items():
            sink_df = outputs[0][1]
            for _, df, _ in outputs[1:]:
                sink_df = sink_df.unionByName(df)
            write_sink(self.plan.job.sink(sink_name), sink_df, batch_id)
            for name, _, obs in outputs:
                counts[name] = int(obs.get.get("rows", 0))
        return counts

    def _query_parts(
        self,
        qp: QueryPlan,
        prev: Manifest,
        stats: dict[str, _StreamStats],
        deltas: dict[str, str],
        views: list[str],
    ) -> list[DataFrame]:
        q = qp.query
        window = qp.parts.window
        lo = window.lo_us if window else None
        hi = window.hi_us if window else None
        timed = qp.left_time is not None and qp.right_time is not None
        parts: list[DataFrame] = []
        left, right = self.plan.stream(q.left.stream), self.plan.stream(q.right.stream)
        if q.left.stream in deltas:
            s = stats[q.left.stream]
            # right rows that can meet this delta: r.ts ∈ [min + lo, max + hi]
            r_lo = s.min_ts + lo if timed and lo is not None and s.min_ts is not None else None
            r_hi = s.max_ts + hi if timed and hi is not None and s.max_ts is not None else None
            state = self._state_view(right, prev, r_lo, r_hi, deltas.get(q.right.stream), views)
            sql = delta_join_sql(
                qp, "left", deltas[q.left.stream], state, broadcast=s.ok <= BROADCAST_MAX_ROWS
            )
            parts.append(self.spark.sql(sql))
        if q.right.stream in deltas:
            s = stats[q.right.stream]
            # left rows that can meet this delta: l.ts ∈ [min - hi, max - lo]
            l_lo = s.min_ts - hi if timed and hi is not None and s.min_ts is not None else None
            l_hi = s.max_ts - lo if timed and lo is not None and s.max_ts is not None else None
            state = self._state_view(left, prev, l_lo, l_hi, None, views)
            sql = delta_join_sql(
                qp, "right", deltas[q.right.stream], state, broadcast=s.ok <= BROADCAST_MAX_ROWS
            )
            parts.append(self.spark.sql(sql))
        return parts

    def _state_view(
        self,
        sp: StreamPlan,
        prev: Manifest,
        lo: int | None,
        hi: int | None,
        delta_view: str | None,
        views: list[str],
    ) -> str:
        """A view of `sp`'s committed state with event times in [lo, hi], plus `delta_view`."""
        files = [f for f in prev.live(sp.name) if f.overlaps(lo, hi)]
        ddl = schema_ddl(sp.stream)
        if files:
            state = self.spark.read.schema(ddl).parquet(*[self.store.path(f.path) for f in files])
        else:
            state = self.spark.createDataFrame([], schema=ddl)
        if delta_view is not None:
            state = state.unionByName(self.spark.table(delta_view))
        view = f"_sj_state_{len(views)}"
        state.createOrReplaceTempView(view)
        views.append(view)
        return view

    # -- 6. commit ------------------------------------------------------------------------------
    def _next_manifest(
        self, prev: Manifest, batch_id: int, stats: dict[str, _StreamStats], out: dict[str, int]
    ) -> Manifest:
        stream_wm = dict(prev.stream_wm)
        for sp in self.plan.streams:
            s, wm = stats[sp.name], sp.stream.watermark
            if wm is not None and s.max_ts is not None:
                candidate = s.max_ts - wm.delay_us
                old = stream_wm.get(sp.name)
                stream_wm[sp.name] = candidate if old is None else max(old, candidate)
        timed = [sp.name for sp in self.plan.streams if sp.stream.watermark]
        marks = [stream_wm.get(name) for name in timed]
        global_wm = prev.global_wm
        if timed and all(m is not None for m in marks):
            new = min(t.cast("list[int]", marks))
            global_wm = new if global_wm is None else max(global_wm, new)
        live: list[SliceFiles] = []
        dropped: list[str] = []
        for f in prev.slices + [f for s in stats.values() for f in s.slices if f.batch == batch_id]:
            horizon = self.plan.stream(f.stream).horizon(global_wm)
            if horizon is not None and f.max_ts is not None and f.max_ts < horizon:
                dropped.append(f.path)
            else:
                live.append(f)
        before = prev.totals
        totals = Totals(
            batches=before.batches + 1,
            rows_in=_add(
                before.rows_in, {k: s.ok + s.late + s.malformed for k, s in stats.items()}
            ),
            late=_add(before.late, {k: s.late for k, s in stats.items()}),
            malformed=_add(before.malformed, {k: s.malformed for k, s in stats.items()}),
            out=_add(before.out, out),
        )
        return Manifest(batch_id, stream_wm, global_wm, live, dropped, totals)


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in sorted(set(a) | set(b))}
