"""This project's engine as a benchmark runs it (``streamjoin`` in `benchmarks.engines`):
`Engine.run` over a backlog, or in a thread on a live source, and the figures its summary and
checkpoint give."""

from __future__ import annotations

import os
import typing as t

from benchmarks.engines_live import await_drained

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from benchmarks.engines_live import Live
    from benchmarks.engines_measure import EngineRun
    from streamjoin.model import Job
    from streamjoin.runtime.engine import Engine


def _run_streamjoin(
    spark: SparkSession,
    job: Job,
    workdir: str,
    run: EngineRun,
    trigger: str | None = None,
    final: bool = False,
    engine: Engine | None = None,
) -> None:
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.metrics.history import read_history
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.fs import FileStore

    summary = (engine or Engine(spark)).run(
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
    # Stream stores, and the input files live units of file streams are read back from
    # (`streamjoin.runtime.state.sourcefiles`).
    run.state_bytes = _dir_bytes(os.path.join(workdir, "ckpt", "state"))
    latest = Checkpoint(FileStore(spark), os.path.join(workdir, "ckpt")).latest()
    run.state_bytes += sum(u.bytes for u in latest.units if u.files)
    history = read_history(os.path.join(workdir, "ckpt", "metrics"))
    run.history = [f.to_dict() for f in history]
    # (In the engine's own loop no Spark progress times a batch: its record does, from the
    # listing of its files to its commit.)
    run.batch_ms = [round(1000 * f.seconds, 1) for f in history]


def _run_streamjoin_live(
    spark: SparkSession, job: Job, workdir: str, run: EngineRun, live: Live
) -> bool:
    """`Engine.run` with a processing-time trigger in a thread; this thread watches the
    checkpoint and stops the engine once the feed is processed."""
    import threading

    from streamjoin.runtime.engine import Engine

    engine = Engine(spark)
    failure: list[BaseException] = []

    def target() -> None:
        try:
            _run_streamjoin(spark, job, workdir, run, trigger=live.trigger, engine=engine)
        except BaseException as err:  # re-raised in the calling thread
            failure.append(err)

    thread = threading.Thread(target=target, name="streamjoin-live", daemon=True)
    thread.start()
    while not engine.running.wait(0.1) and thread.is_alive():
        pass

    def alive() -> bool:
        thread.join(0.5)
        return thread.is_alive()

    stopped = await_drained(alive, engine.stop, workdir, live) if thread.is_alive() else False
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
