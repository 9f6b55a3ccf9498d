"""Partitioning benchmarks of issue 4: skewed keys, a fluctuating |R|/|S| ratio, stored bytes.

``python -m benchmarks.skew {skew|fluctuating|memory} [--quick|--tiny] [--out F]``; the last line
printed is one JSON object. A ``--quick`` run writes ``benchmarks/results/<name>.json`` (or
``--out``) and regenerates ``benchmarks/results/SKEW.md`` from the three result files;
``python -m benchmarks.skew summary`` only regenerates the markdown.

- ``skew``: ``l.k = r.k AND r.ts BETWEEN l.ts - 1 s AND l.ts + 1 s`` on two streams whose keys
  are Zipf(z), z ∈ {0, 0.5, 1, 1.5, 2}, the hottest key the same on both sides. Each z runs
  forced ``hash`` (Spark's shuffle hash join on the key: the baseline) and ``auto`` (the
  engine's own path, moving to the cheapest scheme once the observed per-unit input is skewed)
  on the same micro-batches. Event time is stretched so that a row of the hottest key meets
  about two partners at z = 2: the output stays near the input size, while the hot key's hash
  chain is still long (the join's key is k alone; the window is checked on each candidate).
- ``fluctuating``: a full-history equi join under forced ``matrix`` with adaptation on, whose
  left:right arrival ratio alternates between 4:1 and 1:4 (a 16× swing) in phases of growing
  size, so that Squall's doubling trigger fires several times and the shape moves each time.
- ``memory``: a full-history band join ``abs(l.x - r.x) <= c`` under forced ``biclique`` and
  forced ``matrix`` on the same units and the same input.

**How the engine is driven.** In process, through the Python API: `Engine.processor` and
``processor.process(engine.unified(plan, frames), batch)`` per micro-batch, as
``tests/spark/harness.py`` does, each batch's frames read from file i of a Parquet backlog
written by `benchmarks.data.write_backlog` (or one file per batch). `benchmarks.engines.run_engine`
runs a job in a child process and hands back only totals and batch times; these benchmarks need
each batch's `BatchReport` (rows per unit, the scheme in force and its changes) and the query's
router (the matrix controller's decision log), which only the in-process API gives. One Spark
session (`streamjoin.runtime.session.get_session`, local mode) serves every run; batch times
are the wall time of ``process`` (the whole batch: state write, joins, sink, commit).

**What "per unit" means.** `BatchReport.units[q]` counts the rows each *place* of the query's
scheme receives (probing delta rows and stored rows read). On forced hash a place is the key's
hash bucket ``pmod(xxhash64(k), units)``, where a hash partitioning by the key sends the row; on
the automatic hash path only the delta's keys are observed (the state scan stays unhashed), so
its ``store`` counts are 0 until it leaves hashing. Spark's shuffle then maps places (with the
join keys) onto ``spark.sql.shuffle.partitions`` tasks, so the places' max/mean is the engine's
model of the per-task input, not a measurement of Spark's tasks.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
import time
import typing as t
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.data import write_backlog
from benchmarks.skew_report import write_summary
from benchmarks.zipf import (
    equi_pairs,
    pair_share,
    phased_streams,
    top_share,
    window_pairs,
    zipf_streams,
)
from streamjoin.adapt.schemes import describe

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.model import Job
    from streamjoin.runtime.batch.processor import BatchProcessor, BatchReport

ROOT = os.path.join(tempfile.gettempdir(), "streamjoin-bench", "skew")
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
BENCHMARKS = ("skew", "fluctuating", "memory")
SIZES = ("tiny", "quick")

_STREAM = """CREATE STREAM {name} (id BIGINT, k BIGINT, x DOUBLE, ts TIMESTAMP{wm})
  WITH (format = 'parquet', path = '{path}');
"""
_WM = ",\n    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND"


def job_text(
    paths: Mapping[str, str],
    queries: Sequence[tuple[str, str]],
    select: str,
    on: str,
    *,
    wm: bool,
) -> str:
    """Streams ``a``, ``b`` (id, k, x, ts) and, per (sink path, WITH options) of `queries`, a
    parquet sink and the query ``a l JOIN b r ON on`` into it (named q1, q2, … in order)."""
    text = "".join(_STREAM.format(name=n, path=paths[n], wm=_WM if wm else "") for n in ("a", "b"))
    for i, (out, with_) in enumerate(queries, 1):
        text += f"CREATE SINK o{i} WITH (format = 'parquet', path = '{out}');\n"
        text += f"INSERT INTO o{i} SELECT {select} FROM a l JOIN b r ON {on}\n  WITH ({with_});\n"
    return text


# --------------------------------------------------------------------------- driving the engine


@dataclass
class Run:
    """One job driven batch by batch: its reports, batch wall times and the processor."""

    job: Job
    processor: BatchProcessor
    reports: list[BatchReport] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    rows: int = 0

    def out(self, query: str = "q1") -> int:
        """Rows `query` wrote over the run."""
        return sum(r.out.get(query, 0) for r in self.reports)


def drive(
    spark: SparkSession,
    text: str,
    batches: Sequence[Mapping[str, str | None]],
    workdir: str,
) -> Run:
    """Run the job `text` over `batches` (per batch: stream -> Parquet file, None = no rows)."""
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.sources import schema_ddl
    from streamjoin.sql import parse_job

    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    job = parse_job(text)
    engine = Engine(spark)
    processor = engine.processor(job, os.path.join(workdir, "ckpt"))
    run = Run(job, processor)
    for i, files in enumerate(batches):
        frames: dict[str, DataFrame] = {}
        for name, path in files.items():
            ddl = schema_ddl(job.stream(name))
            frames[name] = (
                spark.read.schema(ddl).parquet(path)
                if path is not None
                else spark.createDataFrame([], schema=ddl)
            )
        started = time.monotonic()
        report = processor.process(engine.unified(processor.plan, frames), i)
        run.seconds.append(time.monotonic() - started)
        run.reports.append(report)
        run.rows += report.rows_in
    return run


def backlog_batches(streams: Mapping[str, str]) -> list[dict[str, str | None]]:
    """Batch i: file i of every stream of a backlog."""
    files = {n: sorted(os.listdir(d)) for n, d in streams.items()}
    count = len(next(iter(files.values())))
    return [{n: os.path.join(streams[n], files[n][i]) for n in streams} for i in range(count)]


def sink_rows(spark: SparkSession, path: str, columns: Sequence[str]) -> list[tuple[object, ...]]:
    """Every row a run's parquet sink holds, as tuples of `columns`."""
    if not os.path.isdir(path) or not any(n.startswith("batch=") for n in os.listdir(path)):
        return []
    return [tuple(r) for r in spark.read.parquet(path).select(*columns).collect()]


def _rows_of(path: str | None) -> list[dict[str, object]]:
    """A Parquet file's rows for the reference (aware datetimes made naive UTC)."""
    if path is None:
        return []
    rows: list[dict[str, object]] = pq.read_table(path).to_pylist()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, datetime) and value.tzinfo is not None:
                row[key] = value.astimezone(UTC).replace(tzinfo=None)
    return rows


def reference_by_key(
    job: Job, batches: Sequence[Mapping[str, str | None]], buckets: int
) -> list[tuple[object, ...]]:
    """`run_reference` of the job's equi query, run once per key bucket (k mod `buckets`).

    The query's predicate has ``l.k = r.k``, so every joinable pair lies inside one bucket; with
    no late rows anywhere (checked by the caller) each bucket's run sees every row on time, and
    the union of the buckets' results is the reference result over all rows, at a fraction of
    the nested loop's cost.
    """
    from streamjoin.reference import run_reference

    # per bucket, per batch, per stream: the rows (grouped once)
    parts: list[list[dict[str, list[dict[str, object]]]]] = [
        [{n: [] for n in b} for b in batches] for _ in range(buckets)
    ]
    for i, b in enumerate(batches):
        for n, path in b.items():
            for row in _rows_of(path):
                parts[t.cast("int", row["k"]) % buckets][i][n].append(row)
    out: list[tuple[object, ...]] = []
    for part in parts:
        result = run_reference(job, part)
        assert not any(result.late.values()), "the reference saw late rows"
        out += result.outputs["q1"]
    return out


def _percentile(values: Sequence[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    i = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return round(ordered[i] * 1000, 1)


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def _session() -> SparkSession:
    from streamjoin.runtime.session import get_session

    spark: SparkSession = get_session()
    return spark


# --------------------------------------------------------------------------- 1. skew


@dataclass(frozen=True)
class SkewSize:
    rows: int  # per stream
    files: int  # micro-batches
    keys: int
    units: int
    reference_buckets: int  # 0: no reference run (the exact count is still checked)


SKEW_SIZES = {
    "tiny": SkewSize(1_100, 2, 100, 8, 32),
    "quick": SkewSize(24_000, 4, 10_000, 8, 0),
    # 24,000 rows per stream per batch: at z = 2 about 14,600 of them have the hottest key.
    "full": SkewSize(192_000, 8, 10_000, 8, 0),
}
ZIPF = (0.0, 0.5, 1.0, 1.5, 2.0)
WINDOW_SECONDS = 1
HOT_MATCHES = 2.0
"""Partners per row of the hottest key at z = 2; sets the event-time span."""


def _skew_span(size: SkewSize) -> float:
    # A row meets rows of its key within ±w: rate · 2w · p_hot of them. Stretch event time so
    # that this is HOT_MATCHES at z = 2 (far fewer at smaller z).
    return size.rows * 2 * WINDOW_SECONDS * top_share(2.0, size.keys) / HOT_MATCHES


def _skew_mode(run: Run, q: str, units: int) -> dict[str, t.Any]:
    """Figures of one mode's run: time, per-unit input and state, the schemes it ran under."""
    reports = run.reports
    routing = [r.routing.get(q, "") for r in reports]
    # The batch after the first "->" runs under the new scheme.
    switched = next((i + 1 for i, note in enumerate(routing) if "->" in note), None)
    skews = [r.units[q].skew for r in reports if q in r.units]
    # On the engine's path (time buckets) only the delta is observed: its rows per unit are
    # where a shuffle on key and bucket would send it.
    after = [r.units[q].skew for r in reports[switched or 0 :] if q in r.units]
    last = reports[-1].units.get(q)
    total = sum(run.seconds)
    plan = run.processor.plan
    qp = next(qp for qp in plan.queries if qp.query.name == q)
    saved = reports[-1].manifest.routing[q]["params"]
    return {
        "rows": run.rows,
        "seconds": round(total, 2),
        "throughput": round(run.rows / total, 1) if total else None,
        "batch_p50_ms": _percentile(run.seconds, 50),
        "batch_p99_ms": _percentile(run.seconds, 99),
        "batch_ms": [round(s * 1000, 1) for s in run.seconds],
        "out": run.out(q),
        "skew_per_batch": [round(s, 3) for s in skews],
        "skew_mean": _mean(skews),
        # hash: every batch; auto: the batches after it left hashing (None if it never did)
        "skew_after_switch": _mean(after) if switched is not None else None,
        "switched_from_batch": switched,
        "routing": routing,
        "ended_on": describe(qp, saved),
        "units": units,
        "last_probe_per_unit": list(last.probe) if last else None,
        "last_state_rows_per_unit": list(last.store) if last else None,
    }


def run_skew(
    spark: SparkSession, size: str, root: str = ROOT, say: t.TextIO | None = None
) -> dict[str, t.Any]:
    """Forced hash vs auto on Zipf keys for every z (see the module docstring)."""
    sz = SKEW_SIZES[size]
    span = _skew_span(sz)
    on = (
        f"l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL '{WINDOW_SECONDS}' SECOND "
        f"AND l.ts + INTERVAL '{WINDOW_SECONDS}' SECOND"
    )
    select = "l.id AS lid, r.id AS rid, l.k AS k"
    if size != "tiny":
        _say(say, "[skew] warm-up run (not recorded) …")
        warm = zipf_streams(5_000, z=1.0, keys=sz.keys, span_seconds=span / 5, seed=99)
        bl = write_backlog(os.path.join(root, "data", "warm"), warm, {"a": "ts", "b": "ts"}, 2)
        for mode in ("hash", "auto"):
            work = os.path.join(root, "work", "warm", mode)
            options = f"partitioning = '{mode}', units = {sz.units}"
            text = job_text(bl.streams, [(os.path.join(work, "out"), options)], select, on, wm=True)
            drive(spark, text, backlog_batches(bl.streams), work)
    cases = []
    for z in ZIPF:
        tables = zipf_streams(sz.rows, z=z, keys=sz.keys, span_seconds=span, seed=int(z * 10) + 1)
        bl = write_backlog(
            os.path.join(root, "data", f"skew-{size}-z{z}"),
            tables,
            {"a": "ts", "b": "ts"},
            sz.files,
        )
        expected = window_pairs(tables["a"], tables["b"], WINDOW_SECONDS)
        batches = backlog_batches(bl.streams)
        modes: dict[str, dict[str, t.Any]] = {}
        outs: dict[str, str] = {}
        # tiny: both modes as two queries of one job (a correctness check, half the batches);
        # otherwise one job per mode, so that each has its own batch times.
        groups = [("hash", "auto")] if size == "tiny" else [("hash",), ("auto",)]
        job = None
        for group in groups:
            work = os.path.join(root, "work", f"skew-z{z}", "+".join(group))
            for mode in group:
                outs[mode] = os.path.join(work, f"out-{mode}")
            queries = [(outs[m], f"partitioning = '{m}', units = {sz.units}") for m in group]
            _say(say, f"[skew] z={z} {' + '.join(group)} …")
            run = drive(spark, job_text(bl.streams, queries, select, on, wm=True), batches, work)
            job = run.job
            assert sum(r.late for r in run.reports) == 0, "the backlog has late rows"
            for i, mode in enumerate(group, 1):
                modes[mode] = _skew_mode(run, f"q{i}", sz.units)
                _say(say, f"[skew] z={z} {mode}: {_brief(modes[mode])}")
        hash_, auto = modes["hash"], modes["auto"]
        assert hash_["out"] == auto["out"] == expected, (
            f"z={z}: hash {hash_['out']}, auto {auto['out']}, exact {expected}"
        )
        reference: int | None = None
        if sz.reference_buckets:
            cols = ("lid", "rid", "k")
            from streamjoin.reference import normalize

            assert job is not None
            want = normalize(reference_by_key(job, batches, sz.reference_buckets))
            for mode in ("hash", "auto"):
                got = normalize(sink_rows(spark, outs[mode], cols))
                assert got == want, f"z={z} {mode}: {len(got)} rows, reference {len(want)}"
            reference = len(want)
        cases.append(
            {
                "z": z,
                "top_key_share": round(top_share(z, sz.keys), 4),
                "pair_share": round(pair_share(z, sz.keys), 5),
                "expected_out": expected,
                "reference_out": reference,
                "results_agree": True,
                "hash": hash_,
                "auto": auto,
                "ratios": _ratios(hash_, auto),
            }
        )
    return {
        "benchmark": "skew",
        "size": size,
        "rows_per_stream": sz.rows,
        "batches": sz.files,
        "keys": sz.keys,
        "units": sz.units,
        "window_seconds": WINDOW_SECONDS,
        "event_time_span_seconds": round(span, 1),
        "predicate": on,
        "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "cases": cases,
        "targets": _skew_targets(cases),
    }


def _ratios(hash_: dict[str, t.Any], auto: dict[str, t.Any]) -> dict[str, float | None]:
    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a and b else None

    return {
        "throughput_auto_over_hash": ratio(auto["throughput"], hash_["throughput"]),
        "batch_p50_auto_over_hash": ratio(auto["batch_p50_ms"], hash_["batch_p50_ms"]),
        "batch_p99_auto_over_hash": ratio(auto["batch_p99_ms"], hash_["batch_p99_ms"]),
    }


def _skew_targets(cases: Sequence[dict[str, t.Any]]) -> dict[str, t.Any]:
    high = [c for c in cases if c["z"] >= 1.5]
    flat = [c for c in cases if c["z"] == 0]
    speed = [c["ratios"]["throughput_auto_over_hash"] for c in high]
    balance = [c["auto"]["skew_after_switch"] for c in high]
    zero = [c["ratios"]["throughput_auto_over_hash"] for c in flat]
    return {
        "z>=1.5: auto >= 4x hash": all(s is not None and s >= 4 for s in speed),
        "z>=1.5: auto max/mean < 1.5": all(b is not None and b < 1.5 for b in balance),
        "z=0: auto within 20% of hash": all(s is not None and s >= 0.8 for s in zero),
        "speedups_at_z>=1.5": speed,
        "auto_skew_at_z>=1.5": balance,
        "speedup_at_z=0": zero,
    }


# --------------------------------------------------------------------------- 2. fluctuating


@dataclass(frozen=True)
class FluctSize:
    first: int  # rows in the first phase
    phases: int
    batches_per_phase: int
    growth: float  # each phase's rows over the previous one's
    keys: int
    units: int
    reference_buckets: int


FLUCT_SIZES = {
    "tiny": FluctSize(1_250, 4, 1, 2.0, 2_000, 8, 64),
    "quick": FluctSize(2_000, 7, 2, 1.8, 200_000, 8, 1_024),
}
RATIO = 4
"""Left:right arrivals are RATIO:1, then 1:RATIO, and so on: a RATIO² (16×) swing."""


def fluct_phases(sz: FluctSize) -> list[tuple[int, int, int]]:
    """(batches, left rows per batch, right rows per batch) of each phase."""
    out = []
    rows = float(sz.first)
    for i in range(sz.phases):
        left, right = (RATIO, 1) if i % 2 == 0 else (1, RATIO)
        per_batch = rows / sz.batches_per_phase
        out.append(
            (
                sz.batches_per_phase,
                round(per_batch * left / (RATIO + 1)),
                round(per_batch * right / (RATIO + 1)),
            )
        )
        rows *= sz.growth
    return out


_SHAPE = re.compile(r"matrix (\d+)×(\d+)")


def _shape_of(note: str) -> tuple[int, int]:
    found = _SHAPE.search(note.split(" -> ")[0])
    assert found, f"not a matrix scheme: {note!r}"
    return int(found.group(1)), int(found.group(2))


def run_fluctuating(
    spark: SparkSession, size: str, root: str = ROOT, say: t.TextIO | None = None
) -> dict[str, t.Any]:
    """Forced matrix with Squall's adaptation under a swinging arrival ratio."""
    from streamjoin.adapt import MatrixController
    from streamjoin.partition import ilf, optimal_shape

    sz = FLUCT_SIZES[size]
    phases = fluct_phases(sz)
    tables = phased_streams(phases, keys=sz.keys, seed=5)
    data = os.path.join(root, "data", f"fluct-{size}")
    shutil.rmtree(data, ignore_errors=True)
    batches: list[dict[str, str | None]] = []
    for i, batch in enumerate(tables):
        files: dict[str, str | None] = {}
        for name, table in batch.items():
            os.makedirs(os.path.join(data, name), exist_ok=True)
            path = os.path.join(data, name, f"part-{i:05d}.parquet")
            pq.write_table(table, path)
            files[name] = path
        batches.append(files)
    paths = {n: os.path.join(data, n) for n in ("a", "b")}
    work = os.path.join(root, "work", f"fluct-{size}")
    out = os.path.join(work, "out")
    on = "l.k = r.k"
    options = f"partitioning = 'matrix', units = {sz.units}, adapt = true"
    text = job_text(paths, [(out, options)], "l.id AS lid, r.id AS rid", on, wm=False)
    _say(say, f"[fluctuating] {len(batches)} batches, phases {phases} …")
    run = drive(spark, text, batches, work)
    per_batch = []
    left_total = right_total = 0
    for i, (report, batch) in enumerate(zip(run.reports, tables, strict=True)):
        dl, dr = batch["a"].num_rows, batch["b"].num_rows
        left_total += dl
        right_total += dr
        ran = _shape_of(report.routing["q1"])
        nxt = report.manifest.routing["q1"]["params"]
        nxt_shape = (int(nxt["n"]), int(nxt["m"]))
        best = optimal_shape(left_total, right_total, sz.units)
        opt = ilf(left_total, right_total, *best)
        per_batch.append(
            {
                "batch": i,
                "left_rows": dl,
                "right_rows": dr,
                "arrival_ratio": round(dl / dr, 3) if dr else None,
                "left_total": left_total,
                "right_total": right_total,
                "ran_under": list(ran),
                "shape_after": list(nxt_shape),
                "optimal": list(best),
                # the shape in force after the batch's decision, for the totals it counted
                "ilf_ratio_after": round(ilf(left_total, right_total, *nxt_shape) / opt, 4),
                # the shape the batch ran under (decided one batch earlier), same totals
                "ilf_ratio_ran": round(ilf(left_total, right_total, *ran) / opt, 4),
                "seconds": round(run.seconds[i], 3),
                "routing": report.routing["q1"],
            }
        )
    ctl = MatrixController.from_dict(run.reports[-1].manifest.routing["q1"]["controller"])
    decisions = [
        {
            **d.to_dict(),
            "ilf_new": ilf(d.left_total, d.right_total, *d.new_shape),
            "ratio_new": round(ilf(d.left_total, d.right_total, *d.new_shape) / d.ilf_optimal, 4),
            "ratio_old": round(d.ilf_old / d.ilf_optimal, 4),
            "totals_ratio": round(d.left_total / d.right_total, 3) if d.right_total else None,
        }
        for d in ctl.decisions
    ]
    worst_decision = max((d["ratio_new"] for d in decisions), default=None)
    first = decisions[0]["batch"] if decisions else len(per_batch)
    worst_after = max((b["ilf_ratio_after"] for b in per_batch[first:]), default=None)
    assert decisions, "the controller never decided"
    assert worst_decision is not None and worst_decision <= 1.25, decisions
    assert worst_after is not None and worst_after <= 1.25, per_batch
    expected = equi_pairs(
        np.concatenate([b["a"]["k"].to_numpy() for b in tables]),
        np.concatenate([b["b"]["k"].to_numpy() for b in tables]),
    )
    assert run.out() == expected, f"out {run.out()}, exact {expected}"
    from streamjoin.reference import normalize

    got = normalize(sink_rows(spark, out, ("lid", "rid")))
    if sz.reference_buckets:
        want = normalize(reference_by_key(run.job, batches, sz.reference_buckets))
    else:
        want = normalize(_pairs(tables))
    assert got == want, f"{len(got)} rows, reference {len(want)}"
    shapes = [b["ran_under"] for b in per_batch]
    changes = sum(1 for a, b in itertools.pairwise(shapes) if a != b)
    return {
        "benchmark": "fluctuating",
        "size": size,
        "predicate": on + " (full history)",
        "units": sz.units,
        "keys": sz.keys,
        "phases": [
            {"batches": p[0], "left_per_batch": p[1], "right_per_batch": p[2]} for p in phases
        ],
        "arrival_ratio_swing": RATIO * RATIO,
        "batches": per_batch,
        "decisions": decisions,
        "shape_changes": changes,
        "shapes_seen": sorted({tuple(s) for s in shapes}),
        "worst_ilf_ratio_at_decisions": worst_decision,
        "worst_ilf_ratio_after_each_batch": worst_after,
        "worst_ilf_ratio_ran_under": max(
            b["ilf_ratio_ran"] for b in per_batch[first + 1 :] or per_batch
        ),
        "out": run.out(),
        "expected_out": expected,
        "reference_out": len(want),
        "results_agree": True,
        "seconds": round(sum(run.seconds), 2),
        "targets": {
            "ILF within 1.25x of optimum at every decision": worst_decision <= 1.25,
            "shape follows the ratio (>= 3 changes)": changes >= 3,
            "results exact": True,
        },
    }


def _pairs(tables: Sequence[Mapping[str, pa.Table]]) -> list[tuple[object, ...]]:
    """Every (l.id, r.id) with l.k = r.k over all batches (an exact hash join in Arrow)."""
    left = pa.concat_tables([b["a"].select(["id", "k"]) for b in tables])
    right = pa.concat_tables([b["b"].select(["id", "k"]) for b in tables])
    right = right.rename_columns(["rid", "k"])
    joined = left.join(right, keys="k", join_type="inner")
    return list(zip(joined["id"].to_pylist(), joined["rid"].to_pylist(), strict=True))


# --------------------------------------------------------------------------- 3. memory


@dataclass(frozen=True)
class MemSize:
    rows: int  # per stream
    files: int
    units: int


MEM_SIZES = {"tiny": MemSize(300, 2, 8), "quick": MemSize(40_000, 4, 8)}
X_RANGE = 1_000_000.0


def _state_bytes(ckpt: str, stream: str) -> int:
    """Bytes of the stream's state files on disk (every batch's ``sj_stream=<stream>``)."""
    total = 0
    state = os.path.join(ckpt, "state")
    for batch in os.listdir(state):
        folder = os.path.join(state, batch, f"sj_stream={stream}")
        if os.path.isdir(folder):
            total += sum(
                os.path.getsize(os.path.join(folder, f))
                for f in os.listdir(folder)
                if f.endswith(".parquet")
            )
    return total


def _memory_figures(
    run: Run, q: str, name: str, units: int, rows: tuple[int, int], on_disk: tuple[int, int]
) -> dict[str, t.Any]:
    """Stored bytes per unit of query `q` (scheme `name`) against the papers' formulas."""
    from streamjoin.partition import memory_biclique, memory_matrix, optimal_shape

    left_rows, right_rows = rows
    bytes_l, bytes_r = on_disk
    last = run.reports[-1]
    stats = last.units[q]
    assert sum(stats.probe) == 0, "the measurement batch had input"
    size_l, size_r = bytes_l / left_rows, bytes_r / right_rows
    per_tuple = (bytes_l + bytes_r) / (left_rows + right_rows)
    # The runtime's own statistic: rows per unit at the mean bytes of a stored row, from the
    # state files' sizes it records in the manifest (checked against the files on disk).
    stored = list(stats.store_bytes)
    assert abs(stats.row_bytes / per_tuple - 1) < 0.01, (stats.row_bytes, per_tuple)
    if name == "biclique":
        half = units // 2
        formula = memory_biclique(left_rows, right_rows, size_l, size_r)
        formula_rows = memory_biclique(left_rows, right_rows)
        per_unit_formula = [size_l * left_rows / half] * half + [
            size_r * right_rows / (units - half)
        ] * (units - half)
        layout = f"{half}+{units - half} units"
    else:
        n, m = optimal_shape(1.0, 1.0, units)
        formula = memory_matrix(left_rows, right_rows, n, m, size_l, size_r)
        formula_rows = memory_matrix(left_rows, right_rows, n, m)
        cell = size_l * left_rows / n + size_r * right_rows / m  # the ILF
        per_unit_formula = [cell] * (n * m)
        layout = f"{n}×{m}"
    measured = sum(stored)
    return {
        "scheme": last.routing[q],
        "layout": layout,
        "state_rows_per_unit": list(stats.store),
        "stored_bytes_per_unit": stored,
        "stored_bytes_per_unit_formula": [round(x) for x in per_unit_formula],
        "stored_bytes_total": measured,
        "stored_rows_total": sum(stats.store),
        "formula_bytes": round(formula),
        "formula_rows": round(formula_rows),
        "measured_over_formula": round(measured / formula, 4),
        "max_unit_bytes": max(stored),
        "on_disk_state_bytes": bytes_l + bytes_r,
        "bytes_per_tuple": {"a": round(size_l, 2), "b": round(size_r, 2)},
        "out": run.out(q),
        "seconds": round(sum(run.seconds), 2),
    }


def run_memory(
    spark: SparkSession, size: str, root: str = ROOT, say: t.TextIO | None = None
) -> dict[str, t.Any]:
    """Stored bytes per unit of a full-history band join under biclique and matrix."""
    from streamjoin.reference import normalize, run_reference

    sz = MEM_SIZES[size]
    c = round(X_RANGE / sz.rows / 2, 3)  # about one partner per row at the end
    tables = zipf_streams(sz.rows, z=0.0, keys=1_000, span_seconds=sz.files * 10.0, seed=3)
    bl = write_backlog(
        os.path.join(root, "data", f"mem-{size}"), tables, {"a": "ts", "b": "ts"}, sz.files
    )
    # The measurement batch: no input, so the joins read exactly the stored state (both sides,
    # all of it: a full-history join keeps everything) routed to its places.
    batches: list[dict[str, str | None]] = [*backlog_batches(bl.streams), {"a": None, "b": None}]
    on = f"abs(l.x - r.x) <= {c}"
    select = "l.id AS lid, r.id AS rid"
    schemes = {
        "biclique": f"partitioning = 'biclique', units = {sz.units}, adapt = false",
        "matrix": f"partitioning = 'matrix', units = {sz.units}, adapt = false",
    }
    left_rows, right_rows = tables["a"].num_rows, tables["b"].num_rows
    results: dict[str, dict[str, t.Any]] = {}
    outputs = {}
    # tiny: both schemes as two queries of one job (one state, half the batches); otherwise one
    # job per scheme, each with its own checkpoint, whose state bytes are compared.
    groups = [("biclique", "matrix")] if size == "tiny" else [("biclique",), ("matrix",)]
    for group in groups:
        work = os.path.join(root, "work", f"mem-{size}", "+".join(group))
        outs = {name: os.path.join(work, f"out-{name}") for name in group}
        _say(say, f"[memory] {' + '.join(group)} …")
        queries = [(outs[name], schemes[name]) for name in group]
        run = drive(spark, job_text(bl.streams, queries, select, on, wm=False), batches, work)
        ckpt = os.path.join(work, "ckpt")
        bytes_l, bytes_r = _state_bytes(ckpt, "a"), _state_bytes(ckpt, "b")
        for q, name in enumerate(group, 1):
            results[name] = _memory_figures(
                run, f"q{q}", name, sz.units, (left_rows, right_rows), (bytes_l, bytes_r)
            )
            outputs[name] = normalize(sink_rows(spark, outs[name], ("lid", "rid")))
    assert outputs["biclique"] == outputs["matrix"], "biclique and matrix results differ"
    reference: int | None = None
    if size == "tiny":
        from streamjoin.sql import parse_job

        text = job_text(bl.streams, [("/unused", schemes["matrix"])], select, on, wm=False)
        want = normalize(
            run_reference(
                parse_job(text), [{k: _rows_of(p) for k, p in b.items()} for b in batches]
            ).outputs["q1"]
        )
        assert outputs["matrix"] == want, f"{len(outputs['matrix'])} rows, reference {len(want)}"
        reference = len(want)
    bi, mat = results["biclique"], results["matrix"]
    within = all(abs(r["measured_over_formula"] - 1) <= 0.10 for r in results.values())
    return {
        "benchmark": "memory",
        "size": size,
        "predicate": on + " (full history)",
        "rows": {"a": left_rows, "b": right_rows},
        "units": sz.units,
        "schemes": results,
        "matrix_over_biclique_stored": round(
            mat["stored_bytes_total"] / bi["stored_bytes_total"], 3
        ),
        "on_disk_equal": bi["on_disk_state_bytes"] == mat["on_disk_state_bytes"],
        "out": bi["out"],
        "reference_out": reference,
        "results_agree": True,
        "targets": {"stored bytes match the formulas within 10%": within},
    }


# --------------------------------------------------------------------------- CLI and summary

RUNNERS = {"skew": run_skew, "fluctuating": run_fluctuating, "memory": run_memory}


def run(
    name: str,
    size: str,
    spark: SparkSession | None = None,
    root: str = ROOT,
    say: t.TextIO | None = None,
) -> dict[str, t.Any]:
    """One benchmark at one size, with the machine it ran on and its wall time."""
    from benchmarks.harness import machine

    spark = spark or _session()
    started = time.monotonic()
    result = RUNNERS[name](spark, size, root, say)
    result["machine"] = machine()
    result["spark_master"] = spark.sparkContext.master
    result["wall_seconds"] = round(time.monotonic() - started, 1)
    result["command"] = f"python -m benchmarks.skew {name} --{size}"
    return result


def _say(say: t.TextIO | None, text: str) -> None:
    if say is not None:
        print(text, file=say, flush=True)


def _brief(r: dict[str, t.Any]) -> str:
    return (
        f"{r['throughput']} rows/s, p50/p99 {r['batch_p50_ms']}/{r['batch_p99_ms']} ms, "
        f"max/mean {r['skew_mean']}, out {r['out']}, ended on {r['ended_on']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.skew", description=__doc__.splitlines()[0]
    )
    parser.add_argument("benchmark", choices=(*BENCHMARKS, "summary"))
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", dest="size", action="store_const", const="quick")
    group.add_argument("--tiny", dest="size", action="store_const", const="tiny")
    group.add_argument("--full", dest="size", action="store_const", const="full")
    parser.add_argument(
        "--out",
        help="where to write the JSON (default: results/<name>.json at --quick, "
        "results/skew-full.json at --full)",
    )
    args = parser.parse_args(argv)
    if args.benchmark == "summary":
        path = write_summary()
        print(json.dumps({"summary": path}))
        return 0
    size = args.size or "quick"
    result = run(args.benchmark, size, say=sys.stderr)
    if size == "full" and args.benchmark != "skew":
        parser.error("--full is a size of the skew benchmark only")
    name = {"quick": args.benchmark, "full": f"{args.benchmark}-full"}.get(size)
    target = args.out or (os.path.join(RESULTS, f"{name}.json") if name else None)
    if target:
        with open(target, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        if os.path.dirname(os.path.abspath(target)) == RESULTS:
            write_summary()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
