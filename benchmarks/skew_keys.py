"""The ``skew`` benchmark (`benchmarks.skew`): forced hash against auto partitioning on
Zipf-distributed keys, for every z."""

from __future__ import annotations

import os
import typing as t
from dataclasses import dataclass

from benchmarks.data import write_backlog
from benchmarks.skew_harness import (
    ROOT,
    Run,
    _mean,
    _percentile,
    _say,
    backlog_batches,
    drive,
    job_text,
    reference_by_key,
    sink_rows,
)
from benchmarks.zipf import pair_share, top_share, window_pairs, zipf_streams
from streamjoin.adapt.schemestate import describe

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class SkewSize:
    rows: int  # per stream
    files: int  # micro-batches
    keys: int
    units: int
    reference_buckets: int  # 0: no reference run (the exact count is still checked)
    zipfs: tuple[float, ...]  # the Zipf exponents run


ZIPF = (0.0, 0.5, 1.0, 1.5, 2.0)
SKEW_SIZES = {
    # tiny, a correctness check: uniform keys (hash stays) and the hottest (auto moves).
    "tiny": SkewSize(1_100, 2, 100, 8, 32, (0.0, 2.0)),
    "quick": SkewSize(24_000, 4, 10_000, 8, 0, ZIPF),
    # 24,000 rows per stream per batch: at z = 2 about 14,600 of them have the hottest key.
    "full": SkewSize(192_000, 8, 10_000, 8, 0, ZIPF),
}
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
    """Forced hash vs auto on Zipf keys for every z (see the docstring of `benchmarks.skew`)."""
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
    for z in sz.zipfs:
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
        "targets": skew_targets(
            cases, cluster=str(spark.sparkContext.master).startswith("spark:"), size=size
        ),
    }


def _ratios(hash_: dict[str, t.Any], auto: dict[str, t.Any]) -> dict[str, float | None]:
    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a and b else None

    return {
        "throughput_auto_over_hash": ratio(auto["throughput"], hash_["throughput"]),
        "batch_p50_auto_over_hash": ratio(auto["batch_p50_ms"], hash_["batch_p50_ms"]),
        "batch_p99_auto_over_hash": ratio(auto["batch_p99_ms"], hash_["batch_p99_ms"]),
    }


FASTER = {False: 1.0, True: 1.5}
"""How much faster than forced hash auto must be at z ≥ 1.5 (issue 67): locally at least as
fast (both run on the operator, and 2 cores bound what spreading a hot key gains), on the
2-worker cluster 1.5× (forced hash leaves one executor with the hot key's work)."""
SPEED_JUDGED = ("full",)
"""Sizes whose speed against forced hash is judged (see `SPEED_UNJUDGED_WHY`)."""
SPEED_UNJUDGED_WHY = (
    "a hot key's work is below what its runs can tell apart: z = 1.5 gives it about 5 M "
    "candidate pairs a batch (some 0.1 s of one task at the 23 ns a pair full size measures), "
    "while hash's batch of even keys took 0.6 s in one recorded run and 1.0 s in another"
)


def skew_targets(
    cases: Sequence[dict[str, t.Any]], *, cluster: bool, size: str = "full"
) -> dict[str, t.Any]:
    high = [c for c in cases if c["z"] >= 1.5]
    flat = [c for c in cases if c["z"] == 0]
    speed = [c["ratios"]["throughput_auto_over_hash"] for c in high]
    balance = [c["auto"]["skew_after_switch"] for c in high]
    zero = [c["ratios"]["throughput_auto_over_hash"] for c in flat]
    faster = FASTER[cluster]
    judged = {f"z>=1.5: auto >= {faster}x hash": all(s is not None and s >= faster for s in speed)}
    return {
        **(judged if size in SPEED_JUDGED else {}),
        "z>=1.5: auto max/mean < 1.5": all(b is not None and b < 1.5 for b in balance),
        "z=0: auto within 20% of hash": all(s is not None and s >= 0.8 for s in zero),
        "speedups_at_z>=1.5": speed,
        "auto_skew_at_z>=1.5": balance,
        "speedup_at_z=0": zero,
    }


def _brief(r: dict[str, t.Any]) -> str:
    return (
        f"{r['throughput']} rows/s, p50/p99 {r['batch_p50_ms']}/{r['batch_p99_ms']} ms, "
        f"max/mean {r['skew_mean']}, out {r['out']}, ended on {r['ended_on']}"
    )
