"""This project's engine as a benchmark runs it (``streamjoin`` in `benchmarks.engines`):
`Engine.run` over a backlog, or in a thread on a live source, and the figures its summary and
checkpoint give."""

from __future__ import annotations

import os
import time
import typing as t

from benchmarks.engines_live import _await_live

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from benchmarks.engines_live import Live
    from benchmarks.engines_measure import EngineRun
    from streamjoin.model import Job


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
