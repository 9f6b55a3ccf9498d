"""The backlog workloads' section of RESULTS.md: a table per workload, a row per engine and
case, or for `long` and its kin a row per case with ours beside the peer's in each cell."""

from __future__ import annotations

import typing as t

from benchmarks.engines_floor import FLOOR
from benchmarks.report_format import Report, _agree, _fmt, commit_of, ratio_cell
from benchmarks.report_nexmark import nexmark_table
from benchmarks.report_provenance import OLD_PEER_LIMIT


def table(report: Report) -> list[str]:
    """One markdown row per engine and case of a backlog report; the ratios on our row."""
    head = (
        "| case | engine | rows | rows/s | CPU s (cores) | batch p50 / p95 / p99 ms | peak MB | "
        "state B/tuple (×raw) | results agree | ours ÷ peer |"
    )
    lines = [head, "|" + "---|" * 10]
    for c in report["cases"]:
        for engine, r in c["engines"].items():
            if r.get("error"):
                lines.append(f"| {c['case']} | {engine} | error: {r['error']} |" + " |" * 7)
                continue
            batches = " / ".join(
                _fmt(r.get(k)) for k in ("batch_p50_ms", "batch_p95_ms", "batch_p99_ms")
            )
            state = (
                f"{_fmt(r.get('state_bytes_per_tuple'))} (×{_fmt(r.get('state_to_raw'))})"
                if r.get("state_bytes_per_tuple")
                else "–"
            )
            stopped = " (stopped at its time limit)" if r.get("stopped_early") else ""
            cpu = (
                f"{_fmt(r['cpu_seconds'])} ({_fmt(r.get('cores_busy'))})"
                if r.get("cpu_seconds")
                else "–"
            )
            ratios = ratio_cell(c.get("ratios", {})) if engine == "streamjoin" else ""
            lines.append(
                f"| {c['case']} | {engine}{stopped} | {_fmt(r.get('rows'))} | "
                f"{_fmt(r.get('throughput'))} | {cpu} | {batches} | "
                f"{_fmt(r.get('peak_rss_mb'))} | {state} | {_agree(c.get('results_agree'))} | "
                f"{ratios} |"
            )
    return lines


def _window_cell(seconds: float | None) -> str:
    return "none (whole run)" if seconds is None else f"{seconds:g} s"


def _growth_cell(r: t.Mapping[str, t.Any]) -> str:
    """Batch-time growth over the run, with the medians of the first and last thirds."""
    if r.get("batch_growth") is None:
        return "–"
    thirds = f"{_fmt(r.get('first_third_p50_ms'))} → {_fmt(r.get('last_third_p50_ms'))}"
    return f"×{_fmt(r['batch_growth'])} ({thirds})"


def _long_cells(r: t.Mapping[str, t.Any] | None) -> tuple[str, str, str]:
    """One engine's rows/s, steady p50 / p99 and growth cells of the `long` table."""
    if r is None:
        return "–", "–", "–"
    if r.get("error"):
        return f"error: {r['error']}", "–", "–"
    steady = " / ".join(_fmt(r.get(k)) for k in ("steady_batch_p50_ms", "steady_batch_p99_ms"))
    return _fmt(r.get("throughput")), steady, _growth_cell(r)


def _warmup(cases: t.Sequence[dict[str, t.Any]]) -> int:
    """The warm-up batches the steady figures of `cases` skip (the workload's, if no engine
    recorded them)."""
    for c in cases:
        for r in c["engines"].values():
            if r.get("warmup_batches") is not None:
                return int(r["warmup_batches"])
    from benchmarks.workloads import LONG_WARMUP_BATCHES

    return LONG_WARMUP_BATCHES


LONG_NOTE = (
    "Many small batches against a growing state. *Steady*: the batches after the first {warmup} "
    "(JVM warm-up); *growth*: the median batch time of the last third of the steady batches over "
    "that of the first third (ms): above 1, a batch costs more as the state grows. *Spark's "
    "floor*: Spark's micro-batch loop over the same streams, read as our engine reads them, each "
    "batch's rows read once and nothing else (`benchmarks/engines_floor.py`): what a batch costs "
    "any engine that runs inside that loop, ours included. Batch times against batch number: "
    "`long_batches.png`."
)


def long_table(report: Report, suffix: str = "", floor: bool | None = None) -> list[str]:
    """The `long` workload's table, a row per case (ours · the peer's in each cell, to keep the
    page short): steady-state batch times and their growth over the run, since its question is
    how batches fare as the state grows. A column for ``spark-floor`` if `floor` (None: if a
    case ran it)."""
    if floor is None:
        floor = any(FLOOR in c["engines"] for c in report["cases"])
    extra = "Spark's floor: rows/s · steady p50 ms | " if floor else ""
    lines = [
        "| case | window | peer | rows/s: ours · peer | steady p50 / p99 ms: ours · peer | "
        f"growth: ours · peer | {extra}results agree | ours ÷ peer |",
        "|" + "---|" * (9 if floor else 8),
    ]
    for c in report["cases"]:
        others = (name for name in c["engines"] if name not in ("streamjoin", FLOOR))
        peer = next(others, None)
        theirs = c["engines"].get(peer)
        stopped = " (stopped at its time limit)" if (theirs or {}).get("stopped_early") else ""
        pairs = zip(_long_cells(c["engines"].get("streamjoin")), _long_cells(theirs), strict=True)
        cells = " | ".join(f"{a} · {b}" for a, b in pairs)
        shown = f"{peer}{stopped}" if peer else "–"
        lines.append(
            f"| {c['case']}{suffix} | {_window_cell(c.get('window_seconds'))} | {shown} | "
            f"{cells} | {_floor_cell(c['engines'].get(FLOOR)) + ' | ' if floor else ''}"
            f"{_agree(c.get('results_agree'))} | {ratio_cell(_ratios(report, c))} |"
        )
    return lines


def _floor_cell(r: t.Mapping[str, t.Any] | None) -> str:
    """Spark's micro-batch loop with a read of each batch and nothing else (``spark-floor``):
    what no engine inside the loop can go below."""
    if r is None:
        return "–"
    if r.get("error"):
        return f"error: {r['error']}"
    return f"{_fmt(r.get('throughput'))} · {_fmt(r.get('steady_batch_p50_ms'))}"


def _ratios(report: Report, case: t.Mapping[str, t.Any]) -> dict[str, float | None]:
    """A case's ratios to show: on a cluster, not its rows per CPU second (the CPU counted is
    the driver's alone)."""
    ratios = dict(case.get("ratios", {}))
    ratios.pop("floor_throughput", None)  # (not ours: `_floor_cell` and the targets show it)
    if report.get("cluster"):
        ratios.pop("rows_per_cpu_second", None)
    return ratios


COMPACT = ("long", "long-cluster", "window-growth")
"""Workloads whose table has a row per case, ours · the peer's in each cell."""


def workload_lines(reports: dict[str, Report]) -> list[str]:
    """A heading, a line of context and the table of each backlog workload; consecutive
    workloads with the same table share one (a line of context each)."""
    lines: list[str] = []
    runs: list[list[str]] = []
    for name in [n for n in reports if n != "nexmark-warm"]:  # (in nexmark's table)
        alone = (*COMPACT, "nexmark")
        if name in COMPACT and runs and runs[-1][0] in COMPACT:
            runs[-1].append(name)  # (its rows under the first's, in its table)
        elif runs and name not in alone and runs[-1][-1] not in alone:
            runs[-1].append(name)
        else:
            runs.append([name])
    for names in runs:
        context = [_context(n, reports[n]) for n in names]
        first = reports[names[0]]
        if names[0] in COMPACT:
            # (window-growth as long's compact table: a row per case, ours · the peer's)
            floor = any(FLOOR in c["engines"] for c in first["cases"])
            body = long_table(first, floor=floor)
            for n in names[1:]:  # (their rows in the first's columns)
                suffix = " on a cluster" if reports[n].get("cluster") else ""
                body += long_table(reports[n], suffix, floor)[2:]
            if names[0] == "long":
                note = LONG_NOTE.format(warmup=_warmup(first["cases"]))
                context = [f"{context[0]} {note}", *context[1:]]
        elif names[0] == "nexmark":
            warm = reports.get("nexmark-warm")
            note, _, *body = nexmark_table(first, _fmt, warm)
            if warm is not None:
                note += f" *Warm*: `--warm`'s runs, commit {commit_of(warm)}."
            context = [f"{context[0]} {note}"]
        else:
            body = table(first)
            for n in names[1:]:
                body += table(reports[n])[2:]  # (the same columns: rows only)
        lines += [f"### {', '.join(names)}", "", " ".join(context), "", *body, ""]
    return lines


def _context(name: str, report: Report) -> str:
    limit = report.get("peer_time_limit_s", OLD_PEER_LIMIT)
    cluster = f" Every engine on a cluster: {report['cluster']}." if report.get("cluster") else ""
    return (
        f"{name}: {report.get('size', 'full')} size; peer time limit "
        f"{f'{limit:g} s' if limit else 'none'}; commit {commit_of(report)}.{cluster}"
    )
