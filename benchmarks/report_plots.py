"""The plots beside RESULTS.md's backlog tables: throughput against window size, the
distribution of micro-batch times, `long`'s batch time against batch number, and streamjoin's
own batch figures."""

from __future__ import annotations

import os

from benchmarks.report_backlog import _warmup
from benchmarks.report_format import Report, _case
from benchmarks.report_history import history_plot

HERE = os.path.dirname(os.path.abspath(__file__))

LONG_PLOT = "long_batches.png"


def long_plot(report: Report, folder: str = HERE) -> str | None:
    """Batch time against batch number, a panel per case and a line per engine, to show whether
    batches slow down as the state grows; the file name, None when no engine has batch times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")
    cases = [c for c in report["cases"] if any(r.get("batch_ms") for r in c["engines"].values())]
    if not cases:
        return None
    cols = min(3, len(cases))
    rows = -(-len(cases) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, c in zip(axes.flat, cases, strict=False):
        for engine, r in c["engines"].items():
            times = [v / 1000 for v in r.get("batch_ms") or []]
            if times:
                ax.plot(range(1, len(times) + 1), times, linewidth=1, label=engine)
        ax.axvline(_warmup([c]) + 0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(axis="y", which="both", labelsize=7)
        ax.set_title(c["case"], fontsize=9)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(cases) :]:
        ax.set_visible(False)
    fig.supxlabel("batch number (dotted: end of warm-up)")
    fig.supylabel("micro-batch time (s)")
    fig.tight_layout()
    fig.savefig(os.path.join(folder, LONG_PLOT), dpi=110)
    plt.close(fig)
    return LONG_PLOT


def plots(reports: dict[str, Report], folder: str = HERE) -> list[str]:
    """Write the PNG plots; return their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    growth = reports.get("window-growth")
    if growth:
        fig, ax = plt.subplots(figsize=(6, 4))
        for kind in ("equi", "band"):
            cases = [c for c in growth["cases"] if c["case"].startswith(f"{kind}-")]
            cases.sort(key=lambda c: c["window_seconds"])
            for engine in sorted({e for c in cases for e in c["engines"]}):
                xs = [c["window_seconds"] for c in cases if engine in c["engines"]]
                ys = [
                    c["engines"][engine].get("throughput") or 0
                    for c in cases
                    if engine in c["engines"]
                ]
                ax.plot(xs, ys, marker="o", label=f"{kind}: {engine}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("window half-width (s)")
        ax.set_ylabel("input rows / s")
        ax.set_title("Throughput against window size")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(folder, "window_growth.png"), dpi=110)
        plt.close(fig)
        written.append("window_growth.png")
    series = []
    for name in ("equi", "band", "theta"):
        c = _case(reports, name, name)
        if c:
            for engine, r in c["engines"].items():
                if r.get("batch_ms"):
                    series.append((f"{name}\n{engine}", [v / 1000 for v in r["batch_ms"]]))
    if series:
        fig, ax = plt.subplots(figsize=(max(6, len(series) * 1.2), 4))
        ax.boxplot([s for _, s in series], whis=(1, 99))
        ax.set_xticks(range(1, len(series) + 1), [n for n, _ in series], fontsize=7)
        ax.set_ylabel("micro-batch time (s)")
        ax.set_yscale("log")
        ax.set_title("Micro-batch times (whiskers: p1-p99)")
        fig.tight_layout()
        fig.savefig(os.path.join(folder, "batch_times.png"), dpi=110)
        plt.close(fig)
        written.append("batch_times.png")
    long = long_plot(reports["long"], folder) if "long" in reports else None
    own = history_plot(reports, folder)
    return [*written, *(p for p in (long, own) if p)]
