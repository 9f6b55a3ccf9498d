"""Whether a soak figure stays flat (`benchmarks.soak`): a least-squares line through its samples
after the run has settled, and each series of a soak's report with its trend."""

from __future__ import annotations

import typing as t

import numpy as np

from benchmarks.harness_figures import _percentile
from benchmarks.soak_heap import grown
from benchmarks.soak_sampler import CHECKPOINT_PARTS

if t.TYPE_CHECKING:
    from benchmarks.soak_sampler import Sampler

SETTLE = 0.2
TOLERANCE = 0.1


def trend(times: t.Sequence[float], values: t.Sequence[float]) -> dict[str, t.Any]:
    """The least-squares line through (times, values) after the first `SETTLE` of the span: its
    rise over that span, the rise's standard error, the mean, and whether it is flat."""
    x, y = np.asarray(times, float), np.asarray(values, float)
    if len(x) < 4:
        return {"samples": len(x), "flat": None}
    keep = x >= x[0] + SETTLE * (x[-1] - x[0])
    x, y = x[keep], y[keep]
    span = float(x[-1] - x[0])
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    spread = float(np.sum((x - x.mean()) ** 2))
    stderr = float(np.sqrt(np.sum(residual**2) / max(len(x) - 2, 1) / spread)) if spread else 0.0
    mean = float(y.mean())
    rise = float(slope) * span
    flat = rise <= TOLERANCE * abs(mean) or rise <= 2 * stderr * span
    return {
        "samples": len(x),
        "mean": round(mean, 3),
        "rise": round(rise, 3),
        "rise_stderr": round(stderr * span, 3),
        "rise_share": round(rise / mean, 4) if mean else None,
        "per_hour": round(float(slope) * 3600, 3),
        "flat": bool(flat),
    }


def _trends(sampler: Sampler, history: list[dict[str, t.Any]], started: float) -> dict[str, t.Any]:
    """The sampled series and the batches' own, each with its `trend`."""
    live = [h for h in history if h["time"] >= started]
    series: dict[str, tuple[list[float], list[float]]] = {
        "batch_s": ([h["time"] - started for h in live], [h["seconds"] for h in live]),
        "state_mb": (
            [h["time"] - started for h in live],
            [sum(h["state_bytes"].values()) / 2**20 for h in live],
        ),
    }
    for figure in ("heap_mb", "heap_committed_mb"):
        at = [s for s in sampler.live_heap if figure in s]
        series[figure] = ([s["t"] for s in at], [s[figure] for s in at])
    for figure in (
        "python_rss_mb",
        "jvm_rss_mb",
        "ckpt_mb",
        *(f"ckpt_{p}_mb" for p in CHECKPOINT_PARTS),
    ):
        have = [s for s in sampler.samples if figure in s]
        series[figure] = ([s["t"] for s in have], [s[figure] for s in have])
    batch_ms = [1000 * h["seconds"] for h in live]
    end = sampler.samples[-1]["t"] if sampler.samples else 0.0
    settled = [h for at, h in sampler.histograms if at >= SETTLE * end]
    return {
        "heap_grown": grown(settled[0], settled[-1]) if len(settled) > 1 else [],
        "batches": len(live),
        "batch_p50_ms": round(_percentile(batch_ms, 50) or 0.0, 1),
        "batch_p99_ms": round(_percentile(batch_ms, 99) or 0.0, 1),
        "trends": {name: trend(*xy) for name, xy in series.items()},
        "samples": sampler.samples,
        "live_heap": sampler.live_heap,
        "batches_seen": [
            {
                "t": round(h["time"] - started, 2),
                "seconds": h["seconds"],
                "state_mb": round(sum(h["state_bytes"].values()) / 2**20, 3),
                "latency": h.get("latency"),
            }
            for h in live
        ],
    }
