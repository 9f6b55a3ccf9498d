"""The soak: the live benchmark's equi case fed for a long time at a steady rate (by default 70 %
of the highest rate our engine kept up with in the live benchmark, ``maxrate-equi.json``), to
show that nothing grows: memory, state, checkpoint and batch time stay flat.

While the feeder runs (`benchmarks.rate`: one Parquet file per stream every tick), a sampler
records every `every` seconds the engine's resident memory, its Python driver and its JVM apart
(in local mode the JVM is both the driver and the executor), and the checkpoint's bytes by part.
Every `gc_every` seconds it reads the JVM's live objects by class (``jcmd <pid>
GC.class_histogram``, which collects first): the live heap, which a leak raises and garbage
waiting for a collection does not; the classes that grew most are reported. Each batch's time,
state bytes and latency come from the engine's own history (`streamjoin.runtime.metrics`).

The feeder deletes a stream's files `keep` seconds after writing them, far beyond the window (a
user's retention): Spark's file source lists the folder at every batch, and an hour's files
would make the listing, not the join, grow. A file still needed (a batch behind by more than
`keep`) then fails the run, loudly.

**Flat**: a least-squares line through a figure's samples after the first `SETTLE` share of the
run (JIT compilation, caches, the heap growing to its working size) rises over that span by at
most `TOLERANCE` of the figure's mean, or by at most two standard errors of the rise (noise).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import threading
import time
import typing as t
from dataclasses import asdict

from benchmarks.engines_live import Live
from benchmarks.harness import ROOT, _say, machine, source_commit
from benchmarks.harness_process import run_engine_process
from benchmarks.rate import TRIGGER
from benchmarks.rate_feed import TICK, Feed, _live_job, _warmup, feed
from benchmarks.rate_latency import CommitWatch, latency_figures
from benchmarks.soak_sampler import Sampler
from benchmarks.soak_trend import _trends
from benchmarks.workloads import WORKLOADS
from streamjoin.runtime.metrics.history import read_history

SHARE = 0.7
"""The soak's rate as a share of the highest rate the live benchmark kept up with."""
DURATION = 300.0
KEEP = 300.0
HERE = os.path.dirname(os.path.abspath(__file__))


def sustainable_rate(results: str = os.path.join(HERE, "results")) -> float | None:
    """Our highest kept-up rate per stream in the live benchmark's equi search, if recorded."""
    path = os.path.join(results, "maxrate-equi.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    found = report["cases"][0]["engines"]["streamjoin"]["max_rate"]
    return float(found) if found else None


def _stop_after(thread: threading.Thread, stop: threading.Event) -> None:
    thread.join()
    stop.set()


def _retain(dirs: t.Mapping[str, str], keep: float, stop: threading.Event) -> None:
    """Delete the feed's files older than `keep` seconds until `stop`."""
    while not stop.wait(min(keep / 4, 30.0)):
        cutoff = time.time() - keep
        for folder in dirs.values():
            for name in os.listdir(folder):
                path = os.path.join(folder, name)
                with contextlib.suppress(OSError):
                    if not name.startswith(".") and os.path.getmtime(path) < cutoff:
                        os.remove(path)


def run_soak(
    rate: float,
    duration: float = DURATION,
    *,
    every: float = 5.0,
    gc_every: float | None = None,
    keep: float = KEEP,
    progress: t.TextIO | None = None,
) -> dict[str, t.Any]:
    """The soak at `rate` rows/s per stream for `duration` seconds: the JSON report."""
    began = time.monotonic()
    gc_every = gc_every or max(60.0, duration / 30)
    (case,) = (c for c in WORKLOADS["equi"](os.path.join(ROOT, "data", "equi", "quick"), "quick"))
    source = Feed(case, rate)
    base = os.path.join(ROOT, "soak")
    shutil.rmtree(base, ignore_errors=True)
    dirs = {name: os.path.join(base, "feed", name) for name in case.backlog.streams}
    for folder in dirs.values():
        os.makedirs(folder)
    workdir, done = os.path.join(base, "work"), os.path.join(base, "done.json")
    live = Live(f"{TRIGGER:g} seconds", done, max(60.0, keep / 2), _warmup(case, source, base))
    result: list[dict[str, t.Any]] = []
    engine = threading.Thread(
        target=lambda: result.extend(
            run_engine_process(
                "streamjoin",
                [(_live_job(case, dirs), workdir)],
                None,
                asdict(live),
                log=os.path.join(base, "engine.log"),
            )
        ),
        name="soak-engine",
        daemon=True,
    )
    watch = CommitWatch(workdir)
    watch.start()
    engine.start()
    deadline = time.monotonic() + 180
    while not os.path.exists(os.path.join(workdir, "ready")) and engine.is_alive():
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    _say(progress, f"[soak] equi fed {rate:g} rows/s per stream for {duration:g} s …")
    sampler = Sampler(os.path.join(workdir, "ckpt"), every, gc_every)
    stop = threading.Event()
    cleaner = threading.Thread(target=_retain, args=(dirs, keep, stop), daemon=True)
    # (An engine that failed ends its thread early: the feed stops then, not an hour later.)
    ended_early = threading.Thread(target=_stop_after, args=(engine, stop), daemon=True)
    sampler.start()
    cleaner.start()
    ended_early.start()
    fed, started, ended = feed(source, dirs, duration, TICK, stop)
    stop.set()
    with open(done + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"files": [x.path for x in fed]}, f)
    os.rename(done + ".tmp", done)
    engine.join()
    sampler.stop()
    watch.stop()
    run: dict[str, t.Any] = result[0] if result else {"error": "no report"}
    figures = latency_figures(workdir, fed, started, ended, TRIGGER, watch)
    if not run.get("history"):  # (a failed run reports none: its checkpoint kept them)
        kept = read_history(os.path.join(workdir, "ckpt", "metrics"))
        run["history"] = [f.to_dict() for f in kept]
    return {
        "workload": "soak",
        "error": run.get("error"),
        "case": case.name,
        "window_seconds": case.window_seconds,
        "rate_per_stream": rate,
        "duration_s": duration,
        "keep_s": keep,
        **figures,
        **_trends(sampler, run.get("history") or [], started),
        "out": run.get("out"),
        "machine": machine(),
        "commit": source_commit(),
        "wall_seconds": round(time.monotonic() - began, 1),
    }


def summary(report: t.Mapping[str, t.Any]) -> str:
    """One line per figure: its mean, its rise over the run and whether it is flat."""
    lines = [f"soak: ERROR {report['error']}"] if report.get("error") else []
    if "trends" not in report:
        return "\n".join(lines)
    lines += [
        f"soak at {report['rate_per_stream']:g} rows/s per stream for {report['duration_s']:g} s: "
        f"{report['batches']} batches, p50/p99 {report['batch_p50_ms']}/{report['batch_p99_ms']} "
        f"ms, latency p50/p99 {report['latency_p50_s']}/{report['latency_p99_s']} s, backlog "
        f"at end {report['backlog_at_end_s']} s"
    ]
    for name, tr in report["trends"].items():
        if tr.get("flat") is None:
            lines.append(f"  {name}: too few samples")
            continue
        verdict = "flat" if tr["flat"] else "GROWS"
        lines.append(
            f"  {name}: mean {tr['mean']}, rise {tr['rise']} ± {tr['rise_stderr']} "
            f"({tr['per_hour']}/h): {verdict}"
        )
    lines += [f"  heap grew: {name} +{n / 2**20:.1f} MB" for name, n in report["heap_grown"][:8]]
    return "\n".join(lines)


def main(argv: t.Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak")
    parser.add_argument("--rate", type=float, help="rows/s per stream (default: 70 %% of max)")
    parser.add_argument("--duration", type=float, default=DURATION)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    rate = args.rate
    if rate is None:
        found = sustainable_rate()
        if found is None:
            msg = "no maxrate-equi.json: run `streamjoin bench equi --max-rate` or give --rate"
            raise SystemExit(msg)
        rate = round(SHARE * found)
    report = run_soak(rate, args.duration, progress=sys.stderr)
    out = args.out or os.path.join(HERE, "results", "soak.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(report, f)
    print(summary(report))
    return 0 if not report.get("error") else 1


if __name__ == "__main__":
    sys.exit(main())
