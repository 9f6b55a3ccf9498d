"""The rows of RESULTS.md's targets table for the backlog workloads (`long` first) and for the
multiquery, partitioning, metrics-overhead and ILP reports: (target, the numbers, met?)."""

from __future__ import annotations

import typing as t

from benchmarks.engines_floor import FLOOR
from benchmarks.report_format import Report, _case, _fmt
from benchmarks.report_nexmark import nexmark_speed_target, nexmark_target
from benchmarks.report_rate import live_targets


def _ours(case: dict[str, t.Any] | None, figure: str = "throughput") -> float | None:
    if case is None:
        return None
    value = case["engines"].get("streamjoin", {}).get(figure)
    return float(value) if value is not None else None


def _peer(case: dict[str, t.Any] | None, figure: str = "throughput") -> float | None:
    if case is None:
        return None
    for name, r in case["engines"].items():
        if name not in ("streamjoin", FLOOR) and r.get(figure) is not None:
            return float(r[figure])
    return None


def _ratio(case: dict[str, t.Any] | None, figure: str) -> float | None:
    """Our `figure` over the peer's, unrounded: a target is judged on the figures, not on a
    ratio rounded up to it."""
    ours, theirs = _ours(case, figure), _peer(case, figure)
    return ours / theirs if ours and theirs else None


def _shown(ratio: float | None) -> str:
    """`ratio` to two decimals, or three where two would round it onto a target's 0.5 or 2."""
    if ratio is None:
        return "–"
    near = any(round(ratio, 2) == x != round(ratio, 3) for x in (0.5, 2.0))
    return f"{ratio:.3f}" if near else f"{round(ratio, 2):g}"


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
        steady = _ratio(case, "steady_batch_p50_ms")
        ratio = _ratio(case, "throughput")
        rows.append(
            (
                f"long, equi, {name}: steady batch p50 ≤ 0.5× and throughput ≥ 2× Spark's "
                "native join",
                f"p50 ×{_shown(steady)}, throughput ×{_shown(ratio)}",
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
    join = _ours(_case(reports, "long", "long-equi-300s"), "steady_batch_p50_ms")
    grouped = _ours(_case(reports, "long", "long-groupby-300s"), "steady_batch_p50_ms")
    if join and grouped:  # (a report before the case: no row)
        over = round(grouped / join, 2)
        rows.append(
            (
                "long, GROUP BY over the equi join, 300s: steady batch p50 ≤ 1.5× the join's alone",
                f"{grouped} against {join} ms (×{over})",
                over <= 1.5,
            )
        )
    three = _case(reports, "long", "long-3way-300s")
    if three:  # (a report before the case: no row)
        steady, ratio = _ratio(three, "steady_batch_p50_ms"), _ratio(three, "throughput")
        rows.append(
            (
                "long, three-way equi join, 300s: steady batch p50 ≤ 0.3× and throughput ≥ 3× "
                "Spark's chained native joins",
                f"p50 ×{_shown(steady)}, throughput ×{_shown(ratio)}",
                None if steady is None or ratio is None else steady <= 0.3 and ratio >= 3,
            )
        )
    rows += live_targets(rate or {}, maxrate or {})
    kinds = [_case(reports, "long", f"long-{kind}-300s") for kind in ("band", "theta")]
    r = [c["ratios"].get("throughput") if c else None for c in kinds]
    shown = " / ".join(f"×{x}" for x in r)
    caps = [c["ratios"].get("floor_throughput") if c else None for c in kinds]
    if any(caps):
        # (What Spark's micro-batch loop with only a read of each batch would reach.)
        shown += f" (Spark's floor: {' / '.join(f'×{x}' for x in caps)})"
    rows.append(
        (
            "long, band / theta, window 300s: throughput ≥ 30× the foreachBatch join",
            shown,
            None if None in r else all(x is not None and x >= 30 for x in r),
        )
    )
    return rows


def cluster_targets(reports: dict[str, Report]) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?) of `long` on the 2-worker cluster: every case with Spark's
    native join beside it; the worst ratio of each figure."""
    report = reports.get("long-cluster")
    cases = [c for c in (report or {}).get("cases", []) if "spark-native" in c["engines"]]
    if not cases:
        return []
    p50 = max(_ratio(c, "steady_batch_p50_ms") or float("inf") for c in cases)
    rate = min(_ratio(c, "throughput") or 0.0 for c in cases)
    p99 = max(_ratio(c, "batch_p99_ms") or float("inf") for c in cases)
    return [
        (
            "long, on the 2-worker cluster, every case Spark runs: steady batch p50 ≤ 0.5×, "
            "throughput ≥ 2×, batch p99 ≤ Spark's native join's",
            f"at worst p50 ×{_shown(p50)}, throughput ×{_shown(rate)}, p99 ×{_shown(p99)} "
            f"({len(cases)} cases)",
            p50 <= 0.5 and rate >= 2 and p99 <= 1,
        )
    ]


def targets(
    reports: dict[str, Report],
    rate: t.Mapping[str, Report] | None = None,
    maxrate: t.Mapping[str, Report] | None = None,
) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?) for every target of the workloads, `long` first; None when
    its run is missing."""
    rows = long_targets(reports, rate, maxrate) if "long" in reports else []
    rows += cluster_targets(reports)
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
    rows += [nexmark_speed_target(reports[n]) for n in ("nexmark", "nexmark-warm") if n in reports]
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


_SKEW_TARGETS = {
    **{
        f"z>=1.5: auto >= {x}x hash": (f"z ≥ 1.5: auto ≥ {x}× hash", "speedups_at_z>=1.5", "×")
        for x in (4, 1.0, 1.5)  # (4: issue 4's, in older files; 1.0 and 1.5: skew_keys.FASTER)
    },
    "z>=1.5: auto max/mean < 1.5": ("max/mean input per unit < 1.5", "auto_skew_at_z>=1.5", ""),
    "z=0: auto within 20% of hash": ("z = 0: within 20% of hash", "speedup_at_z=0", "×"),
}
"""A skew report's targets: what each says and the figures it was judged on."""


def _skew_row(report: dict[str, t.Any]) -> tuple[str, str, bool | None]:
    """One row for a skew report's targets, all of them met or not."""
    tg, size = report["targets"], report["size"]
    where = ", 2-worker cluster" if "cluster" in report else ""
    labels, numbers = [], []
    for key, (label, figures, unit) in _SKEW_TARGETS.items():
        if key in tg:
            values = tg.get(figures)
            labels.append(label)
            numbers.append(" / ".join(f"{unit}{v}" for v in values) if values else "–")
    judged = [bool(tg[key]) for key in _SKEW_TARGETS if key in tg]
    met = all(judged) if judged else None
    if not any(key.startswith("z>=1.5: auto >=") for key in tg):
        labels.append(f"z ≥ 1.5: auto against hash, not judged at {size} size (see its page)")
        speed = tg.get("speedups_at_z>=1.5")
        numbers.append(" / ".join(f"×{v}" for v in speed) if speed else "–")
    return f"skew ({size}{where}): {'; '.join(labels)}", "; ".join(numbers), met


def other_targets(
    multiquery: t.Mapping[str, Report], extra: t.Mapping[str, Report]
) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?) of the multiquery, partitioning and ILP reports present."""
    rows: list[tuple[str, str, bool | None]] = []
    for file, report in multiquery.items():
        tg = report.get("targets", {})
        gaps = tg.get("global_over_alone", {})
        shown = ", ".join(f"×{v} at {n}" for n, v in gaps.items())
        ratios = [tg.get(k) for k in ("at_10_queries_ge_2_5", "at_100_queries_ge_10")]
        known = [met for met in ratios if met is not None]
        rows.append(
            (
                f"multiquery (`{file}`): global ≥ 2.5× alone at 10 queries, ≥ 10× at 100",
                f"×{gaps.get('10', '–')} at 10, ×{gaps.get('100', '–')} at 100",
                all(known) if known else None,
            )
        )
        p50 = tg.get("global_batch_p50_ms", {}).get("10")
        if p50 is not None:
            rows.append(
                (
                    f"multiquery (`{file}`): global's batch p50 ≤ 1 s at 10 queries",
                    f"{p50} ms",
                    tg.get("at_10_queries_p50_le_1s"),
                )
            )
        rows.append(
            (
                f"multiquery (`{file}`): the gap widens with the number of queries",
                shown or "–",
                tg.get("gap_widens"),
            )
        )
    for name in ("skew-full", "skew", "skew-cluster-full"):
        if name in extra:
            rows.append(_skew_row(extra[name]))
    for passing in (extra.get("passing"), extra.get("passing-cluster")):
        if passing is None:
            continue
        auto = passing["auto"]
        where = ", 2-worker cluster" if "cluster" in passing else ""
        rows.append(
            (
                f"passing ({passing['size']}{where}): auto leaves hash for a hot key, is back "
                "once it passed, no change's batch over 2× the steady p99",
                f"left at batch {auto['left_hash_at']}, back at {auto['back_to_hash_at']}; "
                f"change batches {auto['change_batch_ms']} ms, p99 {auto['steady_p99_ms']} ms",
                all(passing["targets"].values()),
            )
        )
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
    within 3 %, else no verdict. (The driver's share of the run spent on them is shown, but it
    bounds only the Python side: the observation that carries them into Spark's progress runs
    in the JVM, in every task that reads the batch, and cost `long-equi-full` 3-5 % in
    alternating runs: docs/dev-log.md.)"""
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
    met = ratio >= 0.97 if resolved else None
    return ("metrics and dashboard on: throughput within 3 % of off", shown, met)
