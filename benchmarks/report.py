"""RESULTS.md and its plots from the JSON reports of full runs.

``python -m benchmarks.report`` reads ``benchmarks/results/<workload>.json`` (written by
``streamjoin bench WORKLOAD --out benchmarks/results/WORKLOAD.json``), checks each target of the
benchmark issue against the numbers, and writes ``benchmarks/RESULTS.md`` with two plots beside
it: throughput against window size, and the distribution of micro-batch times. The ``--rate``
and ``multiquery`` reports (``rate-*.json``, ``multiquery-*.json``) get a section each.
"""

from __future__ import annotations

import json
import os
import sys
import typing as t

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
ORDER = ("equi", "band", "theta", "window-growth", "tpch", "nexmark")

Report = dict[str, t.Any]


def load(folder: str = RESULTS) -> dict[str, Report]:
    """The reports present, by workload."""
    reports = {}
    for name in ORDER:
        path = os.path.join(folder, f"{name}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                reports[name] = json.load(f)
    return reports


def load_rate(folder: str = RESULTS) -> dict[str, Report]:
    """The ``--rate`` mode reports present (``rate-*.json``), by file name."""
    if not os.path.isdir(folder):
        return {}
    reports = {}
    for name in sorted(os.listdir(folder)):
        if name.startswith("rate-") and name.endswith(".json"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                reports[name] = json.load(f)
    order = sorted(reports, key=lambda n: (reports[n]["workload"], reports[n]["rate_per_stream"]))
    return {n: reports[n] for n in order}


_SIZE_FLAG = {"quick": " --quick", "tiny": " --tiny"}


def load_multiquery(folder: str = RESULTS) -> dict[str, Report]:
    """The ``multiquery`` reports present (``multiquery-<size>.json``), by file name."""
    if not os.path.isdir(folder):
        return {}
    reports = {}
    for name in sorted(os.listdir(folder)):
        if name.startswith("multiquery-") and name.endswith(".json"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                reports[name] = json.load(f)
    return reports


def multiquery_lines(reports: dict[str, Report]) -> list[str]:
    """The section of the ``multiquery`` benchmark: a row per query count and mode."""
    lines = [
        "## Many queries (multiquery)",
        "",
        "N three-relation joins over TPC-H streams, from four templates sharing sub-joins, run "
        "as CLASH's three baselines: each query *alone* in its own job (times summed), one job "
        "with *simple* sharing (greedy orders, nothing shared between queries), and the "
        "*global* plan (the ILP's orders, shared probe prefixes, the MIR stores the ILP picks, "
        "and one unfiltered run of each join core that queries differing only in selections "
        "filter, with each store partitioned on the ILP's attribute; deltas this small are "
        "broadcast); where present, *base* is the global plan without MIR stores, *broadcast* "
        "without partitioned stores, and *routed* with every step that carries its store's "
        "attribute sent to that one partition (`--modes ...,base,broadcast,routed`). State "
        "bytes: stream stores and MIR stores. Rows/s: the backlog's "
        "input rows over the mode's wall "
        "time; CPU s: of the mode's process and its JVM, steadier on a shared machine. "
        "Predicted probe load: CLASH's model at the engine's start statistics (global / "
        "unshared / each query planned alone). See `benchmarks/multiquery.py`. Reproduce with:",
        "",
        "```",
        *(
            f"python -m benchmarks.multiquery{_SIZE_FLAG.get(r['size'], '')} "
            f"--queries {','.join(str(x['queries']) for x in r['runs'])}"
            for r in reports.values()
        ),
        "```",
        "",
        "| run | queries | mode | seconds (CPU s) | rows/s | global ÷ this | batch p50 / p99 ms | "
        "peak MB | state bytes | results | predicted load |",
        "|" + "---|" * 11,
    ]
    for file, report in reports.items():
        load = report.get("load_average", {}).get("before", [])
        run = f"`{file}` ({report['size']}, load {_fmt(load[0]) if load else '?'})"
        for r in report["runs"]:
            check = "exact" if r["exact"] else "agree" if r["results_agree"] else "**DIFFER**"
            p = r["probe_load"].get("default", {})
            predicted = " / ".join(_fmt(p.get(k)) for k in ("global", "unshared", "alone"))
            best = r["modes"].get("global", {}).get("throughput")
            for mode, f in r["modes"].items():
                if f.get("error"):
                    lines.append(f"| {run} | {r['queries']} | {mode} | error: {f['error']} |")
                    continue
                gap = round(best / f["throughput"], 2) if best and f.get("throughput") else None
                batches = f"{_fmt(f.get('batch_p50_ms'))} / {_fmt(f.get('batch_p99_ms'))}"
                lines.append(
                    f"| {run} | {r['queries']} | {mode} | {_fmt(f['seconds'])} "
                    f"({_fmt(f.get('cpu_seconds'))}) | "
                    f"{_fmt(f['throughput'])} | ×{_fmt(gap)} | {batches} | "
                    f"{_fmt(f.get('peak_rss_mb'))} | {_fmt(f.get('state_bytes'))} | {check} | "
                    f"{predicted if mode == 'global' else ''} |"
                )
        met = report["targets"].get("at_10_queries_ge_2_5")
        widens = report["targets"].get("gap_widens")
        lines.append(
            f"| {run} | target | global ≥ 2.5× alone at 10 queries: "
            f"{ {True: 'met', False: '**not met**', None: '–'}[met] }; gap widens with N: "
            f"{ {True: 'yes', False: '**no**', None: '–'}[widens] } |"
        )
    return [*lines, ""]


def rate_table(reports: dict[str, Report]) -> list[str]:
    """One markdown row per engine and case of every ``--rate`` report."""
    lines = [
        "| run | case | rows/s per stream | engine | keeps up | fed / processed rows/s | "
        "latency p50 / p95 / p99 / max s | growth | backlog at end s | batch p50 / p99 ms | "
        "results agree |",
        "|" + "---|" * 11,
    ]
    for file, report in reports.items():
        run = f"`{file}` ({report['size']}, {report['duration_s']:g} s)"
        for c in report["cases"]:
            for engine, r in c["engines"].items():
                if r.get("error"):
                    lines.append(f"| {run} | {c['case']} | | {engine} | error: {r['error']} |")
                    continue
                latency = " / ".join(
                    _fmt(r.get(f"latency_{p}_s")) for p in ("p50", "p95", "p99", "max")
                )
                batches = " / ".join(_fmt(r.get(k)) for k in ("batch_p50_ms", "batch_p99_ms"))
                agree = {True: "yes", False: "NO", None: "unchecked"}[c["results_agree"]]
                lines.append(
                    f"| {run} | {c['case']} | {_fmt(report['rate_per_stream'])} | {engine} | "
                    f"{'yes' if r['keeps_up'] else '**no**'} | {_fmt(r.get('input_rate'))} / "
                    f"{_fmt(r.get('processed_rate'))} | {latency} | "
                    f"×{_fmt(r.get('latency_growth'))} | {_fmt(r.get('backlog_at_end_s'))} | "
                    f"{batches} | {agree} |"
                )
    return lines


def _case(reports: dict[str, Report], workload: str, case: str) -> dict[str, t.Any] | None:
    for c in reports.get(workload, {}).get("cases", []):
        if c["case"] == case:
            return t.cast("dict[str, t.Any]", c)
    return None


def _ours(case: dict[str, t.Any] | None, figure: str = "throughput") -> float | None:
    if case is None:
        return None
    value = case["engines"].get("streamjoin", {}).get(figure)
    return float(value) if value is not None else None


def _peer(case: dict[str, t.Any] | None, figure: str = "throughput") -> float | None:
    if case is None:
        return None
    for name, r in case["engines"].items():
        if name != "streamjoin" and r.get(figure) is not None:
            return float(r[figure])
    return None


def targets(reports: dict[str, Report]) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?) for every target; None when its run is missing."""
    rows: list[tuple[str, str, bool | None]] = []
    equi = _case(reports, "equi", "equi")
    ratio = equi["ratios"].get("throughput") if equi else None
    p99 = equi["ratios"].get("batch_p99") if equi else None
    rows.append(
        (
            "equi: throughput ≥ 2× Spark's native join, p99 batch time no worse",
            f"throughput ×{ratio}, p99 ×{p99}",
            None if ratio is None else ratio >= 2 and p99 is not None and p99 <= 1,
        )
    )
    for kind in ("band", "theta"):
        c = _case(reports, kind, kind)
        r = c["ratios"].get("throughput") if c else None
        rows.append(
            (
                f"{kind}: throughput ≥ 30× the foreachBatch join",
                f"×{r}",
                None if r is None else r >= 30,
            )
        )
    band, eq = _ours(_case(reports, "band", "band")), _ours(equi)
    rows.append(
        (
            "band: our band throughput ≥ 0.5× our equi throughput",
            f"{band} vs {eq} rows/s" + (f" (×{band / eq:.2f})" if band and eq else ""),
            None if not (band and eq) else band >= 0.5 * eq,
        )
    )
    for kind in ("equi", "band"):
        small = _ours(_case(reports, "window-growth", f"{kind}-10s"))
        large = _ours(_case(reports, "window-growth", f"{kind}-100s"))
        p_small = _peer(_case(reports, "window-growth", f"{kind}-10s"))
        p_large = _peer(_case(reports, "window-growth", f"{kind}-100s"))
        fall = small / large if small and large else None
        peer_fall = p_small / p_large if p_small and p_large else None
        rows.append(
            (
                f"window-growth ({kind}): our throughput falls < 2× from a 10 s to a 100 s window",
                f"falls ×{fall:.2f}"
                if fall
                else "missing" + (f" (peer ×{peer_fall:.2f})" if peer_fall else ""),
                None if fall is None else fall < 2,
            )
        )
    worst = None
    for report in reports.values():
        for c in report["cases"]:
            v = c["engines"].get("streamjoin", {}).get("state_to_raw")
            if v is not None:
                worst = v if worst is None else max(worst, v)
    rows.append(
        (
            "state ≤ 2× the raw bytes of the live tuples",
            f"worst ×{worst}",
            None if worst is None else worst <= 2,
        )
    )
    return rows


OLD_PEER_LIMIT = 180.0
"""The full-size peer time limit of the reports written before they recorded theirs."""


def jvm_line(reports: t.Mapping[str, Report]) -> str:
    """Which ``-XX`` flags each engine's driver JVM ran with, over every report."""
    flags: dict[str, set[str]] = {}
    for report in reports.values():
        for case in report["cases"]:
            for name, run in case["engines"].items():
                flags.setdefault(name, set()).add(run.get("jvm_flags") or "")
    parts = []
    for name, seen in flags.items():
        shown = " / ".join(
            f"`{f}`" if f else "the JVM's defaults (or not recorded)" for f in sorted(seen)
        )
        parts.append(f"{name} {shown}")
    return (
        "Driver JVM flags: "
        + "; ".join(parts)
        + " (each peer runs with the settings it is fastest with: "
        "`benchmarks.engines.PEER_CONF`)."
    )


def settings_line(reports: t.Mapping[str, Report]) -> str:
    """The Spark settings each engine ran with over streamjoin's local defaults, and in which
    reports (reports from before settings were recorded name none)."""
    seen: dict[tuple[str, str], list[str]] = {}
    for key, report in reports.items():
        for case in report["cases"]:
            for name, run in case["engines"].items():
                for k, v in sorted((run.get("settings") or {}).items()):
                    where = seen.setdefault((name, f"{k}={v}"), [])
                    if key not in where:
                        where.append(key)
    if not seen:
        return "Spark settings: every engine ran with streamjoin's local defaults."
    parts = [f"{name} `{kv}` ({', '.join(where)})" for (name, kv), where in seen.items()]
    return "Spark settings over streamjoin's local defaults: " + "; ".join(parts) + "."


def _peer_flag(report: Report) -> str:
    """The ``--peer-limit`` that reproduces `report` (none for the size's default)."""
    from benchmarks.harness import peer_time_limit

    limit = report.get("peer_time_limit_s", OLD_PEER_LIMIT)
    if limit == peer_time_limit(report.get("size", "full")):
        return ""
    return f" --peer-limit {limit or 0:g}"


def _fmt(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.1f}" if v >= 100 else f"{v:g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(reports: dict[str, Report]) -> list[str]:
    """One markdown row per engine and case."""
    head = (
        "| workload | case | engine | rows | rows/s | ratio | CPU s (cores) | "
        "batch p50 / p95 / p99 ms | peak MB | state B/tuple (×raw) | results agree |"
    )
    lines = [head, "|" + "---|" * 11]
    for name, report in reports.items():
        for c in report["cases"]:
            for engine, r in c["engines"].items():
                ratio = c["ratios"].get("throughput") if engine == "streamjoin" else None
                if r.get("error"):
                    lines.append(f"| {name} | {c['case']} | {engine} | error: {r['error']} |")
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
                lines.append(
                    f"| {name} | {c['case']} | {engine}{stopped} | {_fmt(r.get('rows'))} | "
                    f"{_fmt(r.get('throughput'))} | {_fmt(ratio)} | {cpu} | {batches} | "
                    f"{_fmt(r.get('peak_rss_mb'))} | {state} | "
                    f"{ {True: 'yes', False: 'NO', None: 'unchecked'}[c['results_agree']] } |"
                )
    return lines


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
            for engine in {e for c in cases for e in c["engines"]}:
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
    return written


def render(
    reports: dict[str, Report],
    notes: str = "",
    rate: dict[str, Report] | None = None,
    multiquery: dict[str, Report] | None = None,
    *,
    plot: bool = True,
) -> str:
    """The text of RESULTS.md; without `plot` the plots already on disk are linked as they are."""
    if not reports:
        return "# Benchmark results\n\nNo full run recorded yet.\n"
    machine = next(iter(reports.values()))["machine"]
    lines = [
        "# Benchmark results",
        "",
        "Latest full runs, one per workload, each engine in its own process on the same "
        "Parquet backlog (`maxFilesPerTrigger = 1`). Reproduce with:",
        "",
        "```",
        *(
            f"streamjoin bench {name}{_peer_flag(r)} --out benchmarks/results/{name}.json"
            for name, r in reports.items()
        ),
        "python -m benchmarks.report",
        "```",
        "",
        f"Machine: {machine['cores']} cores, {machine['memory_gib']} GiB, {machine['cpu']}; "
        f"Python {machine['python']}, PySpark {machine['pyspark']}, {machine['java']}; "
        "`local[2]`, 2 shuffle partitions.",
        "",
        jvm_line(reports),
        settings_line(reports),
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for name, numbers, met in targets(reports):
        verdict = "–" if met is None else "yes" if met else "**no**"
        lines.append(f"| {name} | {numbers} | {verdict} |")
    lines += [
        "",
        "## All figures",
        "",
        *table(reports),
        "",
        "A peer *stopped at its time limit* is measured on the batches it finished, its first "
        "ones with the least kept state (a figure that favours it), and its result cannot be "
        "checked (*unchecked*); a peer run to the end is measured on the whole backlog.",
        "",
    ]
    kept = [p for p in ("window_growth.png", "batch_times.png") if os.path.exists(f"{HERE}/{p}")]
    for png in plots(reports) if plot else kept:
        lines += [f"![{png}]({png})", ""]
    if rate:
        lines += [
            "## Live rate mode",
            "",
            "Each engine fed a live source at a fixed rate (one Parquet file per stream every "
            "tick, event times at wall-clock time), with a processing-time trigger; latency is "
            "the commit time of a row's batch minus the time its file appeared; *keeps up* and "
            "the other figures are defined in `benchmarks/rate.py`. Reproduce with:",
            "",
            "```",
            *(
                f"streamjoin bench {r['workload']} --rate {r['rate_per_stream']:g}"
                f"{_SIZE_FLAG.get(r['size'], '')} --duration {r['duration_s']:g} "
                f"--out benchmarks/results/{file}"
                for file, r in rate.items()
            ),
            "```",
            "",
            *rate_table(rate),
            "",
        ]
    if multiquery:
        lines += multiquery_lines(multiquery)
    if notes:
        lines += [notes.rstrip(), ""]
    return "\n".join(lines)


def write(folder: str = RESULTS, *, plot: bool = True) -> str:
    """Regenerate RESULTS.md (and, with `plot`, its plots) from the reports in `folder`."""
    notes_path = os.path.join(HERE, "results", "NOTES.md")
    notes = ""
    if os.path.exists(notes_path):
        with open(notes_path, encoding="utf-8") as f:
            notes = f.read()
    text = render(load(folder), notes, load_rate(folder), load_multiquery(folder), plot=plot)
    with open(os.path.join(HERE, "RESULTS.md"), "w", encoding="utf-8") as f:
        f.write(text)
    return text


def main(argv: list[str]) -> int:
    print(write(argv[0] if argv else RESULTS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
