"""The Nexmark section of RESULTS.md: each query as published, ours beside Spark's native join
where Spark runs it, Flink's published per-core figure, and the edits each query needed."""

from __future__ import annotations

import typing as t

from benchmarks.nexmark_queries import NOT_RUN, QUERIES

if t.TYPE_CHECKING:
    from collections.abc import Mapping

FLINK_PER_CORE = {"q3": 152_000, "q4": 34_000, "q8": 146_000, "q9": 14_000, "q20": 19_000}
"""Flink 1.13's events per second per core (nexmark/nexmark's guide; ANCHORS.md G4)."""

NOTE = (
    "Each query is the SELECT of the public suite (nexmark/nexmark's Flink SQL) with the edits "
    "listed below it; the generator has the suite's columns and event sizes. *Events* count "
    "all three kinds, as Nexmark does (a query reads only its streams). *Exact*: the output "
    "equals, row for row, DuckDB's answer to the published text over the whole input. Flink's "
    "figure is from a cluster of 8 one-slot task managers, quoted, not measured here."
)


def nexmark_table(
    report: Mapping[str, t.Any],
    fmt: t.Callable[[t.Any], str],
    warm: Mapping[str, t.Any] | None = None,
) -> list[str]:
    """The table of a ``nexmark`` report (with the events/s of a ``--warm`` one, `warm`, in a
    column of their own), then the edits and the queries not run."""
    lines = [
        NOTE,
        "",
        "| query | engine | events/s | warm events/s | events per CPU s | Flink per core | "
        "batch p50 / p99 ms | exact | ours ÷ Spark (warm) |",
        "|" + "---|" * 9,
    ]
    warm_cases = {c["case"]: c for c in (warm or {}).get("cases", [])}
    for c in report["cases"]:
        q = c["case"].removeprefix("nexmark-")
        events = c["input_rows"]
        hot = warm_cases.get(c["case"], {})
        for engine, r in c["engines"].items():
            if r.get("error"):
                lines.append(f"| {q} | {engine} | error: {r['error']} |" + " |" * 6)
                continue
            rate = events / r["seconds"] if r.get("seconds") else None
            per_cpu = events / r["cpu_seconds"] if r.get("cpu_seconds") else None
            exact = _exact(r)
            ratio = ""
            if engine == "streamjoin":
                ratio = _ratio(c) + (
                    f" ({_ratio(hot)})" if hot and not c.get("why_no_peer") else ""
                )
            lines.append(
                f"| {q} | {engine} | {fmt(rate)} | {_warm_rate(hot, engine, fmt)} | "
                f"{fmt(per_cpu)} | {fmt(FLINK_PER_CORE.get(q))} | "
                f"{fmt(r.get('batch_p50_ms'))} / {fmt(r.get('batch_p99_ms'))} | {exact} | "
                f"{ratio} |"
            )
    edits = [
        f"{q.name}: "
        + "; ".join(f"`{_one_line(e.old)}` → `{_one_line(e.new)}` ({e.why})" for e in q.edits)
        for q in QUERIES.values()
        if q.edits
    ]
    untouched = [q.name for q in QUERIES.values() if not q.edits]
    if untouched:
        edits.append(f"{', '.join(untouched)}: as published")
    edits += [f"{name}: not run: {why}" for name, why in NOT_RUN.items()]
    return [*lines, "", "Edits (`benchmarks/nexmark_queries.py`): " + ". ".join(edits) + "."]


def _warm_rate(case: Mapping[str, t.Any], engine: str, fmt: t.Callable[[t.Any], str]) -> str:
    """`engine`'s events/s in a ``--warm`` report's `case` (– where it has none)."""
    r = case.get("engines", {}).get(engine, {})
    if r.get("error"):
        return "error"
    return fmt(case["input_rows"] / r["seconds"]) if r.get("seconds") else "–"


def nexmark_target(report: Mapping[str, t.Any]) -> tuple[str, str, bool]:
    """The acceptance line: every query of the issue run from its published SQL, exact."""
    ran = {c["case"].removeprefix("nexmark-"): c.get("results_agree") for c in report["cases"]}
    wanted = ("q3", "q4", "q7", "q8", "q9", "q20")
    exact = [q for q in wanted if ran.get(q)]
    missing = [q for q in wanted if q not in ran]
    numbers = f"exact: {', '.join(exact) or 'none'}"
    if missing:
        numbers += f"; not run: {', '.join(missing)}"
    return (
        "nexmark: q3, q4, q7, q8, q9, q20 from their published SQL; results equal DuckDB's answer",
        numbers,
        not missing and len(exact) == len(wanted),
    )


def _exact(r: Mapping[str, t.Any]) -> str:
    if r.get("stopped_early"):
        return "unchecked"
    if r.get("unchecked"):
        return f"unchecked ({r['unchecked']})"
    missing, extra = r.get("missing_rows"), r.get("extra_rows")
    if missing is None:
        return "–"
    if missing == extra == 0:
        return "yes"
    return f"**no** ({missing} missing, {extra} extra)"


def _ratio(c: Mapping[str, t.Any]) -> str:
    if c.get("why_no_peer"):
        return f"no Spark peer: {c['why_no_peer']}"
    throughput = c.get("ratios", {}).get("throughput")
    if throughput is None:
        return "–"
    shown = f"×{throughput:g}"
    return f"**{shown}**" if throughput < 1 else shown


def _one_line(text: str) -> str:
    return " ".join(text.split())


FASTER = ("q3", "q7", "q8", "q20")
"""The queries whose backlog the issue asks ≥ 2× Spark native's events/s on."""


def nexmark_speed_target(report: Mapping[str, t.Any]) -> tuple[str, str, bool | None]:
    """The acceptance line of events/s against Spark native (`FASTER`), cold JVMs or, for a
    ``--warm`` report, warm ones."""
    ratios = {
        c["case"].removeprefix("nexmark-"): c.get("ratios", {}).get("throughput")
        for c in report["cases"]
    }
    got = [ratios.get(q) for q in FASTER]
    numbers = ", ".join(f"{q} ×{r}" for q, r in zip(FASTER, got, strict=True))
    how = "warm JVMs (`--warm`)" if report.get("warm") else "each engine's JVM cold"
    known = [r for r in got if r is not None]
    met = all(r >= 2 for r in known) if len(known) == len(got) else None
    return (
        f"nexmark backlog, {how}: events/s ≥ 2× Spark native's for q3, q7, q8, q20",
        numbers,
        met,
    )
