"""The ``memory`` benchmark (`benchmarks.skew`): the bytes each unit stores of a full-history
band join under biclique and under matrix, against the papers' formulas."""

from __future__ import annotations

import os
import typing as t
from dataclasses import dataclass

from benchmarks.data import write_backlog
from benchmarks.skew_harness import (
    ROOT,
    Run,
    _rows_of,
    _say,
    backlog_batches,
    drive,
    job_text,
    sink_rows,
)
from benchmarks.zipf import zipf_streams

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
