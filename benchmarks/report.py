"""RESULTS.md and its plots from the JSON reports in ``benchmarks/results/``.

``python -m benchmarks.report`` reads the backlog reports ``<workload>.json`` (written by
``streamjoin bench WORKLOAD --out benchmarks/results/WORKLOAD.json``), the ``--rate`` reports
(``rate-*.json``), the ``multiquery`` reports (``multiquery-*.json``) and the partitioning and
ILP reports (``skew*.json``, ``fluctuating.json``, ``memory.json``, ``ilp-scaling.json``). It
checks each target of the benchmark issues against the numbers and writes
``benchmarks/RESULTS.md``: the machine, the commit, the commands, the targets, one table per
workload with every ratio, and the plots beside it (throughput against window size, the
distribution of micro-batch times, and, for ``long``, batch time against batch number). It needs
no Spark.

RESULTS.md holds results only; the log of measurements and trials is ``docs/dev-log.md``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import typing as t

from benchmarks.maxrate import maxrate_lines
from benchmarks.report_history import HISTORY_PLOT, history_plot
from benchmarks.report_nexmark import nexmark_table, nexmark_target
from benchmarks.report_overload import elastic_lines, overload_lines, overload_targets
from benchmarks.report_soak import soak_lines, soak_targets

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
ORDER = (
    "long",
    "long-cluster",
    "equi",
    "band",
    "theta",
    "outer",
    "window-growth",
    "tpch",
    "nexmark",
)
EXTRA = ("skew-full", "skew", "fluctuating", "memory", "ilp-scaling", "metrics-overhead")
"""The partitioning and ILP reports, by file name (without ``.json``)."""

Report = dict[str, t.Any]

NOT_RECORDED = "not recorded"


def _read(path: str) -> Report:
    with open(path, encoding="utf-8") as f:
        report: Report = json.load(f)
    return report


def load(folder: str = RESULTS) -> dict[str, Report]:
    """The backlog reports present, by workload."""
    paths = {name: os.path.join(folder, f"{name}.json") for name in ORDER}
    return {name: _read(p) for name, p in paths.items() if os.path.exists(p)}


def _engines_flag(report: Report) -> str:
    """``--engines …`` where a report ran fewer engines than its workload has (else nothing)."""
    ran = sorted({e for c in report.get("cases", []) for e in c.get("engines", {})})
    return f" --engines {','.join(ran)}" if ran and len(ran) < 2 else ""


def _load_prefixed(folder: str, prefix: str) -> dict[str, Report]:
    if not os.path.isdir(folder):
        return {}
    names = sorted(n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".json"))
    return {n: _read(os.path.join(folder, n)) for n in names}


def load_rate(folder: str = RESULTS) -> dict[str, Report]:
    """The ``--rate`` mode reports present (``rate-*.json``), by file name, by rate."""
    reports = _load_prefixed(folder, "rate-")
    order = sorted(reports, key=lambda n: (reports[n]["workload"], reports[n]["rate_per_stream"]))
    return {n: reports[n] for n in order}


def load_multiquery(folder: str = RESULTS) -> dict[str, Report]:
    """The ``multiquery`` reports present (``multiquery-<size>.json``), by file name."""
    return _load_prefixed(folder, "multiquery-")


def load_extra(folder: str = RESULTS) -> dict[str, Report]:
    """The partitioning and ILP reports present (`EXTRA`), by name."""
    paths = {name: os.path.join(folder, f"{name}.json") for name in EXTRA}
    return {name: _read(p) for name, p in paths.items() if os.path.exists(p)}


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


def _verdict(met: bool | None) -> str:
    return "–" if met is None else "yes" if met else "**no**"


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


def _steady_ratio(case: dict[str, t.Any] | None) -> float | None:
    """Our steady batch p50 over the peer's, in a `long` case."""
    ours, theirs = _ours(case, "steady_batch_p50_ms"), _peer(case, "steady_batch_p50_ms")
    return round(ours / theirs, 2) if ours and theirs else None


def live_targets(
    rate: t.Mapping[str, Report], maxrate: t.Mapping[str, Report]
) -> list[tuple[str, str, bool | None]]:
    """The live mode's target: our latency no worse wherever Spark's join keeps up, and a
    highest rate kept up with at least twice Spark's (equi)."""
    cases = [c for r in rate.values() if r["workload"] == "equi" for c in r["cases"]]
    kept = [c for c in cases if c["engines"].get("spark-native", {}).get("keeps_up")]
    p50 = [c["ratios"].get("latency_p50_s") for c in kept]
    p99 = [c["ratios"].get("latency_p99_s") for c in kept]
    found = [c["ratio"] for r in maxrate.values() if r["workload"] == "equi" for c in r["cases"]]
    if not kept and not found:
        return []
    ok = all(x is not None and x <= 1 for x in p50 + p99) and bool(found) and found[0] >= 2
    return [
        (
            "live, equi: latency p50 and p99 ≤ Spark's at every rate it keeps up at; highest "
            "rate kept up with ≥ 2× Spark's",
            "p50 "
            + " / ".join(f"×{x}" for x in p50)
            + ", p99 "
            + " / ".join(f"×{x}" for x in p99)
            + f"; highest rate ×{found[0] if found else '–'}",
            ok,
        )
    ]


def long_targets(
    reports: dict[str, Report],
    rate: t.Mapping[str, Report] | None = None,
    maxrate: t.Mapping[str, Report] | None = None,
) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?) of the `long` workload, the headline: live streams are many
    small batches against a large state."""
    rows: list[tuple[str, str, bool | None]] = []
    for window, name in (("300s", "300s"), ("3600s", "3600s"), ("full", "full history")):
        case = _case(reports, "long", f"long-equi-{window}")
        steady = _steady_ratio(case)
        ratio = case["ratios"].get("throughput") if case else None
        rows.append(
            (
                f"long, equi, {name}: steady batch p50 ≤ 0.5× and throughput ≥ 2× Spark's "
                "native join",
                f"p50 ×{steady}, throughput ×{ratio}",
                None if steady is None or ratio is None else steady <= 0.5 and ratio >= 2,
            )
        )
    small = _ours(_case(reports, "long", "long-equi-10s"), "steady_batch_p50_ms")
    large = _ours(_case(reports, "long", "long-equi-3600s"), "steady_batch_p50_ms")
    growth = round(large / small, 2) if small and large else None
    rows.append(
        (
            "long, equi: our steady batch p50 grows < 2× from a 10 s to a 1 h window",
            f"{small} → {large} ms (×{growth})",
            None if growth is None else growth < 2,
        )
    )
    rows += live_targets(rate or {}, maxrate or {})
    kinds = [_case(reports, "long", f"long-{kind}-300s") for kind in ("band", "theta")]
    r = [c["ratios"].get("throughput") if c else None for c in kinds]
    rows.append(
        (
            "long, band / theta, window 300s: throughput ≥ 30× the foreachBatch join",
            " / ".join(f"×{x}" for x in r),
            None if None in r else all(x is not None and x >= 30 for x in r),
        )
    )
    return rows


def targets(
    reports: dict[str, Report],
    rate: t.Mapping[str, Report] | None = None,
    maxrate: t.Mapping[str, Report] | None = None,
) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?) for every target of the workloads, `long` first; None when
    its run is missing."""
    rows = long_targets(reports, rate, maxrate) if "long" in reports else []
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
    if "nexmark" in reports:
        rows.append(nexmark_target(reports["nexmark"]))
    outer = _case(reports, "outer", "outer-band")
    if outer is not None:
        r, agree = outer["ratios"].get("throughput"), outer.get("results_agree")
        rows.append(
            (
                "outer (LEFT JOIN, band, 10 s window): against the foreachBatch join; each row "
                "without a partner written in the batch whose watermark passes its window "
                "(checked batch by batch against the reference: tests/spark/test_outer.py)",
                f"throughput ×{r}; results agree: {agree}",
                None if agree is None else bool(agree),
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
                (f"falls ×{fall:.2f}" if fall else "missing")
                + (f" (peer ×{peer_fall:.2f})" if peer_fall else ""),
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


def adhoc_targets(adhoc: t.Mapping[str, Report]) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?) of the ``adhoc`` reports present (`benchmarks.adhoc`)."""
    from benchmarks.adhoc import _ratios
    from benchmarks.adhoc import targets as adhoc_met

    rows: list[tuple[str, str, bool | None]] = []
    for file, r in adhoc.items():
        ns = sorted(int(n) for n in r["ratios"])
        total = 2 * r["spec"]["files"] * r["spec"]["rows"]
        ratios = _ratios(r["runs"], ns, total)
        met = adhoc_met(r["runs"], ratios, ns)
        at = ratios.get("100", {})
        for peer, least in (("spark", 10), ("apart", 3)):
            gaps = ", ".join(
                f"×{ratios[str(n)].get(f'vs_{peer}', '–')}"
                f"{' (at its limit)' if ratios[str(n)].get(f'{peer}_at_limit') else ''} at {n}"
                for n in ns
            )
            name = "one Spark query per query" if peer == "spark" else "ours without sharing"
            at_least, widens = met[f"at_100_vs_{peer}_ge_{least}"], met[f"gap_vs_{peer}_widens"]
            verdict = None if at_least is None or widens is None else at_least and widens
            if at_least is False or widens is False:
                verdict = False
            if widens is None and len(ns) > 1:
                gaps += " (widening not decided: a peer stopped at its limit gives a bound)"
            rows.append(
                (
                    f"adhoc (`{file}`): shared ≥ {least}× {name} at 100 queries, gap widening",
                    gaps or f"×{at.get(f'vs_{peer}', '–')}",
                    verdict,
                )
            )
        adds = [a for run in r["runs"].values() for a in run.get("churn", {}).get("adds", [])]
        steps = ", ".join(str(a["batches_to_first"]) for a in adds)
        rows.append(
            (
                f"adhoc (`{file}`): an added query's first results within 2 batches",
                f"batches: {steps or '–'}",
                met["first_results_within_2_batches"],
            )
        )
    return rows


def adhoc_lines(adhoc: t.Mapping[str, Report]) -> list[str]:
    """The ``adhoc`` section: a row per query count and mode, and the served adds."""
    lines = [
        "## Ad-hoc queries (adhoc)",
        "",
        "N two-way queries over two streams, half of each of two templates (`benchmarks/adhoc.py`):"
        " *shared*, one job with AJoin's sharing; *apart*, one job, a join per query; *spark*, "
        "one Spark native join per query, all started together. Our state is the streams' input "
        "files (the checkpoint keeps manifests); Spark's is its state store. *rows/s* is input "
        "rows a second per query; a run *stopped* at the time limit is rated on what it had "
        "read by then, and the ratios are of throughput (query-rows a second).",
        "",
    ]
    for file, r in adhoc.items():
        spec = r["spec"]
        lines += [
            f"`{file}`: {spec['files']} files × {spec['rows']} rows per stream; commit "
            f"{commit_of(r)}; results {', '.join(f'{n}: {v}' for n, v in r['checks'].items())}.",
            "",
            "| queries | mode | seconds | rows/s | joins a batch | state MB | peak MB |",
            "|" + "---|" * 7,
        ]
        for key, run in r["runs"].items():
            mode, n = key.rsplit("-", 1)
            if "error" in run:
                after = f" after {_fmt(run['failed_after_s'])} s" if "failed_after_s" in run else ""
                lines.append(f"| {n} | {mode} | failed{after}: {run['error'][:80]} |" + " |" * 4)
                continue
            late = "" if run.get("finished", True) else " (stopped)"
            rows = run.get("rows_in") or r["runs"].get(f"shared-{n}", {}).get("rows_in")
            if not run.get("finished", True):
                rows = run.get("rows_read_per_query", run.get("rows_in"))
            rate = rows / run["wall_s"] if rows else None
            lines.append(
                f"| {n} | {mode} | {_fmt(run['wall_s'])}{late} | {_fmt(rate)} | "
                f"{run.get('joins_per_batch', '–')} | {run['state_bytes'] / 2**20:.2f} | "
                f"{_fmt(run.get('peak_rss_mb'))} |"
            )
        for run in r["runs"].values():
            churn = run.get("churn")
            if churn:
                firsts = ", ".join(
                    f"{a['query']} {a['batches_to_first']} ({_fmt(a['seconds_to_first'])} s)"
                    for a in churn["adds"]
                )
                lines += [
                    "",
                    f"Served, with queries added and dropped: batch p50 / p99 "
                    f"{_fmt(churn['batch_ms_p50'])} / {_fmt(churn['batch_ms_p99'])} ms; batches "
                    f"from an add to its first results (seconds): {firsts}.",
                ]
        lines.append("")
    return lines


def other_targets(
    multiquery: t.Mapping[str, Report], extra: t.Mapping[str, Report]
) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?) of the multiquery, partitioning and ILP reports present."""
    rows: list[tuple[str, str, bool | None]] = []
    for file, report in multiquery.items():
        tg = report.get("targets", {})
        gaps = tg.get("global_over_alone", {})
        shown = ", ".join(f"×{v} at {n}" for n, v in gaps.items())
        rows.append(
            (
                f"multiquery (`{file}`): global ≥ 2.5× alone at 10 queries",
                f"×{gaps.get('10', '–')}",
                tg.get("at_10_queries_ge_2_5"),
            )
        )
        rows.append(
            (
                f"multiquery (`{file}`): the gap widens with the number of queries",
                shown or "–",
                tg.get("gap_widens"),
            )
        )
    for name in ("skew-full", "skew"):
        if name not in extra:
            continue
        tg, size = extra[name]["targets"], extra[name]["size"]
        measured = {
            "z>=1.5: auto >= 4x hash": ("z ≥ 1.5: auto ≥ 4× hash", "speedups_at_z>=1.5", "×"),
            "z>=1.5: auto max/mean < 1.5": (
                "z ≥ 1.5: auto's max/mean input per unit < 1.5",
                "auto_skew_at_z>=1.5",
                "",
            ),
            "z=0: auto within 20% of hash": (
                "z = 0: auto within 20% of hash",
                "speedup_at_z=0",
                "×",
            ),
        }
        for key, (label, figures, unit) in measured.items():
            if key in tg:
                values = tg.get(figures)
                numbers = " / ".join(f"{unit}{v}" for v in values) if values else "–"
                rows.append((f"skew ({size}): {label}", numbers, tg[key]))
    for name in ("fluctuating", "memory"):
        size = extra.get(name, {}).get("size")
        for key, met in extra.get(name, {}).get("targets", {}).items():
            rows.append((f"{name} ({size}): {key}", "see `results/SKEW.md`", met))
    overhead = extra.get("metrics-overhead")
    if overhead is not None:
        rows.append(metrics_overhead_row(overhead))
    ilp = extra.get("ilp-scaling")
    if ilp is not None:
        row: dict[str, t.Any] = next(
            (
                r
                for r in ilp["rows"]
                if (r["queries"], r["relations_per_query"], r["form"]) == (100, 3, "tight")
            ),
            {},
        )
        rows.append(
            (
                "ILP: 100 three-relation queries planned in < 1 s (build + solve)",
                f"{_fmt(row.get('total_ms'))} ms wall, {_fmt(row.get('total_cpu_ms'))} ms CPU",
                ilp.get("target_100x3_under_1s"),
            )
        )
    return rows


def metrics_overhead_row(overhead: Report) -> tuple[str, str, bool | None]:
    """The target of the figures' cost: the on/off ratio where the runs without them agree
    within 3 %, else the driver's share of the run spent on them (a bound of the cost), and
    no verdict from a ratio the noise hides."""
    ratio, spread = overhead["ratio_on_off"], overhead.get("off_spread")
    share = overhead.get("driver_share")
    spread_text = "–" if spread is None else f"{spread:.0%}"
    share_text = "–" if share is None else f"{share:.2%}"
    shown = (
        f"×{ratio} on/off (the runs without them spread {spread_text}); the driver's extra "
        f"CPU with them: {share_text} of the run, {overhead['record_ms_per_batch']} ms a "
        "batch recording them"
    )
    resolved = spread is not None and spread <= 0.03
    met = ratio >= 0.97 if resolved else (share < 0.03 if share is not None else None)
    return ("metrics and dashboard on: throughput within 3 % of off", shown, met)


OLD_PEER_LIMIT = 180.0
"""The full-size peer time limit of the reports written before they recorded theirs."""

_ARCHIVE = re.compile(r"(-XX:SharedArchiveFile=)\S+")


def jvm_line(reports: t.Mapping[str, Report]) -> str:
    """Which ``-XX`` flags each engine's driver JVM ran with, over every report (the path of a
    class archive shown as ``…``)."""
    flags: dict[str, set[str]] = {}
    for report in reports.values():
        for case in report["cases"]:
            for name, run in case["engines"].items():
                flags.setdefault(name, set()).add(_ARCHIVE.sub(r"\1…", run.get("jvm_flags") or ""))
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


def _size_flag(report: Report) -> str:
    """The size option that reproduces `report` (none for full size)."""
    size = report.get("size", "full")
    return "" if size == "full" else f" --{size}"


def commit_of(report: Report) -> str:
    """The commit a report ran on, or `NOT_RECORDED` (reports need not record one)."""
    value = report.get("commit") or report.get("git_commit")
    return str(value) if value else NOT_RECORDED


def commit_line(reports: t.Mapping[str, Report]) -> str:
    """The commit each report ran on, grouped; says so when no report recorded its commit."""
    by_commit: dict[str, list[str]] = {}
    for name, report in reports.items():
        by_commit.setdefault(commit_of(report), []).append(name)
    if not by_commit or set(by_commit) == {NOT_RECORDED}:
        return "Commit: not recorded (the JSON reports carry no commit)."
    parts = [
        f"{commit if commit == NOT_RECORDED else f'`{commit}`'} ({', '.join(names)})"
        for commit, names in by_commit.items()
    ]
    return "Commit: " + "; ".join(parts) + "."


def machine_line(reports: t.Mapping[str, Report]) -> str:
    """The machine of the reports; every distinct one if they differ."""
    seen: list[dict[str, t.Any]] = []
    for report in reports.values():
        m = report.get("machine")
        if m and m not in seen:
            seen.append(m)
    shown = [
        f"{m.get('cores')} cores ({m.get('cpu')}), {m.get('memory_gib')} GiB; "
        f"Python {m.get('python')}, PySpark {m.get('pyspark', '–')}, {m.get('java', 'Java –')}"
        for m in seen
    ]
    if not shown:
        return "Machine: not recorded."
    return "Machine: " + " | ".join(shown) + "."


def _peer_flag(report: Report) -> str:
    """The ``--peer-limit`` that reproduces `report` (none for the size's default)."""
    from benchmarks.harness import peer_time_limit

    limit = report.get("peer_time_limit_s", OLD_PEER_LIMIT)
    if limit == peer_time_limit(report.get("size", "full")):
        return ""
    return f" --peer-limit {limit or 0:g}"


_SIZE_FLAG = {"quick": " --quick", "tiny": " --tiny"}


def commands(
    reports: t.Mapping[str, Report],
    rate: t.Mapping[str, Report],
    multiquery: t.Mapping[str, Report],
    extra: t.Mapping[str, Report],
) -> list[str]:
    """The commands that write every report present, then RESULTS.md."""
    lines = [
        f"streamjoin bench {r.get('workload', name)}{_size_flag(r)}{_peer_flag(r)}"
        f"{' --cluster' * bool(r.get('cluster'))} --out benchmarks/results/{name}.json"
        for name, r in reports.items()
    ]
    lines += [
        f"streamjoin bench {r['workload']} --rate {r['rate_per_stream']:g}"
        f"{_SIZE_FLAG.get(r['size'], '')} --duration {r['duration_s']:g} "
        f"--out benchmarks/results/{file}"
        for file, r in rate.items()
    ]
    lines += [
        f"python -m benchmarks.multiquery{_SIZE_FLAG.get(r['size'], '')} "
        f"--queries {','.join(str(x['queries']) for x in r['runs'])}"
        for r in multiquery.values()
    ]
    lines += [r["command"] for r in extra.values() if r.get("command")]
    if "ilp-scaling" in extra:
        lines.append(
            "python -m benchmarks.ilp_scaling | tail -1 > benchmarks/results/ilp-scaling.json"
        )
    return [*lines, "python -m benchmarks.report"]


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
    "that of the first third (ms): above 1, a batch costs more as the state grows. Batch times "
    "against batch number: `long_batches.png`."
)


def long_table(report: Report, suffix: str = "") -> list[str]:
    """The `long` workload's table, a row per case (ours · the peer's in each cell, to keep the
    page short): steady-state batch times and their growth over the run, since its question is
    how batches fare as the state grows."""
    lines = [
        "| case | window | peer | rows/s: ours · peer | steady p50 / p99 ms: ours · peer | "
        "growth: ours · peer | results agree | ours ÷ peer |",
        "|" + "---|" * 8,
    ]
    for c in report["cases"]:
        peer = next((name for name in c["engines"] if name != "streamjoin"), None)
        theirs = c["engines"].get(peer)
        stopped = " (stopped at its time limit)" if (theirs or {}).get("stopped_early") else ""
        pairs = zip(_long_cells(c["engines"].get("streamjoin")), _long_cells(theirs), strict=True)
        cells = " | ".join(f"{a} · {b}" for a, b in pairs)
        shown = f"{peer}{stopped}" if peer else "–"
        lines.append(
            f"| {c['case']}{suffix} | {_window_cell(c.get('window_seconds'))} | {shown} | "
            f"{cells} | "
            f"{_agree(c.get('results_agree'))} | {ratio_cell(_ratios(report, c))} |"
        )
    return lines


def _ratios(report: Report, case: t.Mapping[str, t.Any]) -> dict[str, float | None]:
    """A case's ratios to show: on a cluster, not its rows per CPU second (the CPU counted is
    the driver's alone)."""
    ratios = dict(case.get("ratios", {}))
    if report.get("cluster"):
        ratios.pop("rows_per_cpu_second", None)
    return ratios


def workload_lines(reports: dict[str, Report]) -> list[str]:
    """A heading, a line of context and the table of each backlog workload; consecutive
    workloads with the same table share one (a line of context each)."""
    lines: list[str] = []
    runs: list[list[str]] = []
    for name in reports:
        alone = (*COMPACT, "nexmark")
        if name == "long-cluster" and runs and runs[-1] == ["long"]:
            runs[-1].append(name)  # (its rows under long's, in long's table)
        elif runs and name not in alone and runs[-1][-1] not in alone:
            runs[-1].append(name)
        else:
            runs.append([name])
    for names in runs:
        context = [_context(n, reports[n]) for n in names]
        first = reports[names[0]]
        if names[0] in COMPACT:
            # (window-growth as long's compact table: a row per case, ours · the peer's)
            body = long_table(first)
            for n in names[1:]:
                body += long_table(reports[n], " on a cluster")[2:]
            if names[0] == "long":
                note = LONG_NOTE.format(warmup=_warmup(first["cases"]))
                context = [f"{context[0]} {note}", *context[1:]]
        elif names[0] == "nexmark":
            note, _, *body = nexmark_table(first, _fmt)
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


def rate_lines(reports: dict[str, Report]) -> list[str]:
    """The live-rate section: a row per engine and rate."""
    lines = [
        "## Live rate mode",
        "",
        "Each engine fed a live source at a fixed rate with a processing-time trigger; latency is "
        "a row's batch commit time minus its file's arrival (definitions: `benchmarks/rate.py`). "
        "A file per stream lands every half second, at a drawn moment within its tick (the same "
        "draws for every engine), so its wait for the next trigger does not depend on where the "
        "run started against the trigger's clock. The first minute of a run is mostly the JVM "
        "compiling the batches' code: runs of 30 s measure that, runs of 300 s the steady "
        "state. Batch times, and so latencies, move up to 2× between repeats of short runs.",
        "",
        "| rows/s per stream | size, feed s | engine | keeps up | fed / processed rows/s | "
        "latency p50 / p95 / p99 / max s | growth | backlog at end s | batch p50 / p99 ms | "
        "results agree | ours ÷ peer |",
        "|" + "---|" * 11,
    ]
    for report in reports.values():
        run = f"{report['size']}, {report['duration_s']:g}"
        for c in report["cases"]:
            for engine, r in c["engines"].items():
                rate = _fmt(report["rate_per_stream"])
                if r.get("error"):
                    lines.append(f"| {rate} | {run} | {engine} | error: {r['error']} |" + " |" * 7)
                    continue
                latency = " / ".join(
                    _fmt(r.get(f"latency_{p}_s")) for p in ("p50", "p95", "p99", "max")
                )
                batches = " / ".join(_fmt(r.get(k)) for k in ("batch_p50_ms", "batch_p99_ms"))
                ratios = ratio_cell(c.get("ratios", {})) if engine == "streamjoin" else ""
                lines.append(
                    f"| {rate} | {run} | {engine} | {'yes' if r['keeps_up'] else '**no**'} | "
                    f"{_fmt(r.get('input_rate'))} / {_fmt(r.get('processed_rate'))} | "
                    f"{latency} | ×{_fmt(r.get('latency_growth'))} | "
                    f"{_fmt(r.get('backlog_at_end_s'))} | {batches} | "
                    f"{_agree(c.get('results_agree'))} | {ratios} |"
                )
    return [*lines, ""]


def multiquery_lines(reports: dict[str, Report]) -> list[str]:
    """The ``multiquery`` section: a row per query count and mode."""
    lines = [
        "## Many queries (multiquery)",
        "",
        "N three-relation joins over TPC-H streams. Modes (`benchmarks/multiquery.py`): *alone*, "
        "each query in its own job (sums); *simple*, one job, nothing shared; *global*, the ILP's "
        "shared plan; *base*, *broadcast*, *routed*: global without MIR stores, without "
        "partitioned stores, with every carried step routed. Predicted load: CLASH's model "
        "(global / unshared / alone).",
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


def skew_lines(extra: t.Mapping[str, Report]) -> list[str]:
    """The skew section: forced hash against auto partitioning, a row per size and Zipf z."""
    runs = [extra[n] for n in ("skew-full", "skew") if n in extra]
    if not runs:
        return []
    lines = [
        "## Partitioning under skew",
        "",
        "Zipf-distributed keys, an equi join with a 1 s window, Spark's hash partitioning by the "
        "key (forced) against `auto`. Details, the fluctuating-ratio and memory benchmarks: "
        "[`results/SKEW.md`](results/SKEW.md).",
        "",
        "| size | z | hot key | out | hash rows/s | auto rows/s | auto ÷ hash | "
        "hash p50 / p99 ms | auto p50 / p99 ms | hash max/mean | auto max/mean after switch |",
        "|" + "---|" * 11,
    ]
    for r in runs:
        for c in r["cases"]:
            h, a = c["hash"], c["auto"]
            gain = c["ratios"].get("throughput_auto_over_hash")
            shown = "–" if gain is None else f"**×{gain}**" if gain < 1 else f"×{gain}"
            lines.append(
                f"| {r['size']} | {c['z']} | {c['top_key_share']:.1%} | {_fmt(h['out'])} | "
                f"{_fmt(h['throughput'])} | {_fmt(a['throughput'])} | {shown} | "
                f"{_fmt(h['batch_p50_ms'])} / {_fmt(h['batch_p99_ms'])} | "
                f"{_fmt(a['batch_p50_ms'])} / {_fmt(a['batch_p99_ms'])} | "
                f"{_fmt(h.get('skew_mean'))} | {_fmt(a.get('skew_after_switch'))} |"
            )
    return [*lines, ""]


HOW_TO_READ = [
    "## How to read",
    "",
    "- *rows/s*: input rows (all streams) over the wall time of the whole run, JVM warm-up "
    "included for every engine. Each engine runs in its own process on the same Parquet backlog "
    "(`maxFilesPerTrigger = 1`), `local[2]`, 2 shuffle partitions.",
    "- *ours ÷ peer*: streamjoin's figure over the peer's (Spark's native join, or the "
    "foreachBatch join where Spark has none). Above 1 is a gain for rows/s, below 1 for times; "
    "every loss is in **bold**.",
    "- A peer *stopped at its time limit* is measured on the batches it finished, its cheapest "
    "(so our ratio is a lower bound), and its result is *unchecked*. "
    "*results agree*: equi queries against an exact DuckDB batch join; others against the "
    "foreachBatch peer where it finished. *State*: bytes per live tuple, and over the raw "
    "(Arrow) bytes of the same rows. "
    "One run each on a shared 2-core machine: differences of up to about 25% between runs are "
    "noise. Runs, repeats and analysis: [`docs/dev-log.md`](../docs/dev-log.md).",
    "",
]


LONG_PLOT = "long_batches.png"
COMPACT = ("long", "long-cluster", "window-growth")
"""Workloads whose table has a row per case, ours · the peer's in each cell."""


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


def render(
    reports: dict[str, Report],
    rate: dict[str, Report] | None = None,
    multiquery: dict[str, Report] | None = None,
    extra: dict[str, Report] | None = None,
    *,
    plot: bool = True,
    maxrate: dict[str, Report] | None = None,
    adhoc: dict[str, Report] | None = None,
    overload: dict[str, Report] | None = None,
    soak: dict[str, Report] | None = None,
    elastic: Report | None = None,
) -> str:
    """The text of RESULTS.md; without `plot` the plots already on disk are linked as they are."""
    rate, multiquery, extra, maxrate = rate or {}, multiquery or {}, extra or {}, maxrate or {}
    adhoc, overload, soak = adhoc or {}, overload or {}, soak or {}
    every = {**reports, **rate, **multiquery, **extra, **maxrate, **adhoc, **overload, **soak}
    every |= {"elastic.json": elastic} if elastic else {}
    if not every:
        return "# Benchmark results\n\nNo run recorded yet.\n"
    lines = [
        "# Benchmark results",
        "",
        "## Machine, commit, command",
        "",
        "Generated by `python -m benchmarks.report` from `benchmarks/results/*.json`; edit "
        f"`benchmarks/report.py`, not this file. {machine_line(every)} {commit_line(every)}",
        "",
    ]
    if reports:
        lines += [f"{jvm_line(reports)} {settings_line(reports)}", ""]
    lines += [
        "```",
        *commands(reports, rate, multiquery, extra)[:-1],
        *(
            f"streamjoin bench {r['workload']} --max-rate --rate {r.get('start_rate', 5000):g}"
            f"{_SIZE_FLAG.get(r['size'], '')} --duration {r.get('duration_s', 30):g}"
            f"{_engines_flag(r)} --out benchmarks/results/{file}"
            for file, r in maxrate.items()
        ),
        *(
            f"python -m benchmarks.adhoc{_SIZE_FLAG.get(r['size'], '')} --queries "
            f"{','.join(r['ratios'])} --out benchmarks/results/{file}"
            for file, r in adhoc.items()
        ),
        *(
            f"streamjoin bench overload{_SIZE_FLAG.get(r['size'], '')} --rate "
            f"{r['live']['rate_per_stream']:g} --duration {r['live']['duration_s']:g} "
            f"--out benchmarks/results/{file}"
            for file, r in overload.items()
        ),
        *(
            f"streamjoin bench soak --rate {r['rate_per_stream']:g} --duration "
            f"{r['duration_s']:g} --out benchmarks/results/{file}"
            for file, r in soak.items()
        ),
        *(
            [
                f"python -m benchmarks.elastic --rate {elastic['rate_per_stream']:g} --duration "
                f"{elastic['duration_s']:g} --trigger {elastic.get('trigger_s', 1.0):g}"
            ]
            if elastic
            else []
        ),
        "python -m benchmarks.report",
        "```",
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for name, numbers, met in [
        *(targets(reports, rate, maxrate) if reports else []),
        *other_targets(multiquery, extra),
        *adhoc_targets(adhoc),
        *(row for file, r in overload.items() for row in overload_targets(file, r)),
        *(row for file, r in soak.items() for row in soak_targets(file, r)),
    ]:
        lines.append(f"| {name} | {numbers} | {_verdict(met)} |")
    lines += ["", *HOW_TO_READ]
    if reports:
        lines += ["## Backlog workloads", "", *workload_lines(reports)]
        kept = [
            p
            for p in ("window_growth.png", "batch_times.png", LONG_PLOT, HISTORY_PLOT)
            if os.path.exists(f"{HERE}/{p}") and (p != LONG_PLOT or "long" in reports)
        ]
        pngs = plots(reports) if plot else kept
        lines += [" ".join(f"![{png}]({png})" for png in pngs), ""] if pngs else []
    if rate:
        lines += rate_lines(rate)
    if maxrate:  # (under the live rate mode's heading: the same runs, searched)
        lines += [*maxrate_lines(*maxrate.values()), ""]
    if multiquery:
        lines += multiquery_lines(multiquery)
    if adhoc:
        lines += adhoc_lines(adhoc)
    if overload:
        lines += overload_lines(overload)
    if elastic:
        lines += elastic_lines(elastic, HERE, plot=plot)
    if soak:
        lines += soak_lines(soak, HERE, plot=plot)
    lines += skew_lines(extra)
    return "\n".join(lines).rstrip() + "\n"


def write(folder: str = RESULTS, *, plot: bool = True) -> str:
    """Regenerate RESULTS.md (and, with `plot`, its plots) from the reports in `folder`."""
    text = render(
        load(folder),
        load_rate(folder),
        load_multiquery(folder),
        load_extra(folder),
        plot=plot,
        maxrate=_load_prefixed(folder, "maxrate-"),
        adhoc=_load_prefixed(folder, "adhoc-"),
        overload=_load_prefixed(folder, "overload-"),
        soak=_load_prefixed(folder, "soak"),
        elastic=_load_prefixed(folder, "elastic.json").get("elastic.json"),
    )
    with open(os.path.join(HERE, "RESULTS.md"), "w", encoding="utf-8") as f:
        f.write(text)
    return text


def main(argv: list[str]) -> int:
    print(write(argv[0] if argv else RESULTS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
