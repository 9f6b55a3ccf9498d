"""The ``multiquery`` benchmark's figures (`benchmarks.multiquery`): a mode's time, throughput,
batch times, state and per-query counts, global's ratios to the other modes, and issue 5's
target."""

from __future__ import annotations

import itertools
import typing as t

from benchmarks.harness_figures import _percentile

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from benchmarks.multiquery_modes import Jobs


def _by_sink(text: str, counts: dict[str, int]) -> dict[str, int]:
    """A run's per-query counts (keyed by query name, q1, q2, ...) keyed by sink instead."""
    from streamjoin.sql import parse_job

    return {q.sink: int(counts.get(q.name, 0)) for q in parse_job(text, "<mq>").queries}


def mode_figures(
    mode: str, jobs: Jobs, runs: Sequence[dict[str, t.Any]], input_rows: int
) -> dict[str, t.Any]:
    """Time, throughput, batch times, state and per-query counts of one mode's runs."""
    errors = [r["error"] for r in runs if r.get("error")]
    if errors or len(runs) != len(jobs):
        return {"mode": mode, "error": errors[0] if errors else "missing runs"}
    seconds = sum(float(r["seconds"]) for r in runs)
    batches = [float(ms) for r in runs for ms in r["batch_ms"]]
    out: dict[str, int] = {}
    for (text, _), r in zip(jobs, runs, strict=True):
        out |= _by_sink(text, r["out"])
    return {
        "mode": mode,
        "jobs": len(jobs),
        "seconds": round(seconds, 2),
        "throughput": round(input_rows / seconds, 1) if seconds else None,
        "rows_read": sum(int(r["rows_in"]) for r in runs),
        "batches": len(batches),
        "batch_p50_ms": _percentile(batches, 50),
        "batch_p99_ms": _percentile(batches, 99),
        "state_rows": sum(int(r["state_rows"]) for r in runs),
        "state_bytes": sum(int(r["state_bytes"]) for r in runs),
        "out_rows": sum(out.values()),
        "out": out,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def ratios(modes: dict[str, dict[str, t.Any]]) -> dict[str, float | None]:
    """Global against the other two: throughput (higher is better for global); CPU seconds,
    state and peak memory (the other mode's over global's)."""
    g, a, s = (modes.get(m, {}) for m in ("global", "alone", "simple"))
    return {
        "throughput_global_over_alone": _ratio(g.get("throughput"), a.get("throughput")),
        "throughput_global_over_simple": _ratio(g.get("throughput"), s.get("throughput")),
        "throughput_simple_over_alone": _ratio(s.get("throughput"), a.get("throughput")),
        "cpu_alone_over_global": _ratio(a.get("cpu_seconds"), g.get("cpu_seconds")),
        "cpu_simple_over_global": _ratio(s.get("cpu_seconds"), g.get("cpu_seconds")),
        "state_alone_over_global": _ratio(a.get("state_bytes"), g.get("state_bytes")),
        "state_simple_over_global": _ratio(s.get("state_bytes"), g.get("state_bytes")),
        "peak_alone_over_global": _ratio(a.get("peak_rss_mb"), g.get("peak_rss_mb")),
    }


def targets(runs: Sequence[dict[str, t.Any]]) -> dict[str, t.Any]:
    """Issues 5 and 68's targets: global ≥ 2.5× alone's throughput at 10 queries and ≥ 10× at
    100, the gap widening; global's batch p50 ≤ 1 s at 10 queries."""
    gaps = {r["queries"]: r["ratios"]["throughput_global_over_alone"] for r in runs}
    at10, at100 = gaps.get(10), gaps.get(100)
    ordered = [gaps[n] for n in sorted(gaps)]
    widening = (
        all(a is not None and b is not None and b > a for a, b in itertools.pairwise(ordered))
        if len(ordered) > 1
        else None
    )
    p50 = {r["queries"]: r["modes"].get("global", {}).get("batch_p50_ms") for r in runs}
    return {
        "global_over_alone": gaps,
        "at_10_queries_ge_2_5": None if at10 is None else at10 >= 2.5,
        "at_100_queries_ge_10": None if at100 is None else at100 >= 10,
        "gap_widens": widening,
        "global_batch_p50_ms": p50,
        "at_10_queries_p50_le_1s": None if p50.get(10) is None else p50[10] <= 1000,
    }
