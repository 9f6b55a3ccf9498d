"""The engines a benchmark compares, each run on one job over one backlog in its own process.

- ``streamjoin``: this project's engine (`streamjoin.Engine.run` with ``once``).
- ``spark-native``: Spark's own stream-stream join: each stream read with ``withWatermark`` and
  the query's SELECT … JOIN … ON run as Spark SQL over the streaming views (equi predicates only;
  Spark refuses the rest).
- ``spark-foreach``: what a Spark user writes today for a non-equi join: ``foreachBatch``, keep
  past input in a Parquet table and join each batch against it with the query's condition.

All three read the same Parquet files with the same ``maxFilesPerTrigger`` and write Parquet. A
listener records each micro-batch's ``triggerExecution`` time, so batch times are measured the
same way for all of them. Run as ``python -m benchmarks.engines ENGINE PLAN RESULT`` (see
`main`).

With `Live` options (the ``--rate`` mode, `benchmarks.rate`) an engine runs with a
processing-time trigger instead, writes ``ready`` in its workdir once its queries are started,
and stops once every file the feeder lists in its ``done`` file has been committed (or when the
drain limit has passed, marked ``stopped_early``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import typing as t
from dataclasses import asdict, dataclass, field

from benchmarks.sparklog import drained
from streamjoin.runtime.session import DRIVER_JAVA_OPTIONS

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from streamjoin.model import GroupQuery, Job, Query, StreamDef
    from streamjoin.plan.outer import OuterPlan

ENGINES = ("streamjoin", "spark-native", "spark-foreach")


@dataclass
class EngineRun:
    """What one engine did on one job: the figures the harness reports."""

    engine: str
    rows_in: int = 0
    seconds: float = 0.0
    batch_ms: list[float] = field(default_factory=list)
    durations: list[dict[str, int]] = field(default_factory=list)
    out: dict[str, int] = field(default_factory=dict)
    state_rows: int = 0
    state_bytes: int = 0
    stopped_early: bool = False
    error: str | None = None
    jvm_flags: str = ""
    """The driver JVM's ``-XX`` flags (its compilers and collector), as the engine ran."""
    settings: dict[str, str] = field(default_factory=dict)
    """The Spark settings the engine ran with over streamjoin's local defaults (`PEER_CONF`)."""
    cpu_seconds: float | None = None
    """CPU the driver used over the run (`CpuClock`), None where it cannot be read."""
    history: list[dict[str, t.Any]] = field(default_factory=list)
    """streamjoin's own figures of each batch, as its checkpoint keeps them (`runtime.metrics`;
    the same records as ``/history`` and `Serving.history`); empty for the peers."""
    dropped_late: int = 0
    """Input rows Spark's native join dropped as later than its watermark (its progress
    events' ``numRowsDroppedByWatermark``): rows the peer's output does not count."""


class CpuClock:
    """CPU seconds used since it was made by the driver JVM (every thread, those that ended
    too, and the processes it started and reaped) and by this Python process.

    The JVM's own count, from ``/proc/<pid>/stat``: summing its live threads misses the ones
    that ended, which in a streamjoin run hold about a quarter of its CPU (the stream execution
    thread, where foreachBatch's driver work runs, ends with the query; measured, session 13).
    Linux only: elsewhere `seconds` is None."""

    def __init__(self, jvm_pid: int | None) -> None:
        path = f"/proc/{jvm_pid}/stat"
        self._stat = path if jvm_pid is not None and os.path.exists(path) else None
        self._start = self._read()

    @classmethod
    def of(cls, spark: SparkSession) -> CpuClock:
        """The clock of `spark`'s driver JVM."""
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return cls(int(jvm.java.lang.ProcessHandle.current().pid()))

    def _read(self) -> float | None:
        if self._stat is None:
            return None
        with open(self._stat, encoding="ascii") as f:
            # After the command name in parentheses: utime, stime, cutime, cstime are the
            # 12th-15th fields (proc(5)), in clock ticks.
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = sum(int(x) for x in fields[11:15])
        own = os.times()
        return ticks / os.sysconf("SC_CLK_TCK") + own.user + own.system

    def seconds(self) -> float | None:
        """CPU seconds since the clock was made."""
        now = self._read()
        return None if now is None or self._start is None else round(now - self._start, 2)


class _Batches:
    """A streaming listener collecting per-batch trigger times and the last state figures.

    It implements Spark's listener interface over py4j itself, reading each progress event as
    one JSON text. PySpark's `StreamingQueryListener` converts every field of every event
    through py4j first (hundreds of round trips and a dozen Java exceptions converted per
    event, counted), Python work that shares the interpreter with streamjoin's driver thread,
    which Spark's native join does not need during a batch. A measuring tool should not load
    one engine more than another. (On the full equi backlog the difference is within this
    machine's noise. streamjoin: 20.1 / 20.1 s with PySpark's listener; 19.5-21.6 s, mean
    20.6, with this one; 18.7-20.7 s, mean 19.8, with none.)"""

    def __init__(self) -> None:
        self.batch_ms: list[float] = []
        self.durations: list[dict[str, int]] = []
        self.rows = 0
        self.last: float | None = None
        self.state_rows = 0
        self.state_bytes = 0
        self.dropped_late = 0
        self._jlistener: t.Any = None

    def record(self, progress: dict[str, t.Any]) -> None:
        """Take one progress event (`StreamingQueryProgress.json`, parsed)."""
        durations = progress.get("durationMs") or {}
        rows = int(progress.get("numInputRows") or 0)
        if rows > 0:
            self.batch_ms.append(float(durations.get("triggerExecution", 0)))
            self.durations.append({k: int(v) for k, v in durations.items()})
            self.rows += rows
            self.last = time.monotonic()
        ops = progress.get("stateOperators") or []
        self.state_rows = sum(int(op.get("numRowsTotal", 0)) for op in ops)
        self.state_bytes = sum(int(op.get("memoryUsedBytes", 0)) for op in ops)
        self.dropped_late += sum(int(op.get("numRowsDroppedByWatermark", 0)) for op in ops)

    def attach(self, spark: SparkSession) -> None:
        """Listen to `spark`'s streaming queries."""
        from py4j.java_gateway import java_import
        from pyspark.java_gateway import ensure_callback_server_started

        gateway = spark.sparkContext._gateway
        assert gateway is not None
        java_import(gateway.jvm, "org.apache.spark.sql.streaming.*")
        ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
        wrapper = gateway.jvm.PythonStreamingQueryListenerWrapper
        self._jlistener = wrapper(_JsonProgressListener(self))
        spark._jsparkSession.streams().addListener(self._jlistener)

    def detach(self, spark: SparkSession) -> None:
        """Stop listening."""
        if self._jlistener is not None:
            spark._jsparkSession.streams().removeListener(self._jlistener)
            self._jlistener = None


class _JsonProgressListener:
    """Spark's ``PythonStreamingQueryListener`` interface, for py4j: one call per progress."""

    def __init__(self, batches: _Batches) -> None:
        self.batches = batches

    def onQueryStarted(self, jevent: t.Any) -> None:
        pass

    def onQueryProgress(self, jevent: t.Any) -> None:
        self.batches.record(json.loads(jevent.progress().json()))

    def onQueryIdle(self, jevent: t.Any) -> None:
        pass

    def onQueryTerminated(self, jevent: t.Any) -> None:
        pass

    class Java:
        implements: t.ClassVar[list[str]] = [
            "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
        ]


@dataclass(frozen=True)
class Live:
    """A live run: `trigger` (Spark's processingTime text) until the feeder's `done` file (JSON:
    ``{"files": [path, ...]}``) exists and every file it lists is in a committed batch of every
    query, or until `drain_limit` seconds after it appeared. `warmup`: a job (``{out}`` for its
    result directory) run to its end first, in the same process, so that the live run does not
    measure a cold JVM's first batches."""

    trigger: str
    done: str
    drain_limit: float
    warmup: str | None = None


_JAVA_OPTIONS = DRIVER_JAVA_OPTIONS
"""(Reported as the JVM's flags, `EngineRun.jvm_flags`, not among an engine's settings.)"""

PEER_CONF: dict[str, dict[str, str]] = {
    # The foreachBatch join is a nested loop whose cost is task code: the JVM's optimising
    # compiler (C2) runs it much faster (docs/dev-log.md).
    "spark-foreach": {_JAVA_OPTIONS: ""},
    # Spark's native join runs a backlog faster with the quick compiler only (docs/dev-log.md).
    "spark-native": {_JAVA_OPTIONS: "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"},
}
"""Settings an engine's session takes over streamjoin's local defaults: each peer runs as it
runs fastest, so a ratio never comes from slowing the peer down."""


MASTER_ENV = "STREAMJOIN_BENCH_MASTER"
"""The environment variable naming the master an engine's session runs on (default
``local[2]``): a ``spark://`` cluster's for ``streamjoin bench --cluster``."""


def session(engine: str = "streamjoin") -> SparkSession:
    """The session `engine` runs on (streamjoin's defaults and `PEER_CONF`, 2 shuffle
    partitions): local, or on the cluster `MASTER_ENV` names."""
    from streamjoin.runtime.session import get_session

    spark = get_session(os.environ.get(MASTER_ENV) or "local[2]", conf=PEER_CONF.get(engine))
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    return spark


def run_engine(
    engine: str,
    job_text: str,
    workdir: str,
    time_limit: float | None = None,
    live: Live | None = None,
    final: bool = False,
) -> EngineRun:
    """Run `engine` on the job to the end of its input; results go under `workdir`.
    `final`: our engine then declares the input finished (`Engine.run(final=True)`).

    With `time_limit` (seconds) a run still going is stopped after its current batch and marked
    ``stopped_early``: its throughput is then that of the batches it finished (its first ones,
    with the least state, so the figure favours the stopped engine). With `live`, the engine
    runs on a live source until the feeder is done and its files are processed (see `Live`).
    """
    from streamjoin.sql import parse_job

    job = parse_job(job_text, "<benchmark>")
    if live is not None and live.warmup is not None:
        warm = os.path.join(workdir, "warmup")
        run_engine(engine, live.warmup.replace("{out}", os.path.join(warm, "out")), warm)
    spark = session(engine)
    batches = _Batches()
    batches.attach(spark)
    settings = {k: v for k, v in PEER_CONF.get(engine, {}).items() if k != _JAVA_OPTIONS}
    run = EngineRun(engine, jvm_flags=_jvm_flags(spark), settings=settings)
    cpu = CpuClock.of(spark)
    started = time.monotonic()
    try:
        if engine == "streamjoin":
            if live is None:
                _run_streamjoin(spark, job, workdir, run, final=final)
            else:
                run.stopped_early = _run_streamjoin_live(spark, job, workdir, run, live)
        elif engine == "spark-native":
            run.stopped_early = _run_native(spark, job, workdir, time_limit, live)
        elif engine == "spark-foreach":
            run.stopped_early = _run_foreach(spark, job, workdir, time_limit, live)
        else:
            msg = f"unknown engine {engine!r} (one of {', '.join(ENGINES)})"
            raise ValueError(msg)
        run.seconds = time.monotonic() - started
        # (On a cluster the executors' CPU is in other processes: not counted, not shown.)
        run.cpu_seconds = None if os.environ.get(MASTER_ENV) else cpu.seconds()
        time.sleep(1.0)  # the listener's last events arrive asynchronously
        if run.stopped_early and batches.last is not None:
            # Count time up to the end of the last finished batch, with the rows it finished.
            run.seconds = batches.last - started
            run.cpu_seconds = None  # (it counts the batch that was cut short too)
    finally:
        batches.detach(spark)
    run.batch_ms = batches.batch_ms
    run.durations = batches.durations
    run.rows_in = run.rows_in or batches.rows
    if engine == "spark-native":
        run.state_rows, run.state_bytes = batches.state_rows, batches.state_bytes
        run.dropped_late = batches.dropped_late
    if not run.out:
        outputs: list[Query | GroupQuery] = [*job.queries, *job.group_queries]
        run.out = {q.name: _count(spark, _out_path(job, q)) for q in outputs}
    return run


def _jvm_flags(spark: SparkSession) -> str:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    args = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    # (Spark adds -XX:+IgnoreUnrecognizedVMOptions to every driver: not a tuning.)
    return " ".join(a for a in args if a.startswith("-XX:") and "IgnoreUnrecognized" not in a)


def _out_path(job: Job, q: Query | GroupQuery) -> str:
    path = job.sink(q.sink).option("path")
    assert path is not None
    return path if len(job.outputs) == 1 else f"{path}/{q.name}"


def _count(spark: SparkSession, path: str) -> int:
    written = any(f.endswith(".parquet") for _, _, files in os.walk(path) for f in files)
    return spark.read.parquet(path).count() if written else 0


def _run_streamjoin(
    spark: SparkSession,
    job: Job,
    workdir: str,
    run: EngineRun,
    trigger: str | None = None,
    final: bool = False,
) -> None:
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.metrics.history import read_history
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.fs import FileStore

    summary = Engine(spark).run(
        job,
        checkpoint=os.path.join(workdir, "ckpt"),
        once=trigger is None,
        trigger=trigger or "1 second",
        progress=False,
        final=final,
    )
    run.rows_in = sum(summary.rows_in.values())
    run.out = dict(summary.out)
    run.state_rows = sum(summary.state_rows.values())
    # Stream stores and MIR stores (multi-way joins), and the input files live units of file
    # streams are read back from (`streamjoin.runtime.state.sourcefiles`).
    stores = ("state", "mir")
    run.state_bytes = sum(_dir_bytes(os.path.join(workdir, "ckpt", s)) for s in stores)
    latest = Checkpoint(FileStore(spark), os.path.join(workdir, "ckpt")).latest()
    run.state_bytes += sum(u.bytes for u in latest.units if u.files)
    run.history = [f.to_dict() for f in read_history(os.path.join(workdir, "ckpt", "metrics"))]


def _run_streamjoin_live(
    spark: SparkSession, job: Job, workdir: str, run: EngineRun, live: Live
) -> bool:
    """`Engine.run` with a processing-time trigger in a thread; this thread watches the
    checkpoint and stops the engine's query once the feed is processed."""
    import threading

    before = {q.id for q in spark.streams.active}
    failure: list[BaseException] = []

    def target() -> None:
        try:
            _run_streamjoin(spark, job, workdir, run, trigger=live.trigger)
        except BaseException as err:  # re-raised in the calling thread
            failure.append(err)

    thread = threading.Thread(target=target, name="streamjoin-live", daemon=True)
    thread.start()
    queries: list[t.Any] = []
    while not queries and thread.is_alive():
        queries = [q for q in spark.streams.active if q.id not in before]
        time.sleep(0.1)
    stopped = _await_live(queries, workdir, live) if queries else False
    thread.join()
    if failure and not stopped:  # a batch cut short by the drain limit is no failure
        raise failure[0]
    return stopped


def _dir_bytes(root: str) -> int:
    return sum(
        os.path.getsize(os.path.join(d, f))
        for d, _, files in os.walk(root)
        for f in files
        if not f.startswith((".", "_"))
    )


def _stream_frame(spark: SparkSession, s: StreamDef) -> DataFrame:
    from streamjoin.runtime.sources import reader_options, schema_ddl

    df = (
        spark.readStream.format(s.format)
        .options(**reader_options(s))
        .schema(schema_ddl(s))
        .load(s.option("path"))
    )
    if s.watermark is not None:
        df = df.withWatermark(s.watermark.column, f"{s.watermark.delay_us} microseconds")
    return df


def _query_sql(q: Query, left: str, right: str) -> str:
    select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
    return (
        f"SELECT {select} FROM {left} AS {q.left.alias} JOIN {right} AS {q.right.alias} "
        f"ON ({q.predicate})"
    )


def _unmatched_sql(op: OuterPlan, before: int | None, now: int) -> list[str]:
    """The foreachBatch peer's rows without a partner: per preserved side, its kept and new
    rows that the watermark moving from `before` to `now` decides, anti-joined with the other
    side's kept and new rows, the other side's columns NULL."""
    q, out = op.query, []
    for i in (0, 1):
        if not op.outer.preserves(i):
            continue
        lo, hi = op.dead_below(i, before), op.dead_below(i, now)
        assert hi is not None
        mine, other = q.sides[i], q.sides[1 - i]
        m, o = mine.alias, other.alias
        ts = f"unix_micros({m}.ts)"
        bounds = f"{ts} < {hi}" + (f" AND {ts} >= {lo}" if lo is not None else "")
        rows = f"(SELECT * FROM old_{mine.stream} UNION ALL SELECT * FROM new_{mine.stream})"
        partners = f"(SELECT * FROM old_{other.stream} UNION ALL SELECT * FROM new_{other.stream})"
        select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
        sql = (
            f"SELECT {select} FROM (SELECT {m}.* FROM {rows} AS {m} LEFT ANTI JOIN {partners} "
            f"AS {o} ON ({op.outer.on}) WHERE {bounds}) AS {m} "
            f"LEFT JOIN (SELECT * FROM {partners} WHERE false) AS {o} ON false"
        )
        out.append(sql + (f" WHERE {op.outer.where}" if op.outer.where else ""))
    return out


def _await(queries: list[t.Any], time_limit: float | None) -> bool:
    """Wait for `queries` to end; past `time_limit` stop them. True if any was stopped."""
    deadline = None if time_limit is None else time.monotonic() + time_limit
    stopped = False
    for query in queries:
        while query.isActive:
            query.awaitTermination(1)
            if deadline is not None and time.monotonic() > deadline and query.isActive:
                query.stop()
                stopped = True
        if query.exception() is not None and not stopped:
            raise RuntimeError(str(query.exception()).splitlines()[0])
    return stopped


def _await_live(queries: list[t.Any], workdir: str, live: Live) -> bool:
    """Signal readiness, then wait until the feed is processed; past the drain limit, stop the
    queries anyway. True if stopped before every fed file was processed."""
    from streamjoin.runtime.engine import interrupted

    with open(os.path.join(workdir, "ready"), "w", encoding="utf-8") as f:
        f.write(str(time.time()))
    deadline: float | None = None
    fed: set[str] = set()
    stopped = False
    while any(q.isActive for q in queries):
        queries[0].awaitTermination(0.5)
        if deadline is None and os.path.exists(live.done):
            with open(live.done, encoding="utf-8") as f:
                fed = {os.path.abspath(p) for p in json.load(f)["files"]}
            deadline = time.monotonic() + live.drain_limit
        if deadline is None:
            continue
        done = drained(workdir, fed)
        if done or time.monotonic() > deadline:
            stopped = not done
            for q in queries:
                q.stop()
    for q in queries:
        # Stopping interrupts whatever a query was doing (with watermarks, Spark may be planning
        # a no-data batch); an error that interruption raises is the stop's, not the run's.
        if q.exception() is not None and not stopped and not interrupted(q):
            raise RuntimeError(str(q.exception()).splitlines()[0])
    return stopped


def _trigger(writer: t.Any, live: Live | None) -> t.Any:
    return (
        writer.trigger(availableNow=True)
        if live is None
        else writer.trigger(processingTime=live.trigger)
    )


def _run_native(
    spark: SparkSession, job: Job, workdir: str, time_limit: float | None, live: Live | None
) -> bool:
    from streamjoin.plan.groups import spark_sql

    queries = []
    for q in job.queries:
        views = {}
        for side in q.sides:
            view = f"native_{q.name}_{side.alias}"
            _stream_frame(spark, job.stream(side.stream)).createOrReplaceTempView(view)
            views[side.alias] = view
        out = spark.sql(_query_sql(q, views[q.left.alias], views[q.right.alias]))
        queries.append(_start_parquet(out, _out_path(job, q), workdir, q.name, live))
    for g in job.group_queries:
        views = {}
        for stream in g.streams:
            views[stream] = f"native_{g.name}_{stream}"
            _stream_frame(spark, job.stream(stream)).createOrReplaceTempView(views[stream])
        out = spark.sql(spark_sql(g, views))
        queries.append(_start_parquet(out, _out_path(job, g), workdir, g.name, live))
    return _await(queries, time_limit) if live is None else _await_live(queries, workdir, live)


def _start_parquet(
    out: DataFrame, path: str, workdir: str, name: str, live: Live | None
) -> StreamingQuery:
    """Spark's own streaming query writing `out` to the Parquet directory `path`."""
    writer = out.writeStream.format("parquet").option("path", path)
    writer = writer.option("checkpointLocation", os.path.join(workdir, "ckpt", name))
    return t.cast("StreamingQuery", _trigger(writer, live).start())


def _run_foreach(
    spark: SparkSession, job: Job, workdir: str, time_limit: float | None, live: Live | None
) -> bool:
    """The straightforward foreachBatch join: every batch's new rows joined with all kept rows
    (within the largest window any query needs), then appended to the kept rows."""
    from pyspark.sql import functions as F

    from streamjoin.plan import plan_job

    plan = plan_job(job)
    frames = []
    for i, sp in enumerate(plan.streams):
        df = _stream_frame(spark, sp.stream)
        cols = [F.col(c.name).alias(f"{sp.name}__{c.name}") for c in sp.stream.columns]
        frames.append(df.select(F.lit(i).alias("_src"), *cols))
    union = frames[0]
    for f in frames[1:]:
        union = union.unionByName(f, allowMissingColumns=True)
    kept = os.path.join(workdir, "kept")
    stream_wm: dict[str, int] = {}
    horizon: dict[str, int] = {}
    marks: list[int | None] = [None]
    """The global watermark after the last batch."""

    def batch(df: DataFrame, batch_id: int) -> None:
        s = df.sparkSession
        df.persist()
        new = {}
        for i, sp in enumerate(plan.streams):
            cols = [F.col(f"{sp.name}__{c.name}").alias(c.name) for c in sp.stream.columns]
            new[sp.name] = df.where(F.col("_src") == i).select(*cols)
            new[sp.name].createOrReplaceTempView(f"new_{sp.name}")
            path = os.path.join(kept, sp.name)
            old = (
                s.read.parquet(path)
                if os.path.exists(path)
                else s.createDataFrame([], new[sp.name].schema)
            )
            ts = sp.stream.event_time
            if sp.name in horizon and ts is not None:
                # Rows no future row can join are filtered out (the kept table only grows).
                old = old.where(F.col(ts) >= F.expr(f"timestamp_micros({horizon[sp.name]})"))
            old.createOrReplaceTempView(f"old_{sp.name}")
        for q in job.queries:
            lv, rv = q.left.stream, q.right.stream
            parts = [
                _query_sql(
                    q, f"new_{lv}", f"(SELECT * FROM old_{rv} UNION ALL SELECT * FROM new_{rv})"
                ),
                _query_sql(q, f"old_{lv}", f"new_{rv}"),
            ]
            s.sql(" UNION ALL ".join(f"({p})" for p in parts)).write.mode("append").parquet(
                _out_path(job, q)
            )
        for sp in plan.streams:
            new[sp.name].write.mode("append").parquet(os.path.join(kept, sp.name))
            wm = sp.stream.watermark
            if wm is not None:
                hi = new[sp.name].agg(F.max(F.unix_micros(F.col(wm.column)))).first()
                if hi is not None and hi[0] is not None:
                    mark = int(hi[0]) - wm.delay_us
                    stream_wm[sp.name] = max(stream_wm.get(sp.name, mark), mark)
        timed = [sp for sp in plan.streams if sp.stream.watermark is not None]
        if timed and all(sp.name in stream_wm for sp in timed):
            global_wm = max(min(stream_wm[sp.name] for sp in timed), marks[0] or -(2**62))
            for op in plan.outers:
                # The preserved rows the new watermark decides, without a partner.
                for sql in _unmatched_sql(op, marks[0], global_wm):
                    s.sql(sql).write.mode("append").parquet(_out_path(job, op.query))
            marks[0] = global_wm
            for sp in plan.streams:
                h = sp.horizon(global_wm)
                if h is not None:
                    horizon[sp.name] = h
        df.unpersist()

    query = _trigger(
        union.writeStream.foreachBatch(batch).option(
            "checkpointLocation", os.path.join(workdir, "ckpt", "foreach")
        ),
        live,
    ).start()
    return _await([query], time_limit) if live is None else _await_live([query], workdir, live)


def main(argv: list[str]) -> int:
    """``ENGINE PLAN RESULT``: run each job of the JSON plan in turn, write the runs as JSON."""
    engine, plan_file, result = argv
    with open(plan_file, encoding="utf-8") as f:
        plan = json.load(f)
    runs = []
    for item in plan:
        with open(item["job"], encoding="utf-8") as f:
            text = f.read()
        try:
            live = Live(**item["live"]) if item.get("live") else None
            run = run_engine(
                engine, text, item["workdir"], item["time_limit"], live, item.get("final", False)
            )
        except Exception as err:  # reported to the harness, which prints it
            run = EngineRun(engine, error=f"{type(err).__name__}: {str(err).splitlines()[0]}")
        runs.append(asdict(run))
    with open(result, "w", encoding="utf-8") as f:
        json.dump(runs, f)
    return 0 if all(r["error"] is None for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
