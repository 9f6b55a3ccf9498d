"""The figures of one engine run (`benchmarks.harness`): throughput, CPU, batch-time
percentiles, state per live tuple, and the steady batch times past the warm-up."""

from __future__ import annotations

import statistics
import typing as t

if t.TYPE_CHECKING:
    from benchmarks.workloads import Case


def _percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    i = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[i]


def steady_figures(batch_ms: t.Sequence[float], warmup: int) -> dict[str, t.Any]:
    """Batch times past the first `warmup` batches, whose JVM is still warming up, and their
    growth: the median of the last third over that of the first third, which tells whether a
    batch costs more as the state grows."""
    steady = list(batch_ms[warmup:])
    third = len(steady) // 3
    first = statistics.median(steady[:third]) if third else None
    last = statistics.median(steady[-third:]) if third else None
    return {
        "warmup_batches": warmup,
        "steady_batches": len(steady),
        "steady_batch_p50_ms": _percentile(steady, 50),
        "steady_batch_p99_ms": _percentile(steady, 99),
        "first_third_p50_ms": first,
        "last_third_p50_ms": last,
        "batch_growth": round(last / first, 2) if first and last is not None else None,
    }


def read_rows(run: dict[str, t.Any], case: Case) -> int:
    """The input rows of a run: its engine's count, except where a run that read the whole
    backlog counts more than the backlog holds of the job's streams. Spark counts a source's
    rows once per scan of it, so a query that reads a stream twice (Nexmark q7: bids joined
    with their own windows' highest price) reports each row twice."""
    counted = int(run["rows_in"])
    if run.get("stopped_early"):
        return counted
    held = sum(case.backlog.rows.get(s, 0) for s in streams_read(case))
    return held if 0 < held < counted else counted


def streams_read(case: Case) -> set[str]:
    """The streams the case's job reads (its joins' sides and its groups' streams)."""
    from streamjoin.sql import parse_job

    job = parse_job(case.job)
    read = {side.stream for q in job.queries for side in q.sides}
    return read | {s for g in job.group_queries for s in g.streams}


def raw_bytes_a_row(case: Case, live: t.Mapping[str, int] | None = None) -> float:
    """The raw (Arrow) bytes of a live tuple of the state, on average: each stream's raw bytes
    a row weighted by its `live` rows (the last batch's, by stream), else by the rows of the
    streams the job reads. (An average over every stream of the backlog would measure a
    Nexmark query that holds persons and auctions against bids, a fifth of their size.)"""
    raw, rows = case.backlog.raw_bytes, case.backlog.rows
    a_row = {s: raw[s] / rows[s] for s in raw if rows.get(s)}
    held = {s: n for s, n in (live or {}).items() if n and s in a_row}
    if held:
        return sum(n * a_row[s] for s, n in held.items()) / sum(held.values())
    read = streams_read(case) & set(a_row)
    if not read:
        return sum(raw.values()) / max(case.backlog.total_rows, 1)
    return sum(raw[s] for s in read) / sum(rows[s] for s in read)


def shed_totals(history: t.Sequence[t.Mapping[str, t.Any]]) -> dict[str, dict[str, int]]:
    """Per shedding query, over a run's batches: per direction the new rows that skipped their
    probe (``left``, ``right``) and the pairs they would have found (``left.pairs``, …)."""
    totals: dict[str, dict[str, int]] = {}
    for batch in history:
        for query, directions in (batch.get("shed") or {}).items():
            mine = totals.setdefault(query, {})
            for key, n in directions.items():
                mine[key] = mine.get(key, 0) + int(n)
    return {q: d for q, d in totals.items() if any(d.values())}


def shed_pairs(shed: t.Mapping[str, t.Mapping[str, int]]) -> int:
    """The pairs the skipped probes of a run's `shed_totals` counted, over its queries."""
    return sum(n for d in shed.values() for k, n in d.items() if k.endswith(".pairs"))


def figures(run: dict[str, t.Any], case: Case) -> dict[str, t.Any]:
    """Throughput, batch-time percentiles and state cost per live tuple of one engine run, and
    the steady-state figures where the case asks for them."""
    if run.get("error"):
        return run
    run = {**run, "rows_in": read_rows(run, case)}
    batch = run.get("batch_ms") or []
    steady = {} if case.warmup_batches is None else steady_figures(batch, case.warmup_batches)
    history = run.get("history") or []
    live = history[-1].get("state_rows") if history else None
    raw_per_row = raw_bytes_a_row(case, live if isinstance(live, dict) else None)
    live = run.get("state_rows") or 0
    state_bytes = run.get("state_bytes") or 0
    cpu = run.get("cpu_seconds")
    return {
        "engine": run["engine"],
        "rows": run["rows_in"],
        "seconds": round(run["seconds"], 2),
        "throughput": round(run["rows_in"] / run["seconds"], 1) if run["seconds"] else None,
        # CPU of the driver JVM and its Python process over the run
        # (`engines_measure.CpuClock`): the cores it kept busy (2 at most on the benchmark
        # machine), and rows per CPU second.
        "cpu_seconds": cpu,
        "cores_busy": round(cpu / run["seconds"], 2) if cpu and run["seconds"] else None,
        "rows_per_cpu_second": round(run["rows_in"] / cpu, 1) if cpu else None,
        "batches": len(batch),
        "batch_p50_ms": _percentile(batch, 50),
        "batch_p95_ms": _percentile(batch, 95),
        "batch_p99_ms": _percentile(batch, 99),
        "batch_ms": batch,
        "peak_rss_mb": run.get("peak_rss_mb"),
        "jvm_flags": run.get("jvm_flags"),
        "settings": run.get("settings") or {},
        "out": run.get("out"),
        "stopped_early": run.get("stopped_early", False),
        "state_rows": live,
        "state_bytes_per_tuple": round(state_bytes / live, 1) if live else None,
        "state_to_raw": round(state_bytes / live / raw_per_row, 2) if live else None,
        **steady,
        **({"shed": shed} if (shed := shed_totals(run.get("history") or [])) else {}),
        **({"history": run["history"]} if run.get("history") else {}),
        # (Our operator's probes alone, `engines_measure.ProbeWork`: pairs tested, their CPU.)
        **{k: run[k] for k in ("probe_pairs", "probe_cpu_seconds") if run.get(k) is not None},
        **({"startup_seconds": run["startup_seconds"]} if run.get("startup_seconds") else {}),
        **({"sql_edits": run["sql_edits"]} if run.get("sql_edits") else {}),
    }
