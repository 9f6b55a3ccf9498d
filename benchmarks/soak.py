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
import re
import shutil
import subprocess
import sys
import threading
import time
import typing as t
from dataclasses import asdict

import numpy as np

from benchmarks.engines import Live
from benchmarks.harness import ROOT, _percentile, _say, machine, run_engine_process, source_commit
from benchmarks.rate import (
    TICK,
    TRIGGER,
    CommitWatch,
    Feed,
    _live_job,
    _warmup,
    feed,
    latency_figures,
)
from benchmarks.workloads import WORKLOADS
from streamjoin.runtime.metrics.history import read_history

SHARE = 0.7
"""The soak's rate as a share of the highest rate the live benchmark kept up with."""
DURATION = 300.0
KEEP = 300.0
SETTLE = 0.2
TOLERANCE = 0.1
CHECKPOINT_PARTS = {
    "spark": "Spark's query logs (offsets, commits, the file source's log)",
    "manifests": "streamjoin's manifests (the last two)",
    "state": "stored state (none where it is read back from the input files)",
    "metrics": "the metrics history (rotated, capped)",
}
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


def trend(times: t.Sequence[float], values: t.Sequence[float]) -> dict[str, t.Any]:
    """The least-squares line through (times, values) after the first `SETTLE` of the span: its
    rise over that span, the rise's standard error, the mean, and whether it is flat."""
    x, y = np.asarray(times, float), np.asarray(values, float)
    if len(x) < 4:
        return {"samples": len(x), "flat": None}
    keep = x >= x[0] + SETTLE * (x[-1] - x[0])
    x, y = x[keep], y[keep]
    span = float(x[-1] - x[0])
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    spread = float(np.sum((x - x.mean()) ** 2))
    stderr = float(np.sqrt(np.sum(residual**2) / max(len(x) - 2, 1) / spread)) if spread else 0.0
    mean = float(y.mean())
    rise = float(slope) * span
    flat = rise <= TOLERANCE * abs(mean) or rise <= 2 * stderr * span
    return {
        "samples": len(x),
        "mean": round(mean, 3),
        "rise": round(rise, 3),
        "rise_stderr": round(stderr * span, 3),
        "rise_share": round(rise / mean, 4) if mean else None,
        "per_hour": round(float(slope) * 3600, 3),
        "flat": bool(flat),
    }


def _du(path: str) -> int:
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(d, f))
    return total


def _jcmd(jvm: int, command: str) -> str:
    """What ``jcmd <jvm> <command>`` printed (nothing if the JVM did not answer)."""
    run = subprocess.run(
        ["jcmd", str(jvm), command], capture_output=True, text=True, timeout=120, check=False
    )
    return run.stdout


def live_heap(jvm: int) -> dict[str, int]:
    """The JVM's live objects' bytes by class (``jcmd GC.class_histogram``, which collects
    first), with the total under ``"total"``; empty if the JVM did not answer."""
    return parse_histogram(_jcmd(jvm, "GC.class_histogram"))


def parse_histogram(text: str) -> dict[str, int]:
    """``GC.class_histogram``'s rows (``num: instances bytes class``) and its ``Total`` line."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        # (A JDK class's row ends with its module, e.g. ``[B (java.base@17.0.15)``.)
        if len(parts) in (4, 5) and parts[0].endswith(":") and parts[2].isdigit():
            found[parts[3]] = found.get(parts[3], 0) + int(parts[2])
        elif len(parts) == 3 and parts[0] == "Total" and parts[2].isdigit():
            found["total"] = int(parts[2])
    return found


def heap_committed(jvm: int) -> int | None:
    """The bytes the JVM's heap has reserved from the system (``jcmd GC.heap_info``): the heap's
    size, which a collector grows toward ``-Xmx`` while the live part stays put."""
    return parse_heap_info(_jcmd(jvm, "GC.heap_info"))


def parse_heap_info(text: str) -> int | None:
    """The sum of ``GC.heap_info``'s ``total NK`` over its heap lines (a generation's, or the
    whole heap's for a collector of one region; JDK 22's G1 says ``total reserved NK,
    committed NK``); None where it has none (ZGC, Shenandoah)."""
    totals = [
        int(m.group(1)) * 1024
        for m in re.finditer(
            r"^\s*\S.*?\btotal (?:reserved \d+K, committed )?(\d+)K", text, re.MULTILINE
        )
    ]
    return sum(totals) if totals else None


def grown(first: dict[str, int], last: dict[str, int], top: int = 15) -> list[tuple[str, int]]:
    """The classes whose live bytes grew most from `first` to `last` (bytes grown)."""
    growth = {c: n - first.get(c, 0) for c, n in last.items() if c != "total"}
    return sorted(((c, d) for c, d in growth.items() if d > 0), key=lambda x: -x[1])[:top]


class Sampler:
    """Memory and checkpoint bytes of the engine child process, sampled in a thread."""

    def __init__(self, ckpt: str, every: float, gc_every: float) -> None:
        self.ckpt, self.every, self.gc_every = ckpt, every, gc_every
        self.samples: list[dict[str, t.Any]] = []
        self.live_heap: list[dict[str, t.Any]] = []
        self.histograms: list[tuple[float, dict[str, int]]] = []
        """The live heap by class at each collection (the first and last are reported)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)
        self._started = time.time()

    def start(self) -> None:
        self._started = time.time()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _engine(self) -> tuple[t.Any, t.Any] | tuple[None, None]:
        """The engine's Python process (this one's child) and its JVM."""
        import psutil

        for child in psutil.Process().children():
            jvms = [p for p in child.children(recursive=True) if p.name() == "java"]
            if jvms:
                return child, jvms[0]
        return None, None

    def _run(self) -> None:
        import psutil

        last_gc = time.time()
        while not self._stop.wait(self.every):
            python, jvm = self._engine()
            if python is None or jvm is None:
                continue
            now = time.time()
            sample: dict[str, t.Any] = {"t": round(now - self._started, 1)}
            with contextlib.suppress(psutil.Error):
                sample["python_rss_mb"] = round(python.memory_info().rss / 2**20, 1)
                sample["jvm_rss_mb"] = round(jvm.memory_info().rss / 2**20, 1)
            for part in CHECKPOINT_PARTS:
                sample[f"ckpt_{part}_mb"] = round(_du(os.path.join(self.ckpt, part)) / 2**20, 3)
            sample["ckpt_mb"] = round(_du(self.ckpt) / 2**20, 3)
            self.samples.append(sample)
            if now - last_gc >= self.gc_every:
                last_gc = now
                histogram = live_heap(jvm.pid)
                if "total" in histogram:
                    mb = round(histogram["total"] / 2**20, 1)
                    entry: dict[str, t.Any] = {"t": sample["t"], "heap_mb": mb}
                    committed = heap_committed(jvm.pid)
                    if committed is not None:
                        entry["heap_committed_mb"] = round(committed / 2**20, 1)
                    self.live_heap.append(entry)
                    self.histograms.append((sample["t"], histogram))


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


def _trends(sampler: Sampler, history: list[dict[str, t.Any]], started: float) -> dict[str, t.Any]:
    """The sampled series and the batches' own, each with its `trend`."""
    live = [h for h in history if h["time"] >= started]
    series: dict[str, tuple[list[float], list[float]]] = {
        "batch_s": ([h["time"] - started for h in live], [h["seconds"] for h in live]),
        "state_mb": (
            [h["time"] - started for h in live],
            [sum(h["state_bytes"].values()) / 2**20 for h in live],
        ),
    }
    for figure in ("heap_mb", "heap_committed_mb"):
        at = [s for s in sampler.live_heap if figure in s]
        series[figure] = ([s["t"] for s in at], [s[figure] for s in at])
    for figure in (
        "python_rss_mb",
        "jvm_rss_mb",
        "ckpt_mb",
        *(f"ckpt_{p}_mb" for p in CHECKPOINT_PARTS),
    ):
        have = [s for s in sampler.samples if figure in s]
        series[figure] = ([s["t"] for s in have], [s[figure] for s in have])
    batch_ms = [1000 * h["seconds"] for h in live]
    end = sampler.samples[-1]["t"] if sampler.samples else 0.0
    settled = [h for at, h in sampler.histograms if at >= SETTLE * end]
    return {
        "heap_grown": grown(settled[0], settled[-1]) if len(settled) > 1 else [],
        "batches": len(live),
        "batch_p50_ms": round(_percentile(batch_ms, 50) or 0.0, 1),
        "batch_p99_ms": round(_percentile(batch_ms, 99) or 0.0, 1),
        "trends": {name: trend(*xy) for name, xy in series.items()},
        "samples": sampler.samples,
        "live_heap": sampler.live_heap,
        "batches_seen": [
            {
                "t": round(h["time"] - started, 2),
                "seconds": h["seconds"],
                "state_mb": round(sum(h["state_bytes"].values()) / 2**20, 3),
                "latency": h.get("latency"),
            }
            for h in live
        ],
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
