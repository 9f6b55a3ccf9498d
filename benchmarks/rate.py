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
Each file is written under a hidden name (``.name.tmp``, which Spark's file source skips) and
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
(``latency_growth ≤ 2``; the first third's median counts as at least one trigger interval, so
sub-second noise is not growth). Spark's own, stricter sense, every batch done within its
trigger interval, is reported beside it as ``within_trigger`` (batch p50 ≤ trigger).

Before the live run each engine runs the same job to its end over the first few ticks' rows
(one file per batch), in the same process: the figures are not those of a cold JVM's first
batches (which take several times longer than later ones, for every engine).

**Correctness**: after the drain every engine has seen all the input, so the output counts of
every engine that drained must be equal, and equal to DuckDB's batch join of the fed files where
the query has an equality key (rows are fed in event-time order, so none is late).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import threading
import time
import typing as t
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.engines import Live, run_engine
from benchmarks.harness import (
    ROOT,
    _engines,
    _percentile,
    _say,
    check_workload,
    expected_counts,
    machine,
    run_engine_process,
    source_commit,
)
from benchmarks.sparklog import Ends, commit_ids, committed_files, offset_ends, query_checkpoints
from benchmarks.workloads import WORKLOADS, Case

if t.TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

US = 1_000_000
TICK = 0.5
TRIGGER = 1.0
DURATION = {"tiny": 10.0, "quick": 30.0, "full": 60.0}
JITTER = 7
"""Seed of the moments within a tick at which the feed's files land (`feed`)."""


def drain_limit(duration: float) -> float:
    """Seconds an engine may take, after the feed stops, to process what is left."""
    return max(60.0, duration)


@dataclass
class _Stream:
    """One stream's rows, ordered by their feed time (µs from the start of one replay)."""

    table: pa.Table
    at: np.ndarray[t.Any, np.dtype[np.int64]]
    times: dict[str, np.ndarray[t.Any, np.dtype[np.int64]]]


@dataclass(frozen=True)
class FedFile:
    path: str
    stream: str
    rows: int
    written: float  # wall-clock seconds (time.time()) when it became visible


class Feed:
    """The rows of a case's backlog, replayed at `rate` rows per second per stream (on average:
    ``rate × streams`` rows per second in all, in the backlog's proportions)."""

    def __init__(self, case: Case, rate: float) -> None:
        from streamjoin.sql import parse_job

        job = parse_job(case.job.replace("{out}", "/unused"), case.name)
        tables = {}
        for name, folder in case.backlog.streams.items():
            files = sorted(f for f in os.listdir(folder) if f.endswith(".parquet"))
            tables[name] = pa.concat_tables(pq.read_table(os.path.join(folder, f)) for f in files)
        event = {}
        for name in tables:
            column = job.stream(name).event_time
            if column is None:
                msg = f"stream {name} has no event time: it cannot be fed live"
                raise ValueError(msg)
            event[name] = column
        ts = {n: _us(tables[n][event[n]]) for n in tables}
        base = min(int(v.min()) for v in ts.values() if len(v))
        last = max(int(v.max()) for v in ts.values() if len(v))
        rows = sum(tab.num_rows for tab in tables.values())
        # One replay lasts `period` µs; event time [base, last] maps linearly onto [0, period).
        self.period = max(1, round(rows / (rate * len(tables)) * US))
        span = last - base + 1
        self.streams: dict[str, _Stream] = {}
        for name, table in tables.items():
            order = np.argsort(ts[name], kind="stable")
            table = table.take(pa.array(order))
            times = {
                f.name: (_us(table[f.name]) - base) * self.period // span
                for f in table.schema
                if pa.types.is_timestamp(f.type)
            }
            self.streams[name] = _Stream(table, times[event[name]], times)
        self.rate = rate

    def rows(self, stream: str, lo: int, hi: int, origin: int) -> pa.Table:
        """The rows of `stream` fed in [lo, hi) µs after the start, their times from `origin`
        (µs since the epoch)."""
        s = self.streams[stream]
        parts = []
        for cycle in range(lo // self.period, (hi - 1) // self.period + 1):
            shift = cycle * self.period
            i, j = np.searchsorted(s.at, [lo - shift, hi - shift])
            part = s.table.slice(int(i), int(j - i))
            for name, values in s.times.items():
                micros = pa.array(values[i:j] + origin + shift, pa.int64())
                column = micros.cast(pa.timestamp("us", tz="UTC")).cast(
                    part.schema.field(name).type
                )
                part = part.set_column(part.schema.get_field_index(name), name, column)
            parts.append(part)
        return pa.concat_tables(parts) if parts else s.table.slice(0, 0)


def _us(column: pa.ChunkedArray) -> np.ndarray[t.Any, np.dtype[np.int64]]:
    return np.asarray(column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()))


def feed(
    source: Feed,
    dirs: Mapping[str, str],
    duration: float,
    tick: float,
    stop: threading.Event | None = None,
) -> tuple[list[FedFile], float, float]:
    """Write one file per stream every `tick` seconds for `duration` seconds (rows of the last
    tick, event times just behind wall-clock time); the files written, the start and end.

    Each tick's files land at a drawn moment within the tick after it (`JITTER`'s seeded
    draws): with files at fixed moments, each waits the same part of the trigger, so latency
    percentiles would turn on where the feed's start fell against the trigger's clock, a
    different place for each engine."""
    for folder in dirs.values():
        os.makedirs(folder, exist_ok=True)
    started = time.time()
    origin = int(started * US)
    fed: list[FedFile] = []
    step = round(tick * US)
    draws = random.Random(JITTER)
    for j in range(max(1, round(duration / tick))):
        due = started + (j + 1 + draws.random()) * tick
        if stop is not None and stop.is_set():
            break
        pause = due - time.time()
        if pause > 0:
            time.sleep(pause)
        for name, folder in dirs.items():
            table = source.rows(name, j * step, (j + 1) * step, origin)
            final = os.path.join(folder, f"part-{j:05d}.parquet")
            temp = os.path.join(folder, f".part-{j:05d}.parquet.tmp")
            pq.write_table(table, temp)
            os.rename(temp, final)
            fed.append(FedFile(final, name, table.num_rows, time.time()))
    return fed, started, time.time()


def _reading(case: Case, dirs: Mapping[str, str]) -> str:
    """The case's job reading `dirs` (by stream) instead of its backlog."""
    job = case.job
    for name, folder in case.backlog.streams.items():
        job = job.replace(f"'{folder}'", f"'{dirs[name]}'")
    return job


def _live_job(case: Case, dirs: Mapping[str, str]) -> str:
    """The case's job reading the live directories, every file available in each batch."""
    import re

    job = _reading(case, dirs)
    return re.sub(r"maxFilesPerTrigger\s*=\s*'\d+'", "maxFilesPerTrigger = '100000'", job)


WARMUP_FILES = 3


def _warmup(case: Case, source: Feed, base: str) -> str:
    """A warm-up job: the case's job (one file per batch) over the first ticks of the feed,
    written beforehand, with event times a minute in the past."""
    dirs = {name: os.path.join(base, "warmup-feed", name) for name in case.backlog.streams}
    origin = int((time.time() - 60) * US)
    step = round(TICK * US)
    for name, folder in dirs.items():
        os.makedirs(folder)
        for j in range(WARMUP_FILES):
            table = source.rows(name, j * step, (j + 1) * step, origin)
            pq.write_table(table, os.path.join(folder, f"part-{j:05d}.parquet"))
    return _reading(case, dirs)


def _weighted(values: list[tuple[float, int]], p: float) -> float | None:
    """The `p` percentile of `values` (value, weight)."""
    total = sum(w for _, w in values)
    if total <= 0:
        return None
    need, seen = p / 100 * total, 0
    ordered = sorted(values)
    for v, w in ordered:
        seen += w
        if seen >= need and w > 0:
            return round(v, 3)
    return round(ordered[-1][0], 3)


class CommitWatch:
    """The commit time and the sources' end offsets of every batch of the query checkpoints
    under a workdir, read while the engine runs: Spark deletes all but a query's last 100
    commit and offset files, and the latency of a fed file needs its batch and that batch's
    commit time after the run."""

    def __init__(self, workdir: str, every: float = 1.0) -> None:
        self.workdir = workdir
        self.every = every
        self.times: dict[str, dict[int, float]] = {}
        self.ends: dict[str, dict[int, Ends]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="commit-watch", daemon=True)

    def start(self) -> None:
        """Scan every `every` seconds until `stop`."""
        self._thread.start()

    def scan(self) -> None:
        """Record the time of each commit file, and each batch's end offsets, not seen yet."""
        for ckpt in query_checkpoints(self.workdir):
            seen = self.times.setdefault(ckpt, {})
            ends = self.ends.setdefault(ckpt, {})
            # (The engine may delete a file, or its whole workdir when it starts, meanwhile.)
            with contextlib.suppress(OSError):
                ends.update(offset_ends(ckpt, known=ends.keys()))
                for batch in commit_ids(ckpt) - seen.keys():
                    seen[batch] = os.stat(os.path.join(ckpt, "commits", str(batch))).st_mtime

    def stop(self) -> dict[str, dict[int, float]]:
        """Stop watching; every commit time seen, by checkpoint and batch."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.scan()
        return self.times

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            self.scan()


def commit_stamps(ckpt: str, batches: Iterable[int], seen: Mapping[int, float]) -> dict[int, float]:
    """The commit time of each of `batches` of a query checkpoint: as seen during the run, else
    its commit file's; for a batch whose file was deleted unseen, the oldest file left's (it
    committed before that one's batch ran, so its latency is overstated, never understated)."""
    commits = os.path.join(ckpt, "commits")
    on_disk = {b: os.stat(os.path.join(commits, str(b))).st_mtime for b in commit_ids(ckpt)}
    stamps = {}
    for b in batches:
        if b in seen:
            stamps[b] = seen[b]
        elif on_disk:
            stamps[b] = on_disk.get(b, on_disk[min(on_disk)])
    return stamps


def done_times(
    workdir: str, fed: list[FedFile], watch: CommitWatch | None = None
) -> dict[str, float]:
    """When each fed file was done: committed by every query reading its stream (the last of
    their commits), from the engine's checkpoints and what `watch` saw during the run."""
    logs = []
    seen = watch.times if watch is not None else {}
    for ckpt in query_checkpoints(workdir):
        files = committed_files(ckpt, watch.ends.get(ckpt) if watch is not None else None)
        stamps = commit_stamps(ckpt, set(files.values()), seen.get(ckpt, {}))
        commits = {p: stamps[b] for p, b in files.items() if b in stamps}
        logs.append((commits, {os.path.dirname(p) for p in files}))
    done: dict[str, float] = {}
    for f in fed:
        stream = os.path.dirname(f.path)
        times = [commits.get(f.path) for commits, reads in logs if stream in reads]
        if times and all(x is not None for x in times):
            done[f.path] = max(x for x in times if x is not None)
    return done


def latency_figures(
    workdir: str,
    fed: list[FedFile],
    started: float,
    ended: float,
    trigger: float,
    watch: CommitWatch | None = None,
) -> dict[str, t.Any]:
    """Latency, processed rate, backlog at the end and growth, from the engine's checkpoints and
    what `watch` saw of them during the run."""
    done = done_times(workdir, fed, watch)
    rows_fed = sum(f.rows for f in fed)
    lat = [(done[f.path] - f.written, f.rows) for f in fed if f.path in done]
    processed_by_end = sum(f.rows for f in fed if f.path in done and done[f.path] <= ended)
    seconds = max(ended - started, 1e-9)
    span = ended - started

    def third(lo: float, hi: float) -> float | None:
        part = [
            (done[f.path] - f.written, f.rows)
            for f in fed
            if f.path in done and lo <= f.written - started < hi
        ]
        return _weighted(part, 50)

    first, last = third(0, span / 3), third(2 * span / 3, span + 1)
    growth = (
        round(last / max(first, trigger), 2) if first is not None and last is not None else None
    )
    input_rate = rows_fed / seconds
    backlog = (rows_fed - processed_by_end) / input_rate if input_rate else 0.0
    return {
        "rows_fed": rows_fed,
        "rows_processed": sum(f.rows for f in fed if f.path in done),
        "files_fed": len(fed),
        "input_rate": round(input_rate, 1),
        "processed_rate": round(processed_by_end / seconds, 1),
        "latency_p50_s": _weighted(lat, 50),
        "latency_p95_s": _weighted(lat, 95),
        "latency_p99_s": _weighted(lat, 99),
        "latency_max_s": round(max(v for v, _ in lat), 3) if lat else None,
        "latency_first_third_p50_s": first,
        "latency_last_third_p50_s": last,
        "latency_growth": growth,
        "backlog_at_end_s": round(backlog, 2),
        "drain_s": round(max(done.values()) - ended, 2) if done else None,
    }


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
) -> tuple[dict[str, t.Any], str]:
    """`engine` on a live feed of `case`; its figures and the job text it ran (live paths)."""
    base = os.path.join(ROOT, "rate", case.name, engine)
    shutil.rmtree(base, ignore_errors=True)
    dirs = {name: os.path.join(base, "feed", name) for name in case.backlog.streams}
    for folder in dirs.values():
        os.makedirs(folder)
    workdir, done = os.path.join(base, "work"), os.path.join(base, "done.json")
    job = _live_job(case, dirs)
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
                    asdict(run_engine(engine, job.replace("{out}", out), workdir, None, live))
                )
            except Exception as err:  # reported like a failed engine process
                first = (str(err).strip().splitlines() or [""])[0]
                result.append({"engine": engine, "error": f"{type(err).__name__}: {first}"})
        else:
            # The engine has a process of its own, the feeder stays in this one: its Parquet
            # writes and its GIL do not compete with the engine's driver (streamjoin's batches
            # run Python in the driver, Spark's native join does not), and the engine's peak
            # memory is its own.
            result.extend(run_engine_process(engine, [(job, workdir)], None, asdict(live)))

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
    fed, started, ended = feed(source, dirs, duration if not stop.is_set() else 0, tick, stop)
    with open(done + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"files": [x.path for x in fed]}, f)
    os.rename(done + ".tmp", done)
    thread.join()
    watch.stop()
    run: dict[str, t.Any] = result[0] if result else {"engine": engine, "error": "no report"}
    if run.get("error"):
        return {"engine": engine, "error": run["error"]}, job
    figures = latency_figures(workdir, fed, started, ended, trigger, watch)
    batch = run.get("batch_ms") or []
    drained = not run.get("stopped_early") and figures["rows_processed"] == figures["rows_fed"]
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
        "within_trigger": batch_s <= trigger,
        "out": run.get("out"),
        "dropped_late": run.get("dropped_late", 0),
        "peak_rss_mb": run.get("peak_rss_mb"),
    }, job


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
) -> dict[str, t.Any]:
    """Every case of `workload` fed live at `rate` rows/s per stream for `duration` seconds
    (default by size: tiny 10, quick 30, full 60) to our engine and its peer; the JSON object
    the CLI prints last. `in_process` runs the engines on this process's Spark session (tests)
    instead of a process each; ``warmup=False`` skips the warm-up run (tests: quicker, but the
    figures then include a cold start)."""
    check_workload(workload, size)
    if rate <= 0:
        msg = f"--rate must be positive, not {rate}"
        raise ValueError(msg)
    seconds = DURATION[size] if duration is None else duration
    began = time.monotonic()
    _say(progress, f"[{workload}] generating the {size} rows to feed …")
    cases = WORKLOADS[workload](os.path.join(ROOT, "data", workload, size), size)
    out = []
    for case in cases:
        source = Feed(case, rate)
        results: dict[str, dict[str, t.Any]] = {}
        jobs = {}
        for engine in _engines(case, engines):
            _say(
                progress, f"[{case.name}] {engine} fed {rate:g} rows/s per stream, {seconds:g} s …"
            )
            results[engine], jobs[engine] = _run_one(
                case,
                engine,
                source,
                duration=seconds,
                tick=tick,
                trigger=trigger,
                in_process=in_process,
                warmup=warmup,
            )
            _say(progress, f"[{case.name}] {engine}: {_brief(results[engine])}")
        out.append(_checked(case, results, jobs))
    return {
        "workload": workload,
        "mode": "rate",
        "size": size,
        "rate_per_stream": rate,
        "duration_s": seconds,
        "tick_s": tick,
        "trigger_s": trigger,
        "warmup": warmup,
        "machine": machine(),
        "commit": source_commit(),
        "cases": out,
        "wall_seconds": round(time.monotonic() - began, 1),
    }


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
    if len(drained) < len(results) or not outs:
        agree = False if any(r.get("error") for r in results.values()) else None
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
        f"drained in {r['drain_s']} s, batches p50/p99 {r['batch_p50_ms']}/{r['batch_p99_ms']} "
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
