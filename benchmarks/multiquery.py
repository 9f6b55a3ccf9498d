"""The ``multiquery`` benchmark of issue 5: N multi-way joins over TPC-H streams, three ways.

``python -m benchmarks.multiquery [--quick|--tiny] [--queries 10,50,100] [--modes ...]`` (or
``streamjoin bench multiquery``); the last line printed is one JSON object. Quick and full runs
also write it to ``benchmarks/results/multiquery-<size>.json`` (or ``--out``) and regenerate
RESULTS.md (`benchmarks.report`). The streams and queries are in `benchmarks.multiquery_jobs`.

The modes, CLASH's three baselines on our engine, all on the same backlog:

- ``alone``: each query in its own job (own checkpoint, own state), one after another; its
  figures are the sums over the N jobs (time, state) and the pooled batch times;
- ``simple``: one job with all queries, greedy probe orders and no shared probe prefixes
  (``streamjoin.multiway.optimizer = greedy``, ``streamjoin.share = false``);
- ``global``: one job with all queries, the ILP's probe orders and shared prefixes (the
  defaults, ``ilp`` and ``true``).

Each mode runs in a fresh Python + JVM process (its peak memory is its own) that first runs one
query over a one-file backlog, so that no mode measures a cold JVM. Throughput is the backlog's
input rows (each stream once) over the mode's wall time, so the three are comparable: ``alone``
reads each stream once per query that uses it. ``alone`` runs its jobs one at a time, so its
peak memory is that of the largest job, not of N jobs running side by side; the state bytes
(summed over its jobs) are what running them side by side would keep. Each mode's CPU seconds
(its process and JVM, warm-up excluded) are reported beside the wall time: on a machine shared
with other work they vary less.

Checks: every mode's per-query output counts must equal each other and the exact counts of a
DuckDB batch join. The predicted probe loads are CLASH's cost model (`multiquery_jobs.
probe_loads`); it does not see single-relation filters, so it counts every variant of a template
as the same query and the global load does not grow with N.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import typing as t
from dataclasses import asdict

from benchmarks.harness import ROOT, machine, source_commit
from benchmarks.multiquery_figures import mode_figures, ratios, targets
from benchmarks.multiquery_jobs import SIZES, exact_counts, make_backlog, probe_loads
from benchmarks.multiquery_jobs import query_specs as make_specs
from benchmarks.multiquery_modes import (
    MODES,
    _child,
    _warmup,
    mode_jobs,
    run_mode,
    run_mode_process,
)

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from benchmarks.data import Backlog
    from benchmarks.multiquery_jobs import QuerySpec

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def _say(progress: t.TextIO | None, text: str) -> None:
    if progress is not None:
        print(text, file=progress, flush=True)


def switches_read() -> bool:
    """Whether the engine's source reads the mode switches at all (if not, simple = global)."""
    import streamjoin

    src = os.path.dirname(streamjoin.__file__)
    for folder, _, files in os.walk(src):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    if "streamjoin.share" in f.read():
                        return True
    return False


def run_queries(
    n: int,
    size: str,
    backlog: Backlog,
    root: str,
    modes: Sequence[str],
    *,
    in_process: bool = False,
    progress: t.TextIO | None = None,
) -> dict[str, t.Any]:
    """Every mode on `n` queries: figures, checks and ratios."""
    window = SIZES[size].window_seconds
    specs = make_specs(n, window)
    work = os.path.join(root, "work", f"n{n}")
    expected = exact_counts(specs, backlog.streams)
    rates = {name: rows / backlog.files for name, rows in backlog.rows.items()}
    loads = probe_loads(specs, backlog.streams, rates)
    warm = None if in_process else _warmup(backlog, specs, work)
    results: dict[str, dict[str, t.Any]] = {}
    for mode in modes:
        _say(progress, f"[multiquery n={n}] {mode} …")
        jobs = mode_jobs(mode, specs, backlog, work)
        if in_process:
            runs, cpu = run_mode(mode, jobs)
            measured: dict[str, t.Any] = {
                "runs": [asdict(r) for r in runs],
                "cpu_seconds": round(cpu, 1),
            }
        else:
            measured = run_mode_process(mode, jobs, warm)
        if measured.get("error"):
            results[mode] = {"mode": mode, "error": measured["error"]}
            _say(progress, f"[multiquery n={n}] {mode}: ERROR {measured['error']}")
            continue
        figures = mode_figures(mode, jobs, measured["runs"], backlog.total_rows)
        cpu = measured["cpu_seconds"]
        figures["cpu_seconds"] = cpu
        figures["rows_per_cpu_second"] = round(backlog.total_rows / cpu, 1) if cpu else None
        figures["peak_rss_mb"] = measured.get("peak_rss_mb")
        results[mode] = figures
        _say(progress, f"[multiquery n={n}] {mode}: {_brief(figures)}")
    outs = [r["out"] for r in results.values() if "out" in r]
    return {
        "queries": n,
        "templates": {tpl: sum(s.template == tpl for s in specs) for tpl in _templates(specs)},
        "expected": expected,
        "expected_rows": sum(expected.values()),
        "results_agree": bool(outs) and all(o == outs[0] for o in outs),
        "exact": bool(outs) and all(o == expected for o in outs),
        "probe_load": loads,
        "modes": results,
        "ratios": ratios(results),
    }


def _templates(specs: Sequence[QuerySpec]) -> list[str]:
    return list(dict.fromkeys(s.template for s in specs))


def _brief(r: dict[str, t.Any]) -> str:
    if r.get("error"):
        return f"ERROR {r['error']}"
    return (
        f"{r['throughput']} rows/s, {r['seconds']} s ({r['cpu_seconds']} CPU s) over "
        f"{r['jobs']} job(s), batches p50/p99 "
        f"{r['batch_p50_ms']}/{r['batch_p99_ms']} ms, out {r['out_rows']}, state "
        f"{r['state_bytes']} B, peak {r['peak_rss_mb']} MB"
    )


def run(
    size: str = "quick",
    queries: Sequence[int] | None = None,
    modes: Sequence[str] = MODES,
    *,
    root: str | None = None,
    in_process: bool = False,
    progress: t.TextIO | None = None,
) -> dict[str, t.Any]:
    """The whole benchmark at `size`; the JSON object printed last.

    Args:
        size: ``tiny``, ``quick`` or ``full`` (`multiquery_jobs.SIZES`).
        queries: the query counts to run (default: the size's).
        modes: some of `MODES`.
        root: where backlogs and work directories go (default under the harness's root).
        in_process: run every mode on this process's Spark session (the test), with no
            warm-up and no memory figure.
        progress: receives a line per mode run.
    """
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; one of: {', '.join(SIZES)}")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown modes {unknown}; choose from {', '.join(MODES)}")
    started = time.monotonic()
    load_before = os.getloadavg()
    root = root or os.path.join(ROOT, "multiquery", size)
    _say(progress, f"[multiquery] generating the {size} backlog …")
    backlog = make_backlog(root, size)
    counts = list(queries or SIZES[size].queries)
    runs = [
        run_queries(n, size, backlog, root, modes, in_process=in_process, progress=progress)
        for n in counts
    ]
    s = SIZES[size]
    return {
        "benchmark": "multiquery",
        "size": size,
        "scale_factor": s.sf,
        "span_seconds": s.span_seconds,
        "files": s.files,
        "window_seconds": s.window_seconds,
        "streams": dict(backlog.rows),
        "input_rows": backlog.total_rows,
        "machine": machine(),
        "commit": source_commit(),
        "load_average": {"before": _rounded(load_before), "after": _rounded(os.getloadavg())},
        "switches_read": switches_read(),
        "runs": runs,
        "targets": targets(runs),
        "wall_seconds": round(time.monotonic() - started, 1),
    }


def _rounded(values: Sequence[float]) -> list[float]:
    return [round(v, 2) for v in values]


def summary_lines(report: dict[str, t.Any]) -> list[str]:
    """One human line per query count."""
    lines = []
    for r in report["runs"]:
        modes = ", ".join(f"{m} {f.get('throughput')} rows/s" for m, f in r["modes"].items())
        check = "exact" if r["exact"] else "agree" if r["results_agree"] else "RESULTS DIFFER"
        gap = r["ratios"]["throughput_global_over_alone"]
        lines.append(f"{r['queries']} queries: {modes}; global/alone ×{gap}; {check}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.multiquery", description=__doc__.splitlines()[0]
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", dest="size", action="store_const", const="quick")
    group.add_argument("--tiny", dest="size", action="store_const", const="tiny")
    parser.add_argument("--queries", help="comma-separated query counts (default by size)")
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}"
    )
    parser.add_argument("--root", help="where backlogs and work directories go")
    parser.add_argument("--out", help="JSON file (default: results/multiquery-<size>.json)")
    parser.add_argument("--child", nargs=2, metavar=("PLAN", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(*args.child)
    size = args.size or "full"
    queries = [int(n) for n in args.queries.split(",")] if args.queries else None
    report = run(size, queries, args.modes.split(","), root=args.root, progress=sys.stderr)
    default = os.path.join(RESULTS, f"multiquery-{size}.json") if size != "tiny" else None
    target = args.out or default
    if target:
        with open(target, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    if target and os.path.dirname(os.path.abspath(target)) == RESULTS:
        from benchmarks.report import write

        write(plot=False)
    for line in summary_lines(report):
        print(line, file=sys.stderr)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
