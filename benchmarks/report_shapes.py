"""The ``shapes`` benchmark (`benchmarks.workloads`: `long`'s stream over every two-way shape
the join operator serves): its page beside RESULTS.md, a row per shape with ours · the peer's,
and its targets in RESULTS.md (issue: one join operator)."""

from __future__ import annotations

import typing as t

from benchmarks.report_backlog import long_table
from benchmarks.report_format import Report, _fmt, commit_of

NATIVE, FOREACH = "spark-native", "spark-foreach"
SAME_COST = ("equi", "bandkey", "band", "or", "left-equi", "full-equi", "left-band", "full-band")
"""The shapes with an equality or a band, whose steady batch is held to the equi shape's."""


def shapes_lines(report: Report) -> list[str]:
    """The page's section: what ran, and the table (`long`'s columns)."""
    limit = report.get("peer_time_limit_s")
    return [
        "## Every two-way shape (shapes)",
        "",
        f"shapes: {report.get('size', 'full')} size; peer time limit {_fmt(limit)} s; commit "
        f"{commit_of(report)}. `long`'s stream (many small batches against a growing state) "
        "over each shape, within 5 minutes and over the full history: `bandkey` a band within "
        "few keys (Spark: an equi join on the key, the band a residual), `or` an OR of "
        "equalities, `left-…` / `full-…` outer joins. The peer is Spark's native join where it "
        "runs the shape, else the foreachBatch join. *Steady*: the batches after the warm-up.",
        "",
        *long_table(report, floor=False),
        "",
    ]


def _steady(case: t.Mapping[str, t.Any], engine: str) -> float | None:
    value = case["engines"].get(engine, {}).get("steady_batch_p50_ms")
    return float(value) if value is not None else None


def _throughput(case: t.Mapping[str, t.Any], engine: str) -> float | None:
    value = case["engines"].get(engine, {}).get("throughput")
    return float(value) if value is not None else None


def _kind(case: t.Mapping[str, t.Any]) -> tuple[str, str]:
    """A case's shape and window: ``shapes-left-band-300s`` → (left-band, 300s)."""
    name = str(case["case"]).removeprefix("shapes-")
    kind, _, window = name.rpartition("-")
    return kind, window


def shapes_targets(report: Report) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?): against Spark's native join, against the foreachBatch join
    (a peer stopped at its limit is measured on its finished batches: a lower bound), and each
    shape's steady batch against the equi shape's of the same window."""
    cases = report["cases"]
    rows: list[tuple[str, str, bool | None]] = []
    native = [c for c in cases if NATIVE in c["engines"]]
    if native:
        p50 = {_kind(c): _ratio(c, NATIVE, _steady) for c in native}
        rate = {_kind(c): _ratio(c, NATIVE, _throughput) for c in native}
        worst_p50 = max((v for v in p50.values() if v is not None), default=None)
        worst_rate = min((v for v in rate.values() if v is not None), default=None)
        shown = ", ".join(f"{k}-{w} ×{_r(p50[k, w])} / ×{_r(rate[k, w])}" for k, w in p50)
        rows.append(
            (
                "shapes: every shape Spark runs, steady batch p50 ≤ 0.3× and throughput ≥ 3× "
                "Spark's native join",
                f"p50 / rows/s: {shown}",
                None
                if worst_p50 is None or worst_rate is None
                else worst_p50 <= 0.3 and worst_rate >= 3,
            )
        )
    foreach = [c for c in cases if FOREACH in c["engines"]]
    if foreach:
        gains = {_kind(c): _ratio(c, FOREACH, _throughput) for c in foreach}
        worst = min((v for v in gains.values() if v is not None), default=None)
        # (Beside it, the steady batches alone: the whole run's rows/s also carries each
        # engine's fixed costs, its first batch and its time outside batches.)
        slower = [1 / v for c in foreach if (v := _ratio(c, FOREACH, _steady))]
        rows.append(
            (
                "shapes: every other shape, throughput ≥ 30× the foreachBatch join",
                f"×{_r(worst)} at worst ({len(gains)} shapes); steady batch p50, the peer's "
                f"over ours: ×{_r(min(slower, default=None))} at worst",
                None if worst is None else worst >= 30,
            )
        )
    equi: dict[str, float] = {}
    for c in cases:
        kind, window = _kind(c)
        if kind == "equi" and (steady := _steady(c, "streamjoin")):
            equi[window] = steady
    over = {
        (k, w): ours / equi[w]
        for c in cases
        for k, w in [_kind(c)]
        if k in SAME_COST and w in equi and (ours := _steady(c, "streamjoin")) is not None
    }
    if over:
        worst_kind = max(over, key=lambda kw: over[kw])
        rows.append(
            (
                "shapes: every shape with an equality or a band, steady batch p50 ≤ 2× the equi "
                "shape's (same window)",
                f"×{_r(over[worst_kind])} at worst ({'-'.join(worst_kind)})",
                over[worst_kind] <= 2,
            )
        )
    return rows


def _ratio(
    case: t.Mapping[str, t.Any],
    peer: str,
    figure: t.Callable[[t.Mapping[str, t.Any], str], float | None],
) -> float | None:
    ours, theirs = figure(case, "streamjoin"), figure(case, peer)
    return ours / theirs if ours and theirs else None


def _r(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"
