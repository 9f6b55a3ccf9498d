"""The ``--rate`` mode: each engine on a live source fed at a fixed rate; does it keep up, and
with what end-to-end latency?

A feeder writes, every `tick` seconds, one Parquet file per stream into the stream's source
directory, holding the rows whose event time falls in that tick; event times are those of the
workload's own backlog (`benchmarks.workloads`, same generators and shapes), mapped linearly onto
wall-clock time so that the whole backlog lasts ``rows / (rate × streams)`` seconds, and replayed
again, later, if the run lasts longer. So the rows of a file are between 0 and `tick` seconds
old when it appears, and the watermark advances live. Every timestamp column is mapped alike
(Nexmark's ``expires`` stays after ``date_time``); interval constants are not, so at a rate above
the backlog's own, a window holds more rows (more matches per row) than in the backlog mode.
Each file is written beside its folder (a hidden name in the folder above) and
renamed, so no engine ever reads a partial file; the time of the rename is its write time.

Each engine runs on its own copy of the feed (the same rows, the same ticks) with a
processing-time trigger, while the feeder runs for `duration` seconds; then the feeder stops and
the engine drains what is left (bounded by a drain limit) and stops. Each query's Spark
checkpoint says which files each batch read (``sources/<i>/<batch>``) and when the batch's output
was committed (the modification time of ``commits/<batch>``, read while the engine runs: Spark
keeps only a query's last 100 commit files): the same log for every engine, since all of them
read with Spark's file source.

**Latency** of a row = commit time of the batch that read its file − the file's write time
(over every query of the job, the last commit). Percentiles weight each file by its rows.

**Keeps up** (its latency stays bounded at this rate) = all three of: (1) it drained the feed
within the drain limit; (2) when the feeder stopped, the rows written but not yet committed were
at most two batches' worth of input, one batch running and one waiting (``backlog_at_end_s ≤
2 × max(trigger, batch p50) + tick``); (3) latency did not grow over the run: the median latency
of rows written in the last third of the run is at most twice that of the first third
(``latency_growth ≤ 2``; the first third's median counts as at least one trigger interval, or
a tick with a zero trigger, so sub-second noise is not growth). Spark's own, stricter sense,
every batch done within its trigger interval, is reported beside it as ``within_trigger``
(batch p50 ≤ trigger; none with a zero trigger).

Before the live run each engine runs the same job to its end over the first few ticks' rows
(one file per batch), in the same process: the figures are not those of a cold JVM's first
batches (which take several times longer than later ones, for every engine).

**Correctness**: after the drain every engine has seen all the input, so the output counts of
every engine that drained must be equal, and equal to DuckDB's batch join of the fed files where
the query has an equality key (rows are fed in event-time order, so none is late).
"""

from __future__ import annotations

import contextlib
import os
import time
import typing as t

from benchmarks.engines_flink import FLINK
from benchmarks.engines_floor import FLOOR
from benchmarks.harness import (
    CLUSTER,
    ROOT,
    _engines,
    _say,
    check_workload,
    machine,
    source_commit,
    start_cluster,
)
from benchmarks.harness_exact import expected_counts
from benchmarks.rate_feed import TICK, Feed, closes_windows
from benchmarks.rate_run import _run_one
from benchmarks.workloads import WORKLOADS, Case

TRIGGER = 1.0
DURATION = {"tiny": 10.0, "quick": 30.0, "full": 60.0}


def run_rate(
    workload: str,
    rate: float,
    size: str = "quick",
    *,
    duration: float | None = None,
    engines: t.Sequence[str] | None = None,
    tick: float = TICK,
    trigger: float = TRIGGER,
    progress: t.TextIO | None = None,
    in_process: bool = False,
    warmup: bool = True,
    cluster: bool = False,
) -> dict[str, t.Any]:
    """Every case of `workload` fed live at `rate` rows/s per stream for `duration` seconds
    (default by size: tiny 10, quick 30, full 60) to our engine and its peer; the JSON object
    the CLI prints last. `in_process` runs the engines on this process's Spark session (tests)
    instead of a process each; ``warmup=False`` skips the warm-up run (tests: quicker, but the
    figures then include a cold start); `cluster`: every engine runs on a standalone cluster on
    127.0.0.1 (`CLUSTER`), which the run starts and stops."""
    check_workload(workload, size)
    if rate <= 0:
        msg = f"--rate must be positive, not {rate}"
        raise ValueError(msg)
    if trigger <= 0 and FLINK in (engines or ()):
        msg = "--trigger 0 and flink: Flink's file source polls its folders at an interval > 0"
        raise ValueError(msg)
    seconds = DURATION[size] if duration is None else duration
    began = time.monotonic()
    _say(progress, f"[{workload}] generating the {size} rows to feed …")
    cases = WORKLOADS[workload](os.path.join(ROOT, "data", workload, size), size)
    out = []
    with contextlib.ExitStack() as stack:
        master = start_cluster(stack, workload, "rate", progress) if cluster else None
        for case in cases:
            out.append(
                _live_case(
                    case,
                    rate,
                    seconds,
                    engines,
                    progress,
                    master,
                    (tick, trigger, in_process, warmup),
                )
            )
    return {
        "workload": workload,
        "mode": "rate",
        "size": size,
        "rate_per_stream": rate,
        "duration_s": seconds,
        "tick_s": tick,
        "trigger_s": trigger,
        "warmup": warmup,
        **({"cluster": CLUSTER} if cluster else {}),
        "machine": machine(),
        "commit": source_commit(),
        "cases": out,
        "wall_seconds": round(time.monotonic() - began, 1),
    }


def _live_case(
    case: Case,
    rate: float,
    seconds: float,
    engines: t.Sequence[str] | None,
    progress: t.TextIO | None,
    master: str | None,
    how: tuple[float, float, bool, bool],
) -> dict[str, t.Any]:
    """`case` fed live to each engine (`run_rate`; `how`: tick, trigger, in process, warm-up),
    on the cluster of `master` (None: local mode); its checked figures."""
    tick, trigger, in_process, warmup = how
    source = Feed(case, rate)
    results: dict[str, dict[str, t.Any]] = {}
    jobs = {}
    for engine in [e for e in _engines(case, engines) if e != FLOOR]:  # (backlogs only)
        _say(progress, f"[{case.name}] {engine} fed {rate:g} rows/s per stream, {seconds:g} s …")
        results[engine], jobs[engine] = _run_one(
            case,
            engine,
            source,
            duration=seconds,
            tick=tick,
            trigger=trigger,
            in_process=in_process,
            warmup=warmup,
            master=master,
        )
        _say(progress, f"[{case.name}] {engine}: {_brief(results[engine])}")
    return _checked(case, results, jobs)


def _checked(
    case: Case, results: dict[str, dict[str, t.Any]], jobs: dict[str, str]
) -> dict[str, t.Any]:
    drained = [r for r in results.values() if r.get("drained")]
    expected = None
    if jobs:
        # Every engine's feed holds the same rows (times shifted alike): count one of them.
        live = Case(case.name, next(iter(jobs.values())), case.peer, case.backlog)
        expected = expected_counts(live)
    outs = [r.get("out") for r in drained]
    agree: bool | None
    if any(r.get("error") for r in results.values()):
        agree = False
    elif not outs:
        agree = None
    elif jobs and closes_windows(next(iter(jobs.values()))):
        # (A live feed has no end of input: which windows each engine has closed when it stops
        # depends on its own watermark's rule, so their counts say nothing.)
        agree = None
    elif len(outs) < min(2, len(results)) and expected is None:
        agree = None  # (the one engine that drained, and nothing to compare it with)
    else:
        agree = all(o == outs[0] for o in outs) and (expected is None or outs[0] == expected)
    ours, peer = results.get("streamjoin", {}), results.get(case.peer or "", {})
    ratios: dict[str, float] = {}
    for figure in ("processed_rate", "latency_p50_s", "latency_p99_s", "batch_p99_ms"):
        if ours.get(figure) and peer.get(figure):
            ratios[figure] = round(ours[figure] / peer[figure], 2)
    return {
        "case": case.name,
        "predicate": case.predicate,
        "window_seconds": case.window_seconds,
        "expected": expected,
        "results_agree": agree,
        "engines": results,
        "ratios": ratios,
    }


def _brief(r: dict[str, t.Any]) -> str:
    if r.get("error"):
        return f"ERROR {r['error']}"
    verdict = "keeps up" if r["keeps_up"] else "FALLS BEHIND"
    return (
        f"{verdict}: fed {r['input_rate']} rows/s, processed {r['processed_rate']} rows/s, "
        f"latency p50/p99/max {r['latency_p50_s']}/{r['latency_p99_s']}/{r['latency_max_s']} s "
        f"(growth ×{r['latency_growth']}), backlog at end {r['backlog_at_end_s']} s, "
        + (f"drained in {r['drain_s']} s" if r["drain_s"] is not None else "not drained")
        + f", batches p50/p99 {r['batch_p50_ms']}/{r['batch_p99_ms']} "
        f"ms, out {r['out']}"
        + (f", {r['dropped_late']} rows dropped as late" if r.get("dropped_late") else "")
    )


def summary_lines(report: dict[str, t.Any]) -> list[str]:
    """One human line per case: each engine's verdict and latency, and whether they agree."""
    lines = []
    for c in report["cases"]:
        parts = []
        for name, r in c["engines"].items():
            if r.get("error"):
                parts.append(f"{name} ERROR")
                continue
            verdict = "keeps up" if r["keeps_up"] else "falls behind"
            parts.append(
                f"{name} {verdict} (latency p50 {r['latency_p50_s']} s, p99 {r['latency_p99_s']} s)"
            )
        agree = {True: "results agree", False: "RESULTS DIFFER", None: "unchecked"}[
            c["results_agree"]
        ]
        lines.append(
            f"{c['case']} at {report['rate_per_stream']:g} rows/s per stream: "
            f"{', '.join(parts)}; {agree}"
        )
    return lines
