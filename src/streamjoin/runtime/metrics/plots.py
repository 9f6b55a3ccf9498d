"""Plots of a history of batch figures (matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

import typing as t

from streamjoin.errors import StreamJoinError

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.figure import Figure

    from streamjoin.runtime.metrics.record import BatchFigures


def plot_history(records: Sequence[BatchFigures], title: str = "streamjoin") -> Figure:
    """Four panels against the batch id: rows in and out per second of batch time, latency and
    the watermark's lag, batch time stacked by phase, and state rows per stream.

    Raises:
        StreamJoinError: matplotlib is not installed.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        msg = "plots need matplotlib: pip install matplotlib"
        raise StreamJoinError(msg) from None
    fig = Figure(figsize=(10, 6.5))
    (rates, delays), (phases, state) = fig.subplots(2, 2, sharex=True)
    batches = [r.batch for r in records]

    def per_second(r: BatchFigures, values: dict[str, int]) -> float:
        return sum(values.values()) / r.seconds if r.seconds else 0.0

    rates.plot(batches, [per_second(r, r.rows_in) for r in records], label="rows in / s")
    rates.plot(batches, [per_second(r, r.out) for r in records], label="rows out / s")
    rates.set_title("throughput (per second of batch time)", fontsize=9)
    for name, values in (
        ("latency", [r.latency for r in records]),
        ("watermark lag", [r.watermark_lag for r in records]),
    ):
        delays.plot(batches, [float("nan") if v is None else v for v in values], label=name)
    delays.set_title("seconds behind the wall clock", fontsize=9)
    names = sorted({p for r in records for p in r.phases})
    stack = [[r.phases.get(p, 0.0) for r in records] for p in names]
    if stack:
        phases.stackplot(batches, stack, labels=names)
    phases.set_title("batch time by phase (s)", fontsize=9)
    for stream in sorted({s for r in records for s in r.state_rows}):
        state.plot(batches, [r.state_rows.get(stream, 0) for r in records], label=stream)
    state.set_title("state rows", fontsize=9)
    for ax in (rates, delays, phases, state):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in (phases, state):
        ax.set_xlabel("batch", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
