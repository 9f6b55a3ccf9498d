"""The ``passing`` benchmark (`benchmarks.skew`): a hot key that passes. Zipf(2) keys for the
first half of the batches, even keys (z = 0) after, forced hash against ``auto``: does ``auto``
leave hash while the key is hot, come back once it has passed, and what do the two changes cost
the batches they fall on."""

from __future__ import annotations

import os
import re
import typing as t
from dataclasses import dataclass

import pyarrow as pa

from benchmarks.data import write_backlog
from benchmarks.skew_harness import (
    ROOT,
    _percentile,
    _say,
    backlog_batches,
    drive,
    job_text,
    reference_by_key,
    sink_rows,
)
from benchmarks.zipf import top_share, window_pairs, zipf_streams
from streamjoin.reference import normalize

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class PassingSize:
    rows: int  # per stream in the hot phase (the even phase has as many a batch)
    hot_files: int  # batches of the hot phase
    even_files: int  # batches of the even phase
    keys: int
    units: int
    reference_buckets: int  # 0: no reference run (the exact count is still checked)


PASSING_SIZES = {
    "tiny": PassingSize(2_400, 2, 4, 2_000, 4, 32),
    "quick": PassingSize(48_000, 4, 8, 10_000, 8, 0),
    "full": PassingSize(192_000, 4, 8, 10_000, 8, 0),
}
BACK = re.compile(r"-> hash on \d+ units from batch")
"""A routing note of the change back to plain hash."""
WINDOW_SECONDS = 1
HOT_MATCHES = 2.0
"""Partners per row of the hottest key in the hot phase; sets the event-time span."""


def passing_streams(sz: PassingSize) -> tuple[dict[str, pa.Table], float]:
    """Streams ``a`` and ``b``: `sz.rows` rows each of Zipf(2) keys over a span of event time,
    then even keys at the same rate over `sz.even_files` / `sz.hot_files` of that span (ids go
    on), so that a backlog of ``hot_files + even_files`` files of equal spans changes phase at
    file `sz.hot_files`; and the hot phase's span in seconds."""
    span = sz.rows * 2 * WINDOW_SECONDS * top_share(2.0, sz.keys) / HOT_MATCHES
    hot = zipf_streams(sz.rows, z=2.0, keys=sz.keys, span_seconds=span, seed=21)
    scale = sz.even_files / sz.hot_files
    even = zipf_streams(
        round(sz.rows * scale), z=0.0, keys=sz.keys, span_seconds=span * scale, seed=1
    )
    out = {}
    shift = pa.scalar(int(span * 1_000_000), pa.duration("us"))
    for name in ("a", "b"):
        later = even[name]
        later = later.set_column(0, "id", pa.compute.add(later["id"], sz.rows))
        later = later.set_column(3, "ts", pa.compute.add(later["ts"], shift))
        out[name] = pa.concat_tables([hot[name], later])
    return out, span


def _mode(reports: t.Sequence[t.Any], seconds: t.Sequence[float], q: str) -> dict[str, t.Any]:
    """One mode's figures: batch times, the routing notes, the batches a change took effect
    at, and the cost of those batches against the others'."""
    notes = [r.routing.get(q, "") for r in reports]
    changes = [i + 1 for i, note in enumerate(notes) if "->" in note and i + 1 < len(notes)]
    ms = [round(s * 1000, 1) for s in seconds]
    steady = [s for i, s in enumerate(seconds) if i > 0 and i not in changes]
    return {
        "batch_ms": ms,
        "routing": notes,
        "changed_at": changes,
        "left_hash_at": next((i for i in changes if not BACK.search(notes[i - 1])), None),
        "back_to_hash_at": next((i for i in changes if BACK.search(notes[i - 1])), None),
        "steady_p50_ms": _percentile(steady, 50),
        "steady_p99_ms": _percentile(steady, 99),
        "change_batch_ms": [ms[i] for i in changes],
        # (On a cluster: the batches that built the operator's partitions on the executors
        # from the stored rows, and those that started them empty beside a drain.)
        "index_builds": [
            i for i, r in enumerate(reports) if any(" index built" in e for e in r.events)
        ],
        "index_drains": [
            i for i, r in enumerate(reports) if any(" draining " in e for e in r.events)
        ],
        "out": sum(r.out.get(q, 0) for r in reports),
    }


def run_passing(
    spark: SparkSession, size: str, root: str = ROOT, say: t.TextIO | None = None
) -> dict[str, t.Any]:
    """Forced hash and ``auto`` over a hot key that passes (the module's docstring)."""
    sz = PASSING_SIZES[size]
    tables, span = passing_streams(sz)
    files = sz.hot_files + sz.even_files
    bl = write_backlog(
        os.path.join(root, "data", f"passing-{size}"), tables, {"a": "ts", "b": "ts"}, files
    )
    on = (
        f"l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL '{WINDOW_SECONDS}' SECOND "
        f"AND l.ts + INTERVAL '{WINDOW_SECONDS}' SECOND"
    )
    select = "l.id AS lid, r.id AS rid, l.k AS k"
    batches = backlog_batches(bl.streams)
    expected = window_pairs(tables["a"], tables["b"], WINDOW_SECONDS)
    modes: dict[str, dict[str, t.Any]] = {}
    outs: dict[str, list[tuple[object, ...]]] = {}
    cols = ("lid", "rid", "k")
    if size != "tiny":
        _say(say, "[passing] warm-up run of both modes over two batches (not recorded) …")
        for mode in ("hash", "auto"):
            work = os.path.join(root, "work", f"passing-{size}", "warm")
            options = f"partitioning = '{mode}', units = {sz.units}"
            text = job_text(bl.streams, [(os.path.join(work, "out"), options)], select, on, wm=True)
            drive(spark, text, batches[:2], work)
    for mode in ("hash", "auto"):
        work = os.path.join(root, "work", f"passing-{size}", mode)
        out = os.path.join(work, "out")
        options = f"partitioning = '{mode}', units = {sz.units}"
        _say(say, f"[passing] {mode} …")
        run = drive(
            spark, job_text(bl.streams, [(out, options)], select, on, wm=True), batches, work
        )
        modes[mode] = _mode(run.reports, run.seconds, "q1")
        if sz.reference_buckets:
            outs[mode] = normalize(sink_rows(spark, out, cols))
            outs.setdefault(
                "reference", normalize(reference_by_key(run.job, batches, sz.reference_buckets))
            )
        _say(say, f"[passing] {mode}: {modes[mode]['routing'][-1]}, {modes[mode]['batch_ms']}")
    hash_, auto = modes["hash"], modes["auto"]
    assert hash_["out"] == auto["out"] == expected, (
        f"hash {hash_['out']}, auto {auto['out']}, exact {expected}"
    )
    assert not outs or outs["hash"] == outs["auto"] == outs["reference"]
    back = auto["back_to_hash_at"]
    stall = max(auto["change_batch_ms"], default=None)
    return {
        "benchmark": "passing",
        "size": size,
        "rows_per_stream_and_batch": sz.rows // sz.hot_files,
        "hot_batches": sz.hot_files,
        "even_batches": sz.even_files,
        "keys": sz.keys,
        "units": sz.units,
        "window_seconds": WINDOW_SECONDS,
        "event_time_span_seconds_per_phase": round(span, 1),
        "predicate": on,
        "expected_out": expected,
        "results_agree": True,
        "hash": hash_,
        "auto": auto,
        "targets": {
            "auto leaves hash in the hot phase": auto["left_hash_at"] is not None
            and auto["left_hash_at"] <= sz.hot_files,
            "auto is back on hash in the even phase": back is not None and back > sz.hot_files,
            "no change stalls a batch beyond 2x the steady p99": stall is not None
            and auto["steady_p99_ms"] is not None
            and stall <= 2 * auto["steady_p99_ms"],
        },
    }
