"""The engines a benchmark compares, each run on one job over one backlog in its own process.

- ``streamjoin``: this project's engine (`streamjoin.Engine.run` with ``once``).
- ``spark-native``: Spark's own stream-stream join: each stream read with ``withWatermark`` and
  the query's SELECT … JOIN … ON run as Spark SQL over the streaming views (equi predicates only;
  Spark refuses the rest).
- ``spark-foreach``: what a Spark user writes today for a non-equi join: ``foreachBatch``, keep
  past input in a Parquet table and join each batch against it with the query's condition.
- ``flink``: the job's own SQL run by Flink in streaming mode on a local mini-cluster
  (`engines_flink`), translated where Flink's SQL differs; only when ``--engines`` names it,
  in PyFlink's own venv, made on its first run (`flink_env`).
- ``spark-floor``: no join at all: Spark's micro-batch loop over the job's streams as our engine
  reads them, each batch's rows read once into Spark's ``noop`` sink (`engines_floor`): the
  least a batch costs any engine that runs in that loop, ours included.

The Spark engines read the same Parquet files with the same ``maxFilesPerTrigger``; the joins
write Parquet. A listener records each micro-batch's ``triggerExecution`` time, so batch times
are measured the same way for all of them. Run as ``python -m benchmarks.engines ENGINE PLAN
RESULT`` (see `main`).

With `Live` options (the ``--rate`` mode, `benchmarks.rate`) an engine runs with a
processing-time trigger instead, writes ``ready`` in its workdir once its queries are started,
and stops once every file the feeder lists in its ``done`` file has been committed (or when the
drain limit has passed, marked ``stopped_early``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import typing as t
from dataclasses import asdict

from benchmarks.engines_flink import FLINK, run_flink
from benchmarks.engines_floor import FLOOR, _run_floor
from benchmarks.engines_live import Live
from benchmarks.engines_measure import CpuClock, EngineRun, ProbeWork, _Batches
from benchmarks.engines_peers import _out_path, _run_foreach, _run_native
from benchmarks.engines_streamjoin import _run_streamjoin, _run_streamjoin_live
from streamjoin.runtime.session import DRIVER_JAVA_OPTIONS

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.model import GroupQuery, Query

ENGINES = ("streamjoin", "spark-native", "spark-foreach", FLOOR, FLINK)


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


def _unload_state_stores(spark: SparkSession) -> None:
    """Stop the queries still running in `spark` (a run that failed leaves some) and let go of
    the state stores of the driver's JVM: Spark keeps them loaded until its maintenance task
    finds them inactive, up to a minute later, so a run after them in this process (`--warm`'s)
    would start with their state in its heap (local mode: a cluster's executors keep theirs).
    Nothing is raised here: a run's own error is the one to report."""
    from py4j.protocol import Py4JError

    with contextlib.suppress(Py4JError, ConnectionError):
        for query in spark.streams.active:
            query.stop()
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()


def _detach(spark: SparkSession, engine: str, batches: _Batches) -> None:
    """What a run left on the session goes: its listener, a native run's state stores."""
    batches.detach(spark)
    if engine == "spark-native":
        _unload_state_stores(spark)


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
    if live is not None and engine == FLOOR:
        msg = f"{FLOOR} runs over a backlog, not on a live source (--rate)"
        raise ValueError(msg)
    if engine == FLINK:  # (no Spark session: its own JVM; its input always ends, as `final`)
        return run_flink(job, workdir, time_limit, live, job_text)
    if live is not None and live.warmup is not None:
        warm = os.path.join(workdir, "warmup")
        run_engine(engine, live.warmup.replace("{out}", os.path.join(warm, "out")), warm)
    spark = session(engine)
    batches = _Batches()
    batches.attach(spark)
    settings = {k: v for k, v in PEER_CONF.get(engine, {}).items() if k != _JAVA_OPTIONS}
    run = EngineRun(engine, jvm_flags=_jvm_flags(spark), settings=settings)
    cpu = CpuClock.of(spark)
    local = not os.environ.get(MASTER_ENV)
    work = ProbeWork.of(spark) if engine == "streamjoin" and local else None
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
        elif engine == FLOOR:
            run.stopped_early = _run_floor(spark, job, workdir, time_limit)
        else:
            msg = f"unknown engine {engine!r} (one of {', '.join(ENGINES)})"
            raise ValueError(msg)
        run.seconds = time.monotonic() - started
        # (On a cluster the executors' CPU is in other processes: not counted, not shown.)
        run.cpu_seconds = cpu.seconds() if local else None
        if work is not None:
            run.probe_pairs, probe_cpu = work.since()
            run.probe_cpu_seconds = round(probe_cpu, 2)
        time.sleep(1.0)  # the listener's last events arrive asynchronously
        if run.stopped_early and batches.last is not None:
            # Count time up to the end of the last finished batch, with the rows it finished.
            run.seconds = batches.last - started
            run.cpu_seconds = None  # (it counts the batch that was cut short too)
            run.probe_pairs = run.probe_cpu_seconds = None
    except BaseException:
        # (The engine's error stands: a clean-up on a JVM that died with the run would hide it.)
        with contextlib.suppress(Exception):
            _detach(spark, engine, batches)
        raise
    _detach(spark, engine, batches)
    run.batch_ms = batches.batch_ms or run.batch_ms  # (the engine's own loop: its own)
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


def _count(spark: SparkSession, path: str) -> int:
    written = any(f.endswith(".parquet") for _, _, files in os.walk(path) for f in files)
    return spark.read.parquet(path).count() if written else 0


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
