"""The ``fluctuating`` benchmark (`benchmarks.skew`): forced matrix with Squall's adaptation
while the left:right arrival ratio swings, checked against the optimal shape at every decision."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import typing as t
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.skew_harness import ROOT, _say, drive, job_text, reference_by_key, sink_rows
from benchmarks.zipf import equi_pairs, phased_streams

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import SparkSession


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
