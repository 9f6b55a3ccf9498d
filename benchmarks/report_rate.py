"""The live rate mode's rows in RESULTS.md (`benchmarks.rate`): its target, and its section, a
row per engine and rate."""

from __future__ import annotations

import typing as t

from benchmarks.report_format import Report, _agree, _fmt, ratio_cell


def live_targets(
    rate: t.Mapping[str, Report], maxrate: t.Mapping[str, Report]
) -> list[tuple[str, str, bool | None]]:
    """The live mode's target: our latency no worse wherever Spark's join keeps up, and a
    highest rate kept up with at least twice Spark's (equi)."""
    local = {f: r for f, r in rate.items() if "cluster" not in r}
    warm = [r for r in local.values() if r.get("warmup", True)]
    cases = [c for r in warm if r["workload"] == "equi" for c in r["cases"]]
    kept = [c for c in cases if c["engines"].get("spark-native", {}).get("keeps_up")]
    p50 = [c["ratios"].get("latency_p50_s") for c in kept]
    p99 = [c["ratios"].get("latency_p99_s") for c in kept]
    found = [c["ratio"] for r in maxrate.values() if r["workload"] == "equi" for c in r["cases"]]
    rows = cold_targets(local) + nexmark_live_targets(local) + cluster_live_targets(rate)
    if not kept and not found:
        return rows
    ok = all(x is not None and x <= 1 for x in p50 + p99) and bool(found) and found[0] >= 2
    return [
        *rows,
        (
            "live, equi: latency p50 and p99 ≤ Spark's at every rate it keeps up at; highest "
            "rate kept up with ≥ 2× Spark's",
            "p50 "
            + " / ".join(f"×{x}" for x in p50)
            + ", p99 "
            + " / ".join(f"×{x}" for x in p99)
            + f"; highest rate ×{found[0] if found else '–'}",
            ok,
        ),
    ]


def cluster_live_targets(rate: t.Mapping[str, Report]) -> list[tuple[str, str, bool | None]]:
    """Live on the 2-worker cluster (issue: where users outgrow one machine), a row for the
    equi runs there: our latency p50 and p99 ≤ Spark's at each rate Spark keeps up with."""
    runs = [
        r
        for r in rate.values()
        if "cluster" in r and r["workload"] == "equi" and r.get("warmup", True)
    ]
    shown, ok = [], True
    for r in sorted(runs, key=lambda r: float(r["rate_per_stream"])):
        for c in r["cases"]:
            if not c["engines"].get("spark-native", {}).get("keeps_up"):
                shown.append(f"{r['rate_per_stream']:,.0f}/s: Spark falls behind")
                continue
            p50, p99 = (c["ratios"].get(k) for k in ("latency_p50_s", "latency_p99_s"))
            run = f"{r['rate_per_stream']:,.0f}/s ({r['size']}, {r['duration_s']:g} s)"
            shown.append(f"{run} p50 ×{_fmt(p50)}, p99 ×{_fmt(p99)}")
            ok = ok and p50 is not None and p99 is not None and p50 <= 1 and p99 <= 1
    if not runs:
        return []
    kept = any("falls behind" not in x for x in shown)
    return [
        (
            "live, equi on the 2-worker cluster: latency p50 and p99 ≤ Spark's at a rate it "
            "keeps up with",
            "; ".join(shown),
            ok if kept else None,
        )
    ]


def nexmark_live_targets(rate: t.Mapping[str, Report]) -> list[tuple[str, str, bool | None]]:
    """Nexmark's join queries fed live (issue: multi-way joins and Nexmark), a row per run: our
    latency p50 and p99 ≤ half Spark's for each query Spark runs."""
    rows: list[tuple[str, str, bool | None]] = []
    for r in rate.values():
        if r["workload"] != "nexmark" or not r.get("warmup", True):
            continue
        shown, ok = [], True
        for c in r["cases"]:
            if not c["engines"].get("spark-native", {}).get("keeps_up"):
                continue
            p50, p99 = (c["ratios"].get(k) for k in ("latency_p50_s", "latency_p99_s"))
            name = str(c["case"]).removeprefix("nexmark-")
            shown.append(f"{name} p50 ×{_fmt(p50)}, p99 ×{_fmt(p99)}")
            ok = ok and p50 is not None and p99 is not None and p50 <= 0.5 and p99 <= 0.5
        trigger = r.get("trigger_s", 1.0)
        how = "Spark's default trigger" if trigger == 0 else f"a {trigger:g} s trigger"
        rows.append(
            (
                f"live, nexmark at {r['rate_per_stream']:,.0f} events/s, {r['duration_s']:g} s, "
                f"{how}: latency p50 and p99 ≤ 0.5× Spark's for each query it runs",
                "; ".join(shown) or "no query Spark kept up with",
                ok if shown else None,
            )
        )
    return rows


TAIL_RATE = 8_000.0
"""The rate of the cold-start tail's target (rows/s per stream)."""


def cold_targets(rate: t.Mapping[str, Report]) -> list[tuple[str, str, bool | None]]:
    """The tail after a start: equi at `TAIL_RATE` from a cold start (``--cold``, no warm-up
    job), our latency p99 ≤ Spark's and p50 ≤ half Spark's, in every such run; a row per
    trigger the runs had. (A row waits for the next trigger as well as for its batch: a 1 s
    trigger adds about half a second to both engines' median, which keeps a ratio of medians
    above about 0.5 / (0.5 + Spark's batch time) even for a batch of no time; Spark's default
    trigger, each batch as soon as the last ends, adds no such wait.)"""
    runs = [
        (r.get("trigger_s", 1.0), r["duration_s"], c)
        for r in rate.values()
        if r["workload"] == "equi" and not r.get("warmup", True)
        if r["rate_per_stream"] == TAIL_RATE
        for c in r["cases"]
    ]
    rows: list[tuple[str, str, bool | None]] = []
    for trigger in sorted({x[0] for x in runs}):
        shown, ok = [], True
        for _, seconds, c in sorted((x for x in runs if x[0] == trigger), key=lambda x: x[1]):
            p50, p99 = (c["ratios"].get(k) for k in ("latency_p50_s", "latency_p99_s"))
            shown.append(f"{seconds:g} s: p50 ×{_fmt(p50)}, p99 ×{_fmt(p99)}")
            ok = ok and p50 is not None and p99 is not None and p50 <= 0.5 and p99 <= 1
        how = (
            "Spark's default trigger (each batch as soon as the last ends)"
            if trigger == 0
            else f"a {trigger:g} s trigger"
        )
        rows.append(
            (
                f"live, equi at {TAIL_RATE:,.0f} rows/s from a cold start (no warm-up job), "
                f"{how}: latency p99 ≤ Spark's, p50 ≤ 0.5×",
                "; ".join(shown),
                ok,
            )
        )
    return rows


def rate_lines(reports: dict[str, Report]) -> list[str]:
    """The live-rate section: a row per engine and rate."""
    lines = [
        "## Live rate mode",
        "",
        "Each engine fed a live source at a fixed rate with a processing-time trigger (1 s "
        "unless a row names another); latency is "
        "a row's batch commit time minus its file's arrival (definitions: "
        "`benchmarks/rate_latency.py`, `rate_run.py`). "
        "A file per stream lands every half second, at a drawn moment within its tick (the same "
        "draws for every engine), so its wait for the next trigger does not depend on where the "
        "run started against the trigger's clock. The first minute of a run is mostly the JVM "
        "compiling the batches' code: runs of 30 s measure that, runs of 300 s the steady "
        "state. Batch times, and so latencies, move up to 2× between repeats of short runs.",
        "",
        "| case | rows/s per stream | size, feed s (cold: no warm-up job; trigger when not 1 s) | "
        "engine | keeps up | "
        "fed / processed rows/s | "
        "latency p50 / p95 / p99 / max s | growth | backlog at end s | batch p50 / p99 ms | "
        "results agree | ours ÷ peer |",
        "|" + "---|" * 12,
    ]
    for report in reports.values():
        cold = ", cold" if not report.get("warmup", True) else ""
        trigger = report.get("trigger_s", 1.0)
        every = "" if trigger == 1.0 else f", trigger {trigger:g} s"
        where = ", 2-worker cluster" if "cluster" in report else ""
        run = f"{report['size']}, {report['duration_s']:g}{cold}{every}{where}"
        for c in report["cases"]:
            for engine, r in c["engines"].items():
                rate = f"{c['case']} | {_fmt(report['rate_per_stream'])}"
                if r.get("error"):
                    lines.append(f"| {rate} | {run} | {engine} | error: {r['error']} |" + " |" * 7)
                    continue
                latency = " / ".join(
                    _fmt(r.get(f"latency_{p}_s")) for p in ("p50", "p95", "p99", "max")
                )
                batches = " / ".join(_fmt(r.get(k)) for k in ("batch_p50_ms", "batch_p99_ms"))
                ratios = ratio_cell(c.get("ratios", {})) if engine == "streamjoin" else ""
                # (An engine that did not drain is left out of its case's check.)
                agree = (
                    _agree(c.get("results_agree")) if r.get("drained", True) else "– (not drained)"
                )
                lines.append(
                    f"| {rate} | {run} | {engine} | {'yes' if r['keeps_up'] else '**no**'} | "
                    f"{_fmt(r.get('input_rate'))} / {_fmt(r.get('processed_rate'))} | "
                    f"{latency} | ×{_fmt(r.get('latency_growth'))} | "
                    f"{_fmt(r.get('backlog_at_end_s'))} | {batches} | "
                    f"{agree} | {ratios} |"
                )
    return [*lines, ""]
