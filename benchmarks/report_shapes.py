"""The ``shapes`` benchmark (`benchmarks.workloads`: `long`'s stream over every two-way shape
the join operator serves): its page beside RESULTS.md, a row per shape with ours · the peer's,
and its targets in RESULTS.md (issue: one join operator)."""

from __future__ import annotations

import re
import typing as t

from benchmarks.harness_figures import shed_pairs
from benchmarks.report_backlog import long_table
from benchmarks.report_format import Report, _fmt, commit_of
from benchmarks.report_provenance import commands

NATIVE, FOREACH = "spark-native", "spark-foreach"
SAME_COST = (
    "equi",
    "bandkey",
    "band",
    "or",
    "left-equi",
    "full-equi",
    "left-band",
    "full-band",
    "shed",
)
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
    order = sorted(parts, key=_numbered)
    merged = dict(shapes or parts[order[0]])
    cases = {c["case"]: {**c, "source": "shapes.json"} for c in (shapes or {}).get("cases", [])}
    for f in order:
        cases |= {c["case"]: {**c, "source": f} for c in parts[f]["cases"]}
    merged["cases"] = list(cases.values())
    merged["parts"] = {f: {k: v for k, v in parts[f].items() if k != "cases"} for f in order}
    return merged


def _numbered(name: str) -> list[t.Any]:
    """A file name's sort key with its numbers as numbers (``…-2`` before ``…-10``)."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name)]


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
    supplied: dict[str, list[str]] = {}
    for c in report["cases"]:
        supplied.setdefault(_source(c), []).append(str(c["case"]))
    parts = [
        f"`{f}` (commit {commit_of(r)}, peer time limit {_fmt(r.get('peer_time_limit_s'))} s): "
        + ", ".join(n.removeprefix("shapes-") for n in supplied[f])
        for f, r in report.get("parts", {}).items()
        if f in supplied
    ]
    cases_of = (
        " Cases from runs of some cases (`--cases`; other runs, on other days: compare rows of "
        f"one run only): {'; '.join(parts)}; the rest from `shapes.json`."
    )
    return [
        "## Every two-way shape (shapes)",
        "",
        f"shapes: {report.get('size', 'full')} size; `shapes.json`: peer time limit "
        f"{_fmt(limit)} s, commit {commit_of(report)}. `long`'s stream (many small batches "
        "against a growing state) "
        "over each shape, within 5 minutes and over the full history: `bandkey` a band within "
        "few keys (Spark: an equi join on the key, the band a residual), `or` an OR of "
        "equalities, `left-…` / `full-…` outer joins, `product` a predicate with no band of "
        "values and no key, only the time window (`l.x * r.x > c`, within 10 s), `shed` the equi "
        "shape shedding probes at a budget of 40 % of a batch's work. The peer is "
        "Spark's native join where it runs the shape, else the foreachBatch join; the other 10 s "
        "and the 1 h cases are ours alone (how a batch grows with the window; the stream spans "
        "10 minutes of event time, so a 1 h window keeps its whole history). *Steady*: the "
        "batches after the warm-up." + (cases_of if parts else ""),
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
        known = {k: v for k, v in gains.items() if v is not None}
        at = min(known, key=lambda k: known[k]) if known else None
        worst = known[at] if at else None
        # (Beside it, the steady batches alone: the whole run's rows/s also carries each
        # engine's fixed costs, its first batch and its time outside batches.)
        slower = [1 / v for c in foreach if (v := _ratio(c, FOREACH, _steady))]
        rows.append(
            (
                "shapes: every other shape, throughput ≥ 30× the foreachBatch join",
                f"×{_r(worst)} at worst ({'-'.join(at) if at else '–'}; {len(gains)} shapes); "
                "steady batch p50, the peer's "
                f"over ours: ×{_r(min(slower, default=None))} at worst",
                None if worst is None else worst >= 30,
            )
        )
    equi: dict[tuple[str, str], float] = {}
    for c in cases:
        kind, window = _kind(c)
        if kind == "equi" and (steady := _steady(c, "streamjoin")):
            equi[window, _source(c)] = steady
    over = {
        (k, w): ours / equi[w, _source(c)]
        for c in cases
        for k, w in [_kind(c)]
        if k in SAME_COST
        and k != "equi"
        and (w, _source(c)) in equi
        and (ours := _steady(c, "streamjoin")) is not None
    }
    if over:
        worst_kind = max(over, key=lambda kw: over[kw])
        rows.append(
            (
                "shapes: every shape with an equality or a band, steady batch p50 ≤ 2× the equi "
                "shape's (same window, same run: 10 s, 5 minutes, 1 h, the whole history)",
                f"×{_r(over[worst_kind])} at worst ({'-'.join(worst_kind)}; {len(over)} cases)",
                over[worst_kind] <= 2,
            )
        )
    rows += _growth_row(cases)
    rows += _product_row(cases)
    rows += _shed_row(cases)
    return rows


def _shed_row(cases: t.Sequence[t.Mapping[str, t.Any]]) -> list[tuple[str, str, bool | None]]:
    """The shedding shape: the share of the exact result it wrote, and whether its rows are the
    exact result's less as many as its skipped probes counted (`harness._checked`)."""
    rows: list[tuple[str, str, bool | None]] = []
    for c in cases:
        if _kind(c)[0] != "shed":
            continue
        ours = c["engines"].get("streamjoin", {})
        exact = sum((c.get("expected") or {}).values())
        written = sum((ours.get("out") or {}).values())
        shed = ours.get("shed") or {}
        counted = shed_pairs(shed)
        skipped = sum(n for d in shed.values() for k, n in d.items() if "." not in k)
        agree = c.get("results_agree")
        shown = (
            f"wrote {written:,} of {exact:,} pairs ({written / exact:.0%}; about {skipped:,} "
            f"rows did not probe): {_fmt(ours.get('extra_rows'))} rows extra, "
            f"{_fmt(ours.get('missing_rows'))} missing against {counted:,} counted"
            if exact
            else "no exact result"
        )
        rows.append(
            (
                "shapes: shedding at 40 % of a batch's work, no row wrong and no pair lost "
                "uncounted (its rows the exact result's, less the pairs its skipped probes "
                "counted)",
                shown,
                agree,
            )
        )
    return rows


def _growth_row(cases: t.Sequence[t.Mapping[str, t.Any]]) -> list[tuple[str, str, bool | None]]:
    """Each shape's steady batch within 1 h over its batch within 10 s, both of one run (ours
    alone); not judged (–) where one has no figure or they come from different runs."""
    ours = {_kind(c): c for c in cases}
    kinds = [k for k in SAME_COST if (k, "10s") in ours]
    if not kinds:
        return []
    growth: dict[str, float | None] = {}
    for kind in kinds:
        short, long = ours[kind, "10s"], ours.get((kind, "3600s"))
        a, b = _steady(short, "streamjoin"), long and _steady(long, "streamjoin")
        same = long is not None and _source(short) == _source(long)
        growth[kind] = b / a if a and b and same else None
    name = (
        "shapes: every shape with an equality or a band, steady batch p50 grows < 1.5× from a "
        "10 s window to a 1 h one (the stream's whole 10 minutes)"
    )
    missing = [k for k, v in growth.items() if v is None]
    if missing:
        return [(name, f"no figure of one run for {', '.join(missing)}", None)]
    worst = max(kinds, key=lambda k: growth[k] or 0.0)
    ratio = growth[worst] or 0.0
    return [(name, f"×{_r(ratio)} at worst ({worst}; {len(kinds)} shapes)", ratio < 1.5)]


def _source(case: t.Mapping[str, t.Any]) -> str:
    """The report file a (merged) case came from."""
    return str(case.get("source", "shapes.json"))


PAIRS_PER_CPU_SECOND = 100e6
"""A predicate with no band of values and no key: pairs tested per CPU second of the probes."""

TESTED_PER_REACHED = 1.5
"""The same case: pairs tested per pair its window reaches, at most (a time bucket at the
window's edge holds rows just outside it); at least 1, as each pair reached is tested."""


def _product_row(cases: t.Sequence[t.Mapping[str, t.Any]]) -> list[tuple[str, str, bool | None]]:
    """The pairs our operator's probes tested per CPU second of theirs (`ProbeWork`), and the
    pairs tested per pair the window reaches (DuckDB's count); beside them, the pairs reached
    over the whole run's CPU (a floor: the run's CPU also reads, writes and plans). Not judged
    (–) where the run has no figure (a cluster's, a failed one) or a wrong result."""
    rows: list[tuple[str, str, bool | None]] = []
    name = (
        "shapes: a predicate with no band of values and no key (only the time window), ≥ 100 M "
        f"pairs tested a CPU second of the probes, testing 1× to {TESTED_PER_REACHED}× the "
        "pairs its window reaches"
    )
    for c in cases:
        if _kind(c)[0] != "product":
            continue
        ours = c["engines"].get("streamjoin", {})
        cpu, pairs = ours.get("cpu_seconds"), c.get("reached_pairs")
        tested, probe_cpu = ours.get("probe_pairs"), ours.get("probe_cpu_seconds")
        if not probe_cpu or not tested or not pairs or c.get("results_agree") is False:
            shown = f"no figure (probes' CPU s {probe_cpu}, tested {tested}, reached {pairs})"
            rows.append((name, shown, None))
            continue
        rate, share = tested / probe_cpu, tested / pairs
        floor = f"; reached a CPU s of the whole run {pairs / cpu / 1e6:.1f} M" if cpu else ""
        shown = (
            f"{rate / 1e6:.1f} M ({tested:,} pairs, {probe_cpu} CPU s); tested ×{share:.2f} the "
            f"{pairs:,} reached{floor}"
        )
        met = rate >= PAIRS_PER_CPU_SECOND and 1 <= share <= TESTED_PER_REACHED
        rows.append((name, shown, met))
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
