"""The ``multiquery`` benchmark of issue 5: N multi-way joins over TPC-H streams, three ways.

``python -m benchmarks.multiquery [--quick|--tiny] [--queries 10,50,100] [--modes ...]`` (or
``streamjoin bench multiquery``); the last line printed is one JSON object. Quick and full runs
also write it to ``benchmarks/results/multiquery-<size>.json`` (or ``--out``) and regenerate
RESULTS.md (`benchmarks.report`). The streams and queries are in `benchmarks.multiquery_jobs`.

The modes, CLASH's three baselines on our engine, all on the same backlog:

- ``alone``: each query in its own job (own checkpoint, own state), one after another; its
  figures are the sums over the N jobs (time, state) and the pooled batch times;
- ``simple``: one job with all queries, greedy probe orders and no shared probe prefixes
  (``streamjoin.multiway.optimizer = greedy``, ``streamjoin.multiway.share = false``);
- ``global``: one job with all queries, the ILP's probe orders and shared prefixes (the
  defaults, ``ilp`` and ``true``), with the MIR stores the ILP picks;
- ``base`` (on request): as ``global``, but over base stores only
  (``streamjoin.multiway.mirs = false``): what the MIR stores gain or cost.
- ``broadcast`` (on request): as ``global``, but every probe goes to every partition of a store
  read from its files (``streamjoin.multiway.partitioned = false``): what partitioned, cached
  stores gain or cost.
- ``routed`` (on request): as ``global``, but every probe that carries its store's attribute
  goes to that one partition, however small the batch (``streamjoin.multiway.routeRows = 1``;
  by default a delta under 100,000 rows is broadcast).

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
import contextlib
import itertools
import json
import os
import shutil
import sys
import time
import typing as t
from dataclasses import asdict

from benchmarks.harness import ROOT, _percentile, machine, run_child
from benchmarks.multiquery_jobs import SIZES, exact_counts, job_text, make_backlog, probe_loads
from benchmarks.multiquery_jobs import query_specs as make_specs

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from benchmarks.data import Backlog
    from benchmarks.engines import EngineRun
    from benchmarks.multiquery_jobs import QuerySpec

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
MODES = ("alone", "simple", "global", "base", "broadcast", "routed")
DEFAULT_MODES = ("alone", "simple", "global")
"""CLASH's three baselines; ``base``, ``broadcast`` and ``routed`` on request."""
_ILP = {"streamjoin.multiway.optimizer": "ilp", "streamjoin.multiway.share": "true"}
MODE_CONF: dict[str, dict[str, str]] = {
    "alone": _ILP,
    "simple": {"streamjoin.multiway.optimizer": "greedy", "streamjoin.multiway.share": "false"},
    "global": _ILP,
    "base": _ILP | {"streamjoin.multiway.mirs": "false"},
    "broadcast": _ILP | {"streamjoin.multiway.partitioned": "false"},
    "routed": _ILP | {"streamjoin.multiway.routeRows": "1"},
}
"""The session settings each mode runs under (read by the engine at every batch)."""

# (job text with "{out}" for its result directory, workdir) of each job a mode runs.
Jobs = list[tuple[str, str]]


def _say(progress: t.TextIO | None, text: str) -> None:
    if progress is not None:
        print(text, file=progress, flush=True)


def mode_jobs(mode: str, specs: Sequence[QuerySpec], backlog: Backlog, work: str) -> Jobs:
    """The jobs of `mode`: one per query for ``alone``, else one with every query."""
    groups = [[spec] for spec in specs] if mode == "alone" else [list(specs)]
    jobs = []
    for group in groups:
        name = group[0].sink if mode == "alone" else "all"
        jobs.append((job_text(group, backlog.streams, "{out}"), os.path.join(work, mode, name)))
    return jobs


def _cpu_seconds() -> float:
    """CPU time (user + system) of this process and its children so far: the JVM's included."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            total += times.user + times.system
    return total


def run_mode(
    mode: str, jobs: Jobs, warmup: tuple[str, str] | None = None
) -> tuple[list[EngineRun], float]:
    """Run `jobs` one after another on this process's session under `mode`'s settings (restored
    afterwards), `warmup` first, unmeasured; the runs, and the CPU seconds they took (less
    sensitive than wall time to other work on the machine)."""
    from benchmarks.engines import run_engine, session

    spark = session()
    saved = {key: spark.conf.get(key, None) for key in MODE_CONF[mode]}
    for key, value in MODE_CONF[mode].items():
        spark.conf.set(key, value)
    runs = []
    cpu = 0.0
    try:
        for i, (text, workdir) in enumerate([*([warmup] if warmup else []), *jobs]):
            if i == (1 if warmup else 0):
                cpu = _cpu_seconds()
            shutil.rmtree(workdir, ignore_errors=True)
            os.makedirs(workdir)
            out = os.path.join(workdir, "out")
            runs.append(run_engine("streamjoin", text.replace("{out}", out), workdir))
        cpu = _cpu_seconds() - cpu
    finally:
        for key, old in saved.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
    return (runs[1:] if warmup else runs), cpu


def run_mode_process(mode: str, jobs: Jobs, warmup: tuple[str, str] | None) -> dict[str, t.Any]:
    """`run_mode` in a child process: ``runs`` (each as a dict), ``cpu_seconds``,
    ``peak_rss_mb`` (the process tree's), or ``error``."""
    first = jobs[0][1]
    os.makedirs(first, exist_ok=True)
    plan, result = os.path.join(first, "..", "plan.json"), os.path.join(first, "..", "runs.json")
    with open(plan, "w", encoding="utf-8") as f:
        json.dump({"mode": mode, "jobs": jobs, "warmup": warmup}, f)
    if os.path.exists(result):
        os.remove(result)
    import streamjoin

    # The child imports the same benchmarks and streamjoin as this process, whatever another
    # editable install of the package may point to.
    src = os.path.dirname(os.path.dirname(streamjoin.__file__))
    code, tail, peak_mb = run_child(["benchmarks.multiquery", "--child", plan, result], [src])
    if code != 0 or not os.path.exists(result):
        return {"error": f"exit {code}: {tail}"}
    with open(result, encoding="utf-8") as f:
        measured: dict[str, t.Any] = json.load(f)
    return measured | {"peak_rss_mb": peak_mb}


def _child(plan_file: str, result_file: str) -> int:
    with open(plan_file, encoding="utf-8") as f:
        plan = json.load(f)
    warmup = tuple(plan["warmup"]) if plan["warmup"] else None
    jobs = [(text, workdir) for text, workdir in plan["jobs"]]
    runs, cpu = run_mode(plan["mode"], jobs, t.cast("tuple[str, str] | None", warmup))
    with open(result_file, "w", encoding="utf-8") as f:
        json.dump({"runs": [asdict(r) for r in runs], "cpu_seconds": round(cpu, 1)}, f)
    return 0 if all(r.error is None for r in runs) else 1


def _by_sink(text: str, counts: dict[str, int]) -> dict[str, int]:
    """A run's per-query counts (keyed by query name, q1, q2, ...) keyed by sink instead."""
    from streamjoin.sql import parse_job

    return {q.sink: int(counts.get(q.name, 0)) for q in parse_job(text, "<mq>").queries}


def mode_figures(
    mode: str, jobs: Jobs, runs: Sequence[dict[str, t.Any]], input_rows: int
) -> dict[str, t.Any]:
    """Time, throughput, batch times, state and per-query counts of one mode's runs."""
    errors = [r["error"] for r in runs if r.get("error")]
    if errors or len(runs) != len(jobs):
        return {"mode": mode, "error": errors[0] if errors else "missing runs"}
    seconds = sum(float(r["seconds"]) for r in runs)
    batches = [float(ms) for r in runs for ms in r["batch_ms"]]
    out: dict[str, int] = {}
    for (text, _), r in zip(jobs, runs, strict=True):
        out |= _by_sink(text, r["out"])
    return {
        "mode": mode,
        "jobs": len(jobs),
        "seconds": round(seconds, 2),
        "throughput": round(input_rows / seconds, 1) if seconds else None,
        "rows_read": sum(int(r["rows_in"]) for r in runs),
        "batches": len(batches),
        "batch_p50_ms": _percentile(batches, 50),
        "batch_p99_ms": _percentile(batches, 99),
        "state_rows": sum(int(r["state_rows"]) for r in runs),
        "state_bytes": sum(int(r["state_bytes"]) for r in runs),
        "out_rows": sum(out.values()),
        "out": out,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def ratios(modes: dict[str, dict[str, t.Any]]) -> dict[str, float | None]:
    """Global against the other two: throughput (higher is better for global); CPU seconds,
    state and peak memory (the other mode's over global's)."""
    g, a, s = (modes.get(m, {}) for m in ("global", "alone", "simple"))
    return {
        "throughput_global_over_alone": _ratio(g.get("throughput"), a.get("throughput")),
        "throughput_global_over_simple": _ratio(g.get("throughput"), s.get("throughput")),
        "throughput_simple_over_alone": _ratio(s.get("throughput"), a.get("throughput")),
        "cpu_alone_over_global": _ratio(a.get("cpu_seconds"), g.get("cpu_seconds")),
        "cpu_simple_over_global": _ratio(s.get("cpu_seconds"), g.get("cpu_seconds")),
        "state_alone_over_global": _ratio(a.get("state_bytes"), g.get("state_bytes")),
        "state_simple_over_global": _ratio(s.get("state_bytes"), g.get("state_bytes")),
        "peak_alone_over_global": _ratio(a.get("peak_rss_mb"), g.get("peak_rss_mb")),
    }


def _warmup(backlog: Backlog, specs: Sequence[QuerySpec], work: str) -> tuple[str, str]:
    """The first query over a copy of each stream's first file."""
    paths = {}
    for name, folder in backlog.streams.items():
        paths[name] = os.path.join(work, "warmup-data", name)
        shutil.rmtree(paths[name], ignore_errors=True)
        os.makedirs(paths[name])
        first = sorted(os.listdir(folder))[0]
        shutil.copy2(os.path.join(folder, first), paths[name])
    return job_text(specs[:1], paths, "{out}"), os.path.join(work, "warmup")


def switches_read() -> bool:
    """Whether the engine's source reads the mode switches at all (if not, simple = global)."""
    import streamjoin

    src = os.path.dirname(streamjoin.__file__)
    for folder, _, files in os.walk(src):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    if "streamjoin.multiway.share" in f.read():
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


def targets(runs: Sequence[dict[str, t.Any]]) -> dict[str, t.Any]:
    """Issue 5's target: global ≥ 2.5× alone's throughput at 10 queries, the gap widening."""
    gaps = {r["queries"]: r["ratios"]["throughput_global_over_alone"] for r in runs}
    at10 = gaps.get(10)
    ordered = [gaps[n] for n in sorted(gaps)]
    widening = (
        all(a is not None and b is not None and b > a for a, b in itertools.pairwise(ordered))
        if len(ordered) > 1
        else None
    )
    return {
        "global_over_alone": gaps,
        "at_10_queries_ge_2_5": None if at10 is None else at10 >= 2.5,
        "gap_widens": widening,
    }


def run(
    size: str = "quick",
    queries: Sequence[int] | None = None,
    modes: Sequence[str] = DEFAULT_MODES,
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
        "--modes", default=",".join(DEFAULT_MODES), help=f"comma-separated, of {', '.join(MODES)}"
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
