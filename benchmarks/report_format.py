"""What every section of RESULTS.md shares: a figure, a pass or fail and a ratio as a table
cell shows them, the commit a report ran on, and a case of a report found by name."""

from __future__ import annotations

import typing as t

Report = dict[str, t.Any]

NOT_RECORDED = "not recorded"


def _fmt(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.1f}" if v >= 100 else f"{v:g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _agree(value: bool | None) -> str:
    return {True: "yes", False: "**NO**", None: "unchecked"}[value]


# Ratio names as shown, and whether a ratio above 1 is a gain for us (ours ÷ the peer's).
_RATIOS: dict[str, tuple[str, bool]] = {
    "throughput": ("rows/s", True),
    "batch_p99": ("batch p99", False),
    "rows_per_cpu_second": ("rows/CPU s", True),
    "steady_batch_p99": ("steady p99", False),
    "processed_rate": ("processed", True),
    "latency_p50_s": ("latency p50", False),
    "latency_p99_s": ("latency p99", False),
    "batch_p99_ms": ("batch p99", False),
}


def ratio_cell(ratios: t.Mapping[str, float | None]) -> str:
    """Every ratio of a case, ours ÷ the peer's, with each loss in bold."""
    parts = []
    for key, value in ratios.items():
        label, higher_wins = _RATIOS.get(key, (key, True))
        if value is None:
            parts.append(f"{label} –")
            continue
        lost = value < 1 if higher_wins else value > 1
        shown = f"×{_fmt(value)}"
        parts.append(f"{label} **{shown}**" if lost else f"{label} {shown}")
    return " · ".join(parts) if parts else "–"


def _case(reports: dict[str, Report], workload: str, case: str) -> dict[str, t.Any] | None:
    for c in reports.get(workload, {}).get("cases", []):
        if c["case"] == case:
            return t.cast("dict[str, t.Any]", c)
    return None


def commit_of(report: Report) -> str:
    """The commit a report ran on, or `NOT_RECORDED` (reports need not record one)."""
    value = report.get("commit") or report.get("git_commit")
    return str(value) if value else NOT_RECORDED
