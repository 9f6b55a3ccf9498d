"""The ``multiquery`` benchmark's section of RESULTS.md (`benchmarks.multiquery`): a row per
query count and mode."""

from __future__ import annotations

from benchmarks.report_format import Report, _fmt, commit_of

RETIRED_MODES = {
    "base": "global without MIR stores",
    "broadcast": "global without partitioned stores",
    "routed": "global with every carried step routed to one partition",
}
"""Modes of earlier versions, whose rows recorded reports may still hold: the settings they
changed are retired with the cached slices' MIR and partitioned stores."""


def multiquery_lines(reports: dict[str, Report]) -> list[str]:
    """The ``multiquery`` section: a row per query count and mode."""
    recorded = {m for report in reports.values() for r in report["runs"] for m in r["modes"]}
    retired = "".join(
        f" *{mode}* (a mode since retired): {what}."
        for mode, what in RETIRED_MODES.items()
        if mode in recorded
    )
    lines = [
        "## Many queries (multiquery)",
        "",
        "N three-relation joins over TPC-H streams. Modes (`benchmarks/multiquery.py`): *alone*, "
        "each query in its own job (sums); *simple*, one job, nothing shared; *global*, the ILP's "
        f"shared plan.{retired} Predicted load: CLASH's model (global / unshared / alone).",
        "",
    ]
    for file, report in reports.items():
        load = report.get("load_average", {}).get("before", [])
        lines += [
            f"`{file}`: {report['size']} size, load {_fmt(load[0]) if load else '?'} before; "
            f"commit {commit_of(report)}.",
            "",
            "| queries | mode | seconds (CPU s) | rows/s | global ÷ this | batch p50 / p99 ms | "
            "peak MB | state bytes | results | predicted load |",
            "|" + "---|" * 10,
        ]
        for r in report["runs"]:
            check = "exact" if r["exact"] else "agree" if r["results_agree"] else "**DIFFER**"
            p = r["probe_load"].get("default", {})
            predicted = " / ".join(_fmt(p.get(k)) for k in ("global", "unshared", "alone"))
            best = r["modes"].get("global", {}).get("throughput")
            for mode, f in r["modes"].items():
                if f.get("error"):
                    lines.append(f"| {r['queries']} | {mode} | error: {f['error']} |" + " |" * 7)
                    continue
                gap = round(best / f["throughput"], 2) if best and f.get("throughput") else None
                shown = "–" if gap is None else f"**×{_fmt(gap)}**" if gap < 1 else f"×{_fmt(gap)}"
                batches = f"{_fmt(f.get('batch_p50_ms'))} / {_fmt(f.get('batch_p99_ms'))}"
                lines.append(
                    f"| {r['queries']} | {mode} | {_fmt(f['seconds'])} "
                    f"({_fmt(f.get('cpu_seconds'))}) | {_fmt(f['throughput'])} | {shown} | "
                    f"{batches} | {_fmt(f.get('peak_rss_mb'))} | {_fmt(f.get('state_bytes'))} | "
                    f"{check} | {predicted if mode == 'global' else ''} |"
                )
        lines.append("")
    return lines
