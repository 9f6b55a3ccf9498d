"""One engine on a live feed of one case (`benchmarks.rate`): the engine in a process of its
own (or in this one), this process feeding it; its figures and whether it keeps up."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import typing as t
from dataclasses import asdict

from benchmarks.engines import run_engine
from benchmarks.engines_flink import FLINK, reads_path, trace_path
from benchmarks.engines_live import Live
from benchmarks.harness import ROOT
from benchmarks.harness_figures import _percentile
from benchmarks.harness_process import run_engine_process
from benchmarks.rate_feed import _live_job, _warmup, feed
from benchmarks.rate_latency import CommitWatch, latency_figures, traced_done_times

if t.TYPE_CHECKING:
    from benchmarks.rate_feed import FedFile, Feed
    from benchmarks.workloads import Case


def _traced_done(job_text: str, workdir: str, fed: list[FedFile]) -> dict[str, float]:
    """When each fed file was done by ``flink``: from its queries' traces."""
    from streamjoin.sql import parse_job

    job = parse_job(job_text.replace("{out}", os.path.join(workdir, "out")), "<live>")
    traces = {trace_path(workdir, q.name): (q.left.stream, q.right.stream) for q in job.queries}
    reads = {reads_path(workdir, s.name): s.name for s in job.streams}
    return traced_done_times(traces, reads, fed)


def drain_limit(duration: float) -> float:
    """Seconds an engine may take, after the feed stops, to process what is left."""
    return max(60.0, duration)


def _run_one(
    case: Case,
    engine: str,
    source: Feed,
    *,
    duration: float,
    tick: float,
    trigger: float,
    in_process: bool,
    warmup: bool,
    master: str | None = None,
) -> tuple[dict[str, t.Any], str]:
    """`engine` on a live feed of `case`; its figures and the job text it ran (live paths);
    `master`: a cluster's to run on (default: local mode; not `in_process`)."""
    base = os.path.join(ROOT, "rate", case.name, engine)
    shutil.rmtree(base, ignore_errors=True)
    dirs = {name: os.path.join(base, "feed", name) for name in source.streams}
    # (Flink reads CSV files, fed in their own folders; the Parquet copies are checked.)
    csv_dirs = {n: os.path.join(base, "feed-csv", n) for n in dirs} if engine == FLINK else None
    for folder in [*dirs.values(), *(csv_dirs or {}).values()]:
        os.makedirs(folder)
    workdir, done = os.path.join(base, "work"), os.path.join(base, "done.json")
    job = _live_job(case, dirs)
    run_job = job if csv_dirs is None else _live_job(case, csv_dirs)
    live = Live(
        f"{trigger:g} seconds",
        done,
        drain_limit(duration),
        _warmup(case, source, base) if warmup else None,
    )
    result: list[dict[str, t.Any]] = []

    def engine_run() -> None:
        if in_process:
            os.makedirs(workdir)
            out = os.path.join(workdir, "out")
            try:
                result.append(
                    asdict(run_engine(engine, run_job.replace("{out}", out), workdir, None, live))
                )
            except Exception as err:  # reported like a failed engine process
                first = (str(err).strip().splitlines() or [""])[0]
                result.append({"engine": engine, "error": f"{type(err).__name__}: {first}"})
        else:
            # The engine has a process of its own, the feeder stays in this one: its Parquet
            # writes and its GIL do not compete with the engine's driver (streamjoin's batches
            # run Python in the driver, Spark's native join does not), and the engine's peak
            # memory is its own.
            live_run = asdict(live)
            log = os.path.join(base, "engine.err")  # (its whole stderr: a failure's trace)
            result.extend(
                run_engine_process(
                    engine, [(run_job, workdir)], None, live_run, master=master, log=log
                )
            )

    thread = threading.Thread(target=engine_run, name=f"bench-{engine}", daemon=True)
    watch = CommitWatch(workdir)
    watch.start()
    thread.start()
    ready = os.path.join(workdir, "ready")
    deadline = time.monotonic() + 180
    while not os.path.exists(ready) and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    stop = threading.Event()
    if not os.path.exists(ready):
        stop.set()
    seconds = duration if not stop.is_set() else 0
    fed, started, ended = feed(source, dirs, seconds, tick, stop, csv_dirs)
    with open(done + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"files": [x.path for x in fed], "rows": [x.rows for x in fed]}, f)
    os.rename(done + ".tmp", done)
    thread.join()
    watch.stop()
    run: dict[str, t.Any] = result[0] if result else {"engine": engine, "error": "no report"}
    if run.get("error"):
        return {"engine": engine, "error": run["error"]}, job
    traced = _traced_done(job, workdir, fed) if engine == FLINK else None
    figures = latency_figures(workdir, fed, started, ended, trigger, watch, traced)
    batch = run.get("batch_ms") or []
    processed = figures["rows_processed"] == figures["rows_fed"]
    drained = not run.get("stopped_early") and processed
    growth = figures["latency_growth"]
    batch_s = (_percentile(batch, 50) or 0.0) / 1000
    keeps_up = (
        drained
        and figures["backlog_at_end_s"] <= 2 * max(trigger, batch_s) + tick
        and (growth is None or growth <= 2.0)
    )
    return {
        "engine": engine,
        "rate_per_stream": source.rate,
        **figures,
        "rows_in": run.get("rows_in"),
        "batches": len(batch),
        "batch_p50_ms": _percentile(batch, 50),
        "batch_p95_ms": _percentile(batch, 95),
        "batch_p99_ms": _percentile(batch, 99),
        "batch_ms": batch,
        "drained": drained,
        "keeps_up": keeps_up,
        "within_trigger": batch_s <= trigger if trigger else None,  # (0: no interval)
        "out": run.get("out"),
        "dropped_late": run.get("dropped_late", 0),
        "peak_rss_mb": run.get("peak_rss_mb"),
    }, job
