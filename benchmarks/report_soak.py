"""The soak's rows in RESULTS.md (`benchmarks.soak`): its target, a table of each figure's
trend, and the plot of every figure over the run."""

from __future__ import annotations

import os
import typing as t

from benchmarks.rate import TRIGGER
from benchmarks.rate_feed import TICK

Report = dict[str, t.Any]
SOAK_PLOT = "soak.png"
OURS = ("python_rss_mb", "jvm_rss_mb", "heap_mb", "state_mb", "batch_s", "ckpt_manifests_mb")
"""The figures the target holds flat: memory, state, batch time and our part of the checkpoint
(stored state is counted in `state_mb`, wherever it lives)."""
LABELS = {
    "python_rss_mb": "driver's Python, resident MB",
    "jvm_rss_mb": "JVM (driver and executor), resident MB",
    "heap_mb": "JVM heap live after a full collection, MB",
    "heap_committed_mb": "JVM heap's size (grown by the collector up to -Xmx), MB",
    "state_mb": "live state, MB",
    "batch_s": "batch time, s",
    "ckpt_mb": "checkpoint, MB",
    "ckpt_spark_mb": "checkpoint: Spark's query logs, MB",
    "ckpt_manifests_mb": "checkpoint: manifests, MB",
    "ckpt_state_mb": "checkpoint: stored state, MB",
    "ckpt_metrics_mb": "checkpoint: metrics history (capped at 32 MB), MB",
}
SPARK_SOURCE_LOG = "https://github.com/apache/spark/pull/28363"
"""Spark's file source keeps every file it has read in its checkpoint's log (a maintainer's
account of it)."""


def soak_targets(file: str, report: Report) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?) of one soak report."""
    trends = report.get("trends", {})
    if report.get("error") or not trends:
        return [(f"soak (`{file}`): flat", f"error: {report.get('error')}", False)]
    rises = ", ".join(
        f"{name} {_share(trends[name])}" for name in OURS if trends.get(name, {}).get("flat")
    )
    grows = [name for name in OURS if trends.get(name, {}).get("flat") is False]
    minutes = report["duration_s"] / 60
    batch_s = report["batch_p50_ms"] / 1000
    keeps_up = (report["latency_growth"] or 0) <= 2 and report["backlog_at_end_s"] <= 2 * max(
        TRIGGER, batch_s
    ) + TICK
    return [
        (
            f"soak (`{file}`): {minutes:g} min at {report['rate_per_stream']:g} rows/s per stream: "
            "memory, state, checkpoint and batch time flat; keeps up",
            f"flat: {rises or 'none'}; grows: {', '.join(grows) or 'none'}; latency p50/p99 "
            f"{report['latency_p50_s']}/{report['latency_p99_s']} s (growth "
            f"×{report['latency_growth']})",
            keeps_up and not grows and all(trends.get(n, {}).get("flat") is not None for n in OURS),
        )
    ]


def _share(trend: t.Mapping[str, t.Any]) -> str:
    share = trend.get("rise_share")
    return "n/a" if share is None else f"{100 * share:+.1f}%"


def soak_lines(
    reports: t.Mapping[str, Report], folder: str, *, plot: bool = True, plots_href: str = ""
) -> list[str]:
    """The soak section: each figure's mean and rise, and the plot in `folder` (drawn anew
    with `plot`), linked as `plots_href` + its name (the path from the page to `folder`)."""
    lines = ["## Soak (soak)", ""]
    for file, report in reports.items():
        if report.get("error"):
            lines += [f"`{file}`: error: {report['error']}", ""]
            continue
        lines += [
            f"`{file}`: the live equi case ({report['window_seconds']:g} s window) fed "
            f"{report['rate_per_stream']:g} rows/s per stream for {report['duration_s']:g} s; "
            f"{report['batches']} batches, batch p50/p99 {report['batch_p50_ms']}/"
            f"{report['batch_p99_ms']} ms, latency p50/p99 {report['latency_p50_s']}/"
            f"{report['latency_p99_s']} s, backlog at the end {report['backlog_at_end_s']} s. "
            "A figure is flat when its least-squares rise after the first fifth of the run is "
            "within 10 % of its mean or within two standard errors.",
            "",
            "| figure | mean | rise over the run | per hour | flat |",
            "|---|---|---|---|---|",
        ]
        for name, trend in report["trends"].items():
            if trend.get("flat") is None:
                continue
            lines.append(
                f"| {LABELS.get(name, name)} | {trend['mean']} | {trend['rise']} ± "
                f"{trend['rise_stderr']} ({_share(trend)}) | {trend['per_hour']} | "
                f"{'yes' if trend['flat'] else '**no**'} |"
            )
        lines += [
            "",
            "Spark's query logs grow with every input file read: its file source keeps each "
            f"file's entry in its log for good ([apache/spark#28363]({SPARK_SOURCE_LOG})); "
            "that part is Spark's, the same for its own joins, and absent with Kafka.",
            "",
        ]
        drawn = soak_plot(report, folder) if plot else os.path.exists(f"{folder}/{SOAK_PLOT}")
        if drawn:
            lines += [f"![{SOAK_PLOT}]({plots_href}{SOAK_PLOT})", ""]
    return lines


def soak_plot(report: Report, folder: str) -> bool:
    """Write `SOAK_PLOT`: memory, batch time and latency, state, checkpoint over the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples, heap, batches = report["samples"], report["live_heap"], report["batches_seen"]
    if not samples or not batches:
        return False
    fig, axes = plt.subplots(4, 1, figsize=(9, 11), sharex=True)
    minutes = [s["t"] / 60 for s in samples]
    for name in ("python_rss_mb", "jvm_rss_mb"):
        axes[0].plot(minutes, [s.get(name) for s in samples], label=LABELS[name])
    axes[0].plot(
        [h["t"] / 60 for h in heap], [h["heap_mb"] for h in heap], "o-", label=LABELS["heap_mb"]
    )
    axes[0].set_ylabel("MB")
    at = [b["t"] / 60 for b in batches]
    for name, key in (("batch time", "seconds"), ("latency", "latency")):
        axes[1].plot(at, [b[key] for b in batches], ".", markersize=2, alpha=0.5, label=name)
    axes[1].set_ylabel("s")
    axes[2].plot(at, [b["state_mb"] for b in batches], label=LABELS["state_mb"])
    axes[2].set_ylabel("MB")
    for name in ("ckpt_spark_mb", "ckpt_manifests_mb", "ckpt_state_mb", "ckpt_metrics_mb"):
        axes[3].plot(minutes, [s.get(name) for s in samples], label=LABELS[name])
    axes[3].set_ylabel("MB")
    axes[3].set_xlabel("minutes")
    for ax in axes:
        ax.legend(loc="upper left", fontsize=8, markerscale=1 if ax is not axes[1] else 4)
        ax.grid(alpha=0.3)
    fig.suptitle(
        f"soak: equi at {report['rate_per_stream']:g} rows/s per stream, "
        f"{report['duration_s'] / 60:g} min"
    )
    fig.tight_layout()
    fig.savefig(os.path.join(folder, SOAK_PLOT), dpi=90)
    plt.close(fig)
    return True
