"""The live feed of the ``--rate`` mode (`benchmarks.rate`): a case's backlog replayed at a
rate, a Parquet file per stream every tick (`Feed`, `feed`), and the case's job reading it."""

from __future__ import annotations

import functools
import os
import random
import time
import typing as t
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.engines_flink import write_csv

if t.TYPE_CHECKING:
    import threading
    from collections.abc import Mapping

    from benchmarks.workloads import Case

US = 1_000_000
TICK = 0.5
JITTER = 7
"""Seed of the moments within a tick at which the feed's files land (`feed`)."""


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
        declared = {s.name for s in job.streams}
        for name, folder in case.backlog.streams.items():
            if name not in declared:  # (a backlog of several streams, a query of some: Nexmark)
                continue
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
    csv_dirs: Mapping[str, str] | None = None,
) -> tuple[list[FedFile], float, float]:
    """Write one file per stream every `tick` seconds for `duration` seconds (rows of the last
    tick, event times just behind wall-clock time); the files written, the start and end.
    Parquet files in `dirs`; with `csv_dirs`, the fed files are CSV ones in those, as Flink
    reads them (`engines_flink.csv_rows`), each followed by its Parquet copy in `dirs`, which
    the checks read.

    Each tick's files land at a drawn moment within the tick after it (`JITTER`'s seeded
    draws): with files at fixed moments, each waits the same part of the trigger, so latency
    percentiles would turn on where the feed's start fell against the trigger's clock, a
    different place for each engine."""
    for folder in [*dirs.values(), *(csv_dirs or {}).values()]:
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
        tables = {name: source.rows(name, j * step, (j + 1) * step, origin) for name in dirs}
        for name, table in tables.items():
            if csv_dirs is None:
                path = os.path.join(dirs[name], f"part-{j:05d}.parquet")
                _visible(path, functools.partial(pq.write_table, table))
            else:
                path = os.path.join(csv_dirs[name], f"part-{j:05d}.csv")
                _visible(path, functools.partial(write_csv, table))
            fed.append(FedFile(path, name, table.num_rows, time.time()))
        if csv_dirs is not None:  # (the copies after the tick's fed files: they wait for none)
            for name, table in tables.items():
                pq.write_table(table, os.path.join(dirs[name], f"part-{j:05d}.parquet"))
    return fed, started, time.time()


def _visible(path: str, write: t.Callable[[str], None]) -> None:
    """`write` the file beside its folder, then rename it to `path`: no engine sees it partly
    written (Flink's file source lists hidden names too)."""
    folder = os.path.dirname(path)
    temp = os.path.join(
        os.path.dirname(folder), f".{os.path.basename(folder)}-{os.path.basename(path)}.tmp"
    )
    write(temp)
    os.rename(temp, path)


def _reading(case: Case, dirs: Mapping[str, str]) -> str:
    """The case's job reading `dirs` (by stream) instead of its backlog."""
    job = case.job
    for name, folder in case.backlog.streams.items():
        if name in dirs:
            job = job.replace(f"'{folder}'", f"'{dirs[name]}'")
    return job


def _live_job(case: Case, dirs: Mapping[str, str]) -> str:
    """The case's job reading the live directories, every file available in each batch."""
    import re

    job = _reading(case, dirs)
    return re.sub(r"maxFilesPerTrigger\s*=\s*'\d+'", "maxFilesPerTrigger = '100000'", job)


WARMUP_FILES = 3
WARMUP_WINDOWS_FILES = 30
"""A job that writes groups as its watermark closes their windows warms up over 15 s of event
time: Nexmark's 10 s windows then close during the warm-up, whose code a live run's first
closes would otherwise compile (2.5 s batches for q7, against 0.25 s between closes)."""


def closes_windows(job_text: str) -> bool:
    """Whether the job writes groups of windows (or of rows) when its watermark closes them."""
    from streamjoin.sql import parse_job

    job = parse_job(job_text.replace("{out}", "/unused"))
    return bool(job.group_queries) or any(q.windowed is not None for q in job.queries)


def _warmup(case: Case, source: Feed, base: str) -> str:
    """A warm-up job: the case's job (one file per batch) over the first ticks of the feed,
    written beforehand, with event times a minute in the past."""
    dirs = {name: os.path.join(base, "warmup-feed", name) for name in source.streams}
    origin = int((time.time() - 60) * US)
    step = round(TICK * US)
    files = WARMUP_WINDOWS_FILES if closes_windows(case.job) else WARMUP_FILES
    for name, folder in dirs.items():
        os.makedirs(folder)
        for j in range(files):
            table = source.rows(name, j * step, (j + 1) * step, origin)
            pq.write_table(table, os.path.join(folder, f"part-{j:05d}.parquet"))
    return _reading(case, dirs)
