"""The ``adhoc`` benchmark's ratios and targets (`benchmarks.adhoc`): shared's throughput over
each other mode's per N, and issue 33's targets, read off a report's runs."""

from __future__ import annotations

import itertools
import typing as t


def _number(ratio: object) -> float | None:
    """A ratio as a number (">x", a peer stopped at its limit: at least x)."""
    if isinstance(ratio, str):
        return float(ratio.lstrip(">"))
    return float(t.cast("float", ratio)) if ratio is not None else None


def targets(
    runs: dict[str, dict[str, t.Any]], ratios: dict[str, t.Any], queries: t.Sequence[int]
) -> dict[str, t.Any]:
    """Issue 33's targets: at 100 queries shared ≥ 10× Spark and ≥ 3× apart; the gaps widen
    with N; every added query's first results within 2 batches of its add."""
    out: dict[str, t.Any] = {}
    at = ratios.get("100", {})
    spark, apart = _number(at.get("vs_spark")), _number(at.get("vs_apart"))
    out["at_100_vs_spark_ge_10"] = None if spark is None else spark >= 10
    out["at_100_vs_apart_ge_3"] = None if apart is None else apart >= 3
    for peer in ("spark", "apart"):
        seq = [ratios.get(str(n), {}).get(f"vs_{peer}") for n in sorted(queries)]
        known = [v for v in seq if v is not None]
        out[f"gap_vs_{peer}_widens"] = _widens(known) if len(known) > 1 else None
    adds = [a for r in runs.values() for a in r.get("churn", {}).get("adds", [])]
    steps = [a["batches_to_first"] for a in adds]
    out["first_results_within_2_batches"] = (
        all(s is not None and s <= 2 for s in steps) if steps else None
    )
    return out


def _widens(ratios: t.Sequence[object]) -> bool | None:
    """Whether each ratio exceeds the one before; None when a bound (">x", a peer stopped at
    its limit) leaves a step undecided."""
    decided = True
    for a, b in itertools.pairwise(ratios):
        lo_a, lo_b = _number(a), _number(b)
        assert lo_a is not None and lo_b is not None
        exact_a = not isinstance(a, str)
        if lo_b > lo_a and exact_a:
            continue  # (b is at least lo_b, above a's exact value)
        if not isinstance(b, str) and lo_b <= lo_a:
            return False  # (b is exact and at most a's lower bound)
        decided = False
    return True if decided else None


def _rows_done(run: dict[str, t.Any], n: int, total: int) -> int | None:
    """Query-rows a run processed: each of its N queries over the rows it read. A run stopped
    at its limit counts what it had read by then (Spark: each query's own sources)."""
    if "wall_s" not in run:
        return None
    finished = run.get("finished", True)
    if "rows_read_per_query" in run and not finished:
        return int(run["rows_read_per_query"]) * n
    rows = run.get("rows_in", total) if finished or "rows_read_per_query" not in run else None
    if not finished and "rows_in" not in run:
        return None
    return None if rows is None else int(rows) * n


def _ratios(
    runs: dict[str, dict[str, t.Any]], queries: t.Sequence[int], total: int = 0
) -> dict[str, t.Any]:
    """Per N: shared's throughput (query-rows per second) over each other mode's. A peer
    stopped at the limit is judged by what it processed until then, which flatters it: its
    state, and so its cost per row, was still growing."""
    out = {}
    for n in queries:
        shared = runs.get(f"shared-{n}", {})
        row: dict[str, t.Any] = {}
        ours = _rows_done(shared, n, total)
        for other in ("apart", "spark"):
            r = runs.get(f"{other}-{n}", {})
            theirs = _rows_done(r, n, total)
            if ours is None or "wall_s" not in r:
                continue
            if not theirs:  # (stopped before it read a row, or its rows not recorded: a bound)
                row[f"vs_{other}"] = f">{r['wall_s'] / shared['wall_s']:.2f}"
                continue
            faster = (ours / shared["wall_s"]) / (theirs / r["wall_s"])
            row[f"vs_{other}"] = round(faster, 2)
            if not r.get("finished", True):
                row[f"{other}_at_limit"] = True
        out[str(n)] = row
    return out
