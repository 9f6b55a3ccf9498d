"""The report's plot of streamjoin's own batch figures: the records its checkpoint kept
(`streamjoin.runtime.metrics`), drawn by the function that draws `Serving.plot`."""

from __future__ import annotations

import os
import typing as t

HISTORY_PLOT = "streamjoin_batches.png"

Report = dict[str, t.Any]


def history_case(reports: dict[str, Report]) -> tuple[str, list[dict[str, t.Any]]] | None:
    """The first case, in the reports' order, whose streamjoin run kept its batches' figures:
    its name (``workload/case``) and the records."""
    for workload, report in reports.items():
        for case in report.get("cases", []):
            history = case.get("engines", {}).get("streamjoin", {}).get("history")
            if history:
                return f"{workload}/{case['case']}", history
    return None


def history_plot(reports: dict[str, Report], folder: str) -> str | None:
    """Write `HISTORY_PLOT` for `history_case`; its file name, or None when no run kept any."""
    found = history_case(reports)
    if found is None:
        return None
    from streamjoin.runtime.metrics.plots import plot_history
    from streamjoin.runtime.metrics.record import BatchFigures

    name, history = found
    figure = plot_history([BatchFigures.of(r) for r in history], f"streamjoin on {name}")
    figure.savefig(os.path.join(folder, HISTORY_PLOT), dpi=100)
    return HISTORY_PLOT
