"""When each fed file of a live run was done, from the engine's query checkpoints, and what
follows (`benchmarks.rate`): latency, processed rate, backlog at the end and growth."""

from __future__ import annotations

import contextlib
import os
import threading
import typing as t

from benchmarks.rate_feed import TICK
from benchmarks.sparklog import (
    Ends,
    commit_file,
    commit_ids,
    committed_files,
    offset_ends,
    query_checkpoints,
)

if t.TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from benchmarks.rate_feed import FedFile


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
    commit time after the run. (Read every 50 ms: streamjoin's own loop keeps its last few
    manifests only, which batches back to back, with a zero trigger, pass in well under a
    second; a commit not seen is given a later one's time.)"""

    def __init__(self, workdir: str, every: float = 0.05) -> None:
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
                    seen[batch] = os.stat(commit_file(ckpt, batch)).st_mtime

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
    on_disk = {b: os.stat(commit_file(ckpt, b)).st_mtime for b in commit_ids(ckpt)}
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
    done: Mapping[str, float] | None = None,
) -> dict[str, t.Any]:
    """Latency, processed rate, backlog at the end and growth, from the engine's checkpoints and
    what `watch` saw of them during the run (or from `done`, when each fed file was done, by
    path: `traced_done_times`)."""
    done = done_times(workdir, fed, watch) if done is None else done
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
    # (The first third's median counts as at least a trigger, or with a zero trigger a feed's
    # tick: sub-second noise is not growth.)
    floor = trigger or TICK
    growth = round(last / max(first, floor), 2) if first is not None and last is not None else None
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
        # (None where some fed file was never done: it did not drain.)
        "drain_s": round(max(done.values()) - ended, 2) if done and len(done) == len(fed) else None,
    }


def traced_done_times(
    traces: Mapping[str, tuple[str, str]], reads: Mapping[str, str], fed: list[FedFile]
) -> dict[str, float]:
    """When each fed file was done by an engine that has no batches (``flink``), from the
    results' traces and what it read: `traces` maps each query's trace file
    (`engines_flink.trace_path`: a row per pair of files) to its left and right streams,
    `reads` each stream's read file (`engines_flink.reads_path`: a row per file) to its stream.
    A result is made when the later read of its two rows' files is read (an engine behind may
    read a newer file first), so a file is done once all its rows were read and every result
    it completes was made: the latest of those times. A file not read in full is not done (not
    processed)."""
    written = {(x.stream, os.path.basename(x.path)): x for x in fed}
    done: dict[str, float] = {}
    for path, stream in reads.items():
        for name, at, n in _rows(path):
            x = written.get((stream, name))
            if x is not None and int(n) == x.rows:  # (a warm-up's file was not fed)
                done[x.path] = _stamp(at)
    read = dict(done)  # (when each file's last row was read)
    for path, streams in traces.items():
        for row in _rows(path):
            files = [written.get((s, n)) for s, n in zip(streams, row[:2], strict=True) if n]
            if len(files) < 2 or None in files:
                # (An outer join's row without a partner is made when the watermark passes
                # its window, not when its file is read; a warm-up's file was not fed.)
                continue
            last = max(
                t.cast("list[FedFile]", files), key=lambda x: (read.get(x.path, 0.0), x.written)
            )
            if last.path in done:
                done[last.path] = max(done[last.path], _stamp(row[2]))
    return done


def _rows(path: str) -> list[list[str]]:
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _stamp(text: str) -> float:
    """A Flink time stamp (``yyyy-MM-dd HH:mm:ss.SSS``, UTC) in seconds since the epoch."""
    import datetime as dt

    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()
