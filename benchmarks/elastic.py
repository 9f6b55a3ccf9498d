"""The overload benchmark's elasticity case (issue 35, BiStream's scale-out): a live equi join
on the two-worker standalone cluster of `streamjoin cluster` (one core each) while the input
rate steps up 3× for the middle third of the run and back, run twice: with elastic executors
(``streamjoin.elastic.maxExecutors = 2``, starting from one) and without (one executor
throughout, ``spark.cores.max = 1``).

``python -m benchmarks.elastic [--rate R] [--duration S] [--out F]``. The feed is
`benchmarks.rate`'s (a Parquet file per stream every half second); the workload is the
overload case's with both streams 3× denser in the middle third of their event time. Reported
per run, over the run in 5-second buckets: the latency of the rows written in the bucket, the
backlog (rows written and not yet committed, as seconds of input at the base rate) and the
cores the master gave the run; and the run's latency p50/p99 and whether it kept up.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import typing as t

from benchmarks.data import two_streams, write_backlog
from benchmarks.harness import ROOT, _say, machine, source_commit
from benchmarks.harness_exact import expected_counts
from benchmarks.harness_figures import _percentile
from benchmarks.overload import stepped
from benchmarks.rate import TRIGGER
from benchmarks.rate_feed import TICK, FedFile, Feed, _live_job, feed
from benchmarks.rate_latency import CommitWatch, done_times, latency_figures
from benchmarks.sparklog import drained
from benchmarks.workloads import Case, two_stream_job
from streamjoin.runtime.loop import EMPTY_DIR

KEYS = 2_000
ON = "l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL '10' SECOND AND l.ts"
"""An ``l`` row joins the ``r`` rows of its key in the 10 s before it."""
RATE = 2_000.0
"""Rows a second per stream in the outer thirds (3× in the middle one)."""
DURATION = 90.0
BUCKET = 5.0
WAYS = {
    "elastic": "--conf spark.streamjoin.elastic.maxExecutors=2",
    "fixed": "--conf spark.cores.max=1",
}


def step_case(root: str, rate: float, duration: float) -> Case:
    """Streams ``a`` and ``b`` over `duration` seconds of event time: `rate` rows a second
    each in the outer thirds, 3× in the middle one (`overload.stepped`), joined on `ON`."""
    tables = two_streams(round(3 * rate * duration), span_seconds=duration, keys=KEYS, seed=13)
    keep = stepped(tables, ("a", "b"))
    backlog = write_backlog(os.path.join(root, "elastic"), keep, {"a": "ts", "b": "ts"}, 12)
    return Case("elastic", two_stream_job(backlog, ON), None, backlog, 10.0, ON)


def run_way(
    way: str,
    master: str,
    status: t.Callable[[], dict[str, t.Any]],
    rate: float,
    duration: float,
    trigger: float = TRIGGER,
) -> dict[str, t.Any]:
    """One run of the step workload on the cluster at `master`: its figures and series."""
    case = step_case(os.path.join(ROOT, "data", "elastic"), rate, duration)
    # (The feed's average rate that replays the whole backlog once in `duration` seconds.)
    source = Feed(case, sum(case.backlog.rows.values()) / (2 * duration))
    base = os.path.join(ROOT, "elastic", way)
    shutil.rmtree(base, ignore_errors=True)
    dirs = {name: os.path.join(base, "feed", name) for name in case.backlog.streams}
    for folder in dirs.values():
        os.makedirs(folder)
    workdir = os.path.join(base, "work")
    os.makedirs(workdir)
    job = os.path.join(base, "job.sql")
    with open(job, "w", encoding="utf-8") as f:
        f.write(_live_job(case, dirs).replace("{out}", os.path.join(workdir, "out")))
    quick = "-XX:TieredStopAtLevel=1"
    submit = (
        f"--conf spark.executor.extraJavaOptions={quick} {WAYS[way]} "
        "--conf spark.sql.shuffle.partitions=2 pyspark-shell"
    )
    ckpt = os.path.join(workdir, "ckpt")
    args = ["run", job, "--checkpoint", ckpt, "--trigger", f"{trigger:g}s", "--master", master]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamjoin", *args],
        env=dict(os.environ, PYSPARK_SUBMIT_ARGS=submit),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.extend(proc.stderr or []), daemon=True)
    reader.start()
    deadline = time.monotonic() + 180
    # (Started: Spark's loop wrote its query's metadata, or the engine's loop made its scan.)
    marks = [os.path.join(ckpt, "spark", "metadata"), os.path.join(ckpt, EMPTY_DIR)]
    while not any(os.path.exists(m) for m in marks):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            return {"way": way, "error": "".join(errors[-5:]) or "the run did not start"}
        time.sleep(0.2)
    cores: list[tuple[float, int]] = []
    stop = threading.Event()
    began = time.time()

    def watch_cores() -> None:
        while not stop.wait(1.0):
            apps = status().get("activeapps", [])
            cores.append((round(time.time() - began, 1), int(apps[0]["cores"]) if apps else 0))

    watcher = threading.Thread(target=watch_cores, daemon=True)
    watcher.start()
    commits = CommitWatch(workdir)
    commits.start()
    fed, started, ended = feed(source, dirs, duration, TICK)
    limit = time.monotonic() + max(60.0, duration)
    paths = {os.path.abspath(x.path) for x in fed}
    while not drained(workdir, paths) and time.monotonic() < limit and proc.poll() is None:
        time.sleep(0.5)
    died = proc.poll()
    if died is None:
        with contextlib.suppress(ProcessLookupError):  # (gone meanwhile)
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stop.set()
    watcher.join()
    reader.join(timeout=5)
    commits.stop()
    figures = latency_figures(workdir, fed, started, ended, trigger, commits)
    steps = [line.strip() for line in errors if line.startswith("executors ")]
    if died:  # (the run stopped by itself, before its input was done)
        figures["error"] = f"exit {died}: " + "".join(errors[-5:]).strip()
    with open(job, encoding="utf-8") as f:
        expected = expected_counts(Case(case.name, f.read(), None, case.backlog))
    out = written_rows(os.path.join(workdir, "out"))
    batches = batch_records(ckpt)
    return {
        "way": way,
        **figures,
        "keeps_up": figures["rows_processed"] == figures["rows_fed"]
        and (figures["latency_growth"] or 0) <= 2.0,
        "out": out,
        "expected": None if expected is None else expected["q1"],
        "exact": None if expected is None or died else out == expected["q1"],
        "steps": steps,
        **change_figures(batches, steps),
        "batches": batches,
        "series": series(fed, done_times(workdir, fed, commits), started, ended, rate, cores),
    }


def written_rows(folder: str) -> int:
    """The rows of a Parquet sink's files under `folder` (a directory per batch)."""
    import pyarrow.parquet as pq

    files = glob.glob(os.path.join(folder, "**", "part-*.parquet"), recursive=True)
    return sum(pq.ParquetFile(p).metadata.num_rows for p in files)


def batch_records(checkpoint: str) -> list[dict[str, t.Any]]:
    """Each batch of the run: its time, its units (shuffle partitions) and what happened to
    its operator's indexes (the metrics history's events)."""
    from streamjoin.runtime.metrics.history import read_history

    return [
        {"batch": f.batch, "seconds": f.seconds, "units": f.parallelism, "events": f.events}
        for f in read_history(os.path.join(checkpoint, "metrics"))
    ]


def change_figures(batches: list[dict[str, t.Any]], steps: list[str]) -> dict[str, t.Any]:
    """The batches during each change of executors against the others: a change runs from the
    batch after its decision (``executors 1 -> 2 after batch N``) to the batch that ended it,
    the old index's drain gone (a scale-out) or the executor given back (a scale-in).

    Example:
        >>> rows = [{"batch": b, "seconds": 1.0, "events": []} for b in range(8)]
        >>> rows[3]["seconds"], rows[4]["events"] = 3.0, ["q1: the index that drained went"]
        >>> f = change_figures(rows, ["executors 1 -> 2 after batch 1 (batches behind ...)"])
        >>> f["change_batches"], f["change_batch_max_s"], f["steady_batch_p99_s"]
        ([2, 3, 4], 3.0, 1.0)
    """
    during: set[int] = set()
    spread_on = None
    for line in steps:
        decided = re.match(r"executors (\d+) -> (\d+) after batch (\d+)", line)
        if decided is None:
            continue
        first = int(decided[3]) + 1
        out = int(decided[2]) > int(decided[1])
        end = next(
            (b["batch"] for b in batches if b["batch"] >= first and _ends(b, out, steps)), None
        )
        last = end if end is not None else max((b["batch"] for b in batches), default=first)
        during |= {b["batch"] for b in batches if first <= b["batch"] <= last}
        if out:
            started = [
                e
                for b in batches
                if b["batch"] >= first
                for e in b["events"]
                if "started empty" in e
            ]
            if started:
                spread_on = len(
                    ast.literal_eval(re.findall(r"on executors (\[.*?\])", started[0])[0])
                )
    steady = [b["seconds"] for b in batches if b["batch"] not in during]
    changes = [b["seconds"] for b in batches if b["batch"] in during]
    return {
        "change_batches": sorted(during),
        "change_batch_max_s": max(changes, default=None),
        "steady_batch_p99_s": _percentile(steady, 99),
        "spread_on": spread_on,
    }


def _ends(batch: dict[str, t.Any], out: bool, steps: list[str]) -> bool:
    """Whether `batch` ends a change: its old index's drain went (a scale-out), or an executor
    was given back after it (a scale-in)."""
    if out:
        return any("the index that drained went" in e for e in batch["events"])
    return any(f"given back after batch {batch['batch']}:" in line for line in steps)


def series(
    fed: list[FedFile],
    done: t.Mapping[str, float],
    started: float,
    ended: float,
    rate: float,
    cores: list[tuple[float, int]],
) -> list[dict[str, t.Any]]:
    """Per `BUCKET` seconds of the run: the latency p50 of the rows written in it, the backlog
    at its end (seconds of input at `rate` per stream), the cores the run had."""
    out = []
    streams = len({os.path.dirname(f.path) for f in fed}) or 1
    for i in range(int((ended - started) // BUCKET) + 1):
        lo, hi = started + i * BUCKET, started + (i + 1) * BUCKET
        lat = sorted(
            done[f.path] - f.written for f in fed if lo <= f.written < hi and f.path in done
        )
        waiting = sum(
            f.rows for f in fed if f.written < hi and (f.path not in done or done[f.path] > hi)
        )
        have = [c for at, c in cores if lo - started <= at < hi - started]
        out.append(
            {
                "t": round(i * BUCKET, 1),
                "latency_p50_s": round(lat[len(lat) // 2], 3) if lat else None,
                "backlog_s": round(waiting / (rate * streams), 2),
                "cores": max(have) if have else None,
            }
        )
    return out


def run_elastic(
    rate: float = RATE,
    duration: float = DURATION,
    progress: t.TextIO | None = None,
    trigger: float = TRIGGER,
) -> dict[str, t.Any]:
    """Both runs on one two-worker cluster: the JSON report."""
    from streamjoin.cluster import LocalCluster

    began = time.monotonic()
    runs = {}
    folder = os.path.join(ROOT, "elastic", "cluster")
    shutil.rmtree(folder, ignore_errors=True)
    with LocalCluster(folder, workers=2, cores=1) as cluster:
        for way in WAYS:
            cluster.wait_workers(cluster.workers)
            _say(progress, f"[elastic] {way}: {rate:g} rows/s per stream, 3× mid-run …")
            runs[way] = run_way(way, cluster.master_url, cluster.status, rate, duration, trigger)
            r = runs[way]
            _say(
                progress,
                f"[elastic] {way}: "
                + (
                    f"ERROR {r['error']}"
                    if r.get("error")
                    else f"latency p50/p99 {r['latency_p50_s']}/{r['latency_p99_s']} s, "
                    f"max backlog {max(s['backlog_s'] for s in r['series'])} s, {r['steps']}"
                ),
            )
    return {
        "workload": "elastic",
        "rate_per_stream": rate,
        "duration_s": duration,
        "trigger_s": trigger,
        "runs": runs,
        "machine": machine(),
        "commit": source_commit(),
        "wall_seconds": round(time.monotonic() - began, 1),
    }


def main(argv: t.Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.elastic")
    parser.add_argument("--rate", type=float, default=RATE)
    parser.add_argument("--duration", type=float, default=DURATION)
    parser.add_argument("--trigger", type=float, default=TRIGGER, help="seconds")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    report = run_elastic(args.rate, args.duration, sys.stderr, args.trigger)
    here = os.path.dirname(os.path.abspath(__file__))
    out = args.out or os.path.join(here, "results", "elastic.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(report, f)
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
