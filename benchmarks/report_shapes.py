"""The ``shapes`` benchmark (`benchmarks.workloads`: `long`'s stream over every two-way shape
the join operator serves): its page beside RESULTS.md, a row per shape with ours · the peer's,
and its targets in RESULTS.md (issue: one join operator)."""

from __future__ import annotations

import typing as t

from benchmarks.report_backlog import long_table
from benchmarks.report_format import Report, _fmt, commit_of
from benchmarks.report_provenance import commands

NATIVE, FOREACH = "spark-native", "spark-foreach"
SAME_COST = ("equi", "bandkey", "band", "or", "left-equi", "full-equi", "left-band", "full-band")
"""The shapes with an equality or a band, whose steady batch is held to the equi shape's."""


PARTS = "shapes-cases-"
"""The prefix of the reports of runs of some of the cases (``bench shapes --cases …``)."""


def with_parts(shapes: Report | None, parts: t.Mapping[str, Report]) -> Report | None:
    """`shapes` with the cases of the runs of some cases (`parts`, by file name: a later part's
    case takes the place of an earlier's, and of the whole run's, of the same name), and those
    runs' provenance (all but their cases) under ``parts``: a workload of hours can be recorded
    a part at a time."""
    if not parts:
        return shapes
    merged = dict(shapes or next(iter(parts.values())))
    cases = {c["case"]: c for c in (shapes or {}).get("cases", [])}
    for part in parts.values():
        cases |= {c["case"]: c for c in part["cases"]}
    merged["cases"] = list(cases.values())
    merged["parts"] = {f: {k: v for k, v in r.items() if k != "cases"} for f, r in parts.items()}
    return merged


def shapes_sources(shapes: Report) -> dict[str, Report]:
    """The files the (merged) shapes report came from, each with its own provenance (a
    report of parts only is its first part's, which names its cases: no ``shapes.json``)."""
    base = {} if shapes.get("only") else {"shapes.json": shapes}
    return base | dict(shapes.get("parts", {}))


def shapes_commands(shapes: Report) -> list[str]:
    """The commands that wrote the (merged) shapes report's files."""
    runs = {f.removesuffix(".json"): r for f, r in shapes_sources(shapes).items()}
    return commands(runs, {}, {}, {})[:-1]


def shapes_lines(report: Report) -> list[str]:
    """The page's section: what ran, and the table (`long`'s columns)."""
    limit = report.get("peer_time_limit_s")
    parts = [
        f"`{f}` (commit {commit_of(r)}, peer time limit {_fmt(r.get('peer_time_limit_s'))} s: "
        f"the cases whose names contain {' or '.join(f'`{x}`' for x in r.get('only', []))})"
        for f, r in report.get("parts", {}).items()
    ]
    cases_of = f" Cases run apart (`--cases`), in place of the whole run's: {'; '.join(parts)}."
    return [
        "## Every two-way shape (shapes)",
        "",
        f"shapes: {report.get('size', 'full')} size; peer time limit {_fmt(limit)} s; commit "
        f"{commit_of(report)}. `long`'s stream (many small batches against a growing state) "
        "over each shape, within 5 minutes and over the full history: `bandkey` a band within "
        "few keys (Spark: an equi join on the key, the band a residual), `or` an OR of "
        "equalities, `left-…` / `full-…` outer joins, `product` a predicate with neither a band "
        "nor a key (`l.x * r.x > c`, within 10 s). The peer is Spark's native join where it "
        "runs the shape, else the foreachBatch join; the 10 s and 1 h cases are ours alone "
        "(how a batch grows with the window; the stream spans 10 minutes of event time, so the "
        "full history is a 1 h window's). *Steady*: the batches after the warm-up."
        + (cases_of if parts else ""),
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
                "shape's (same window: 10 s, 5 minutes, 1 h, the whole history)",
                f"×{_r(over[worst_kind])} at worst ({'-'.join(worst_kind)}; {len(over)} cases)",
                over[worst_kind] <= 2,
            )
        )
    rows += _growth_row(cases)
    rows += _product_row(cases)
    return rows


def _growth_row(cases: t.Sequence[t.Mapping[str, t.Any]]) -> list[tuple[str, str, bool | None]]:
    """Each shape's steady batch within 1 h over its batch within 10 s (cases of one run,
    ours alone); not judged (–) where one of them has no figure."""
    ours = {_kind(c): _steady(c, "streamjoin") for c in cases}
    kinds = [k for k in SAME_COST if (k, "10s") in ours]
    if not kinds:
        return []
    growth = {}
    for kind in kinds:
        short = ours[kind, "10s"]
        long = ours.get((kind, "3600s"))
        growth[kind] = long / short if short and long else None
    name = (
        "shapes: every shape with an equality or a band, steady batch p50 grows < 1.5× from a "
        "10 s to a 1 h window"
    )
    missing = [k for k, v in growth.items() if v is None]
    if missing:
        return [(name, f"no figure for {', '.join(missing)}", None)]
    worst = max(kinds, key=lambda k: growth[k] or 0.0)
    ratio = growth[worst] or 0.0
    return [(name, f"×{_r(ratio)} at worst ({worst}; {len(kinds)} shapes)", ratio < 1.5)]


PAIRS_PER_CPU_SECOND = 100e6
"""A predicate with neither a band nor a key: pairs its window reaches, per CPU second."""


def _product_row(cases: t.Sequence[t.Mapping[str, t.Any]]) -> list[tuple[str, str, bool | None]]:
    """Pairs the window reaches (DuckDB's count) over our whole run's CPU seconds: a floor on
    the rate the operator evaluates them at (the run's CPU also reads, writes and plans). Not
    judged (–) where the run has no CPU figure (a cluster's, a failed one) or a wrong result."""
    rows: list[tuple[str, str, bool | None]] = []
    name = (
        "shapes: a predicate with neither a band nor a key, ≥ 100 M pairs its window reaches "
        "a CPU second"
    )
    for c in cases:
        if _kind(c)[0] != "product":
            continue
        cpu = c["engines"].get("streamjoin", {}).get("cpu_seconds")
        pairs = c.get("reached_pairs")
        if not cpu or not pairs or c.get("results_agree") is False:
            rows.append((name, f"no figure (CPU s {cpu}, pairs {pairs})", None))
            continue
        rate = pairs / cpu
        shown = f"{rate / 1e6:.1f} M ({pairs:,} pairs, {cpu} CPU s)"
        rows.append((name, shown, rate >= PAIRS_PER_CPU_SECOND))
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
