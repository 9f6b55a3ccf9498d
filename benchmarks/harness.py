"""Run a workload: every case by our engine and its peer, side by side, then the figures.

Each engine runs in a fresh Python + JVM process (so its peak memory is its own) on the same
backlog; the parent samples the resident memory of that process tree. Results are checked
against each other and against an exact batch join of the whole backlog computed by DuckDB (the
backlogs carry no late rows, so the streaming result must equal it). The last line printed is
one JSON object with every figure and the ratios.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import typing as t
from dataclasses import dataclass

from benchmarks.engines import MASTER_ENV
from benchmarks.workloads import SIZES, WORKLOADS

if t.TYPE_CHECKING:
    from benchmarks.workloads import Case

ROOT = os.path.join(tempfile.gettempdir(), "streamjoin-bench")


@dataclass
class _Peak:
    rss: int = 0


def _sample_tree(pid: int, peak: _Peak, done: threading.Event) -> None:
    import psutil

    try:
        proc = psutil.Process(pid)
    except psutil.Error:
        return
    while not done.is_set():
        try:
            procs = [proc, *proc.children(recursive=True)]
            rss = 0
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    rss += p.memory_info().rss
            peak.rss = max(peak.rss, rss)
        except psutil.Error:
            return
        done.wait(0.2)


# A peer's run is stopped after this long (its throughput is then that of its finished batches,
# its first ones, with the least state: a figure that favours the peer, and a result that cannot
# be checked). At full size the foreachBatch nested-loop joins of `band` and `theta` finish
# within the hour on this machine, so their ratios are over the whole backlog and checked; the
# longest window of `window-growth` does not (its kept rows grow to the whole history). Each of
# `long`'s six peer runs has the same bound; its foreachBatch joins compare about a fifth of the
# pairs `band`'s full backlog does (120 batches of 2,500 new rows against at most 300 s of kept
# ones), in twelve times as many batches.
PEER_TIME_LIMIT = {"tiny": None, "quick": 60.0, "full": 3600.0}


def peer_time_limit(size: str, given: float | None = None) -> float | None:
    """Seconds a peer may run at `size` (None: to the end): `given` if set (0: no limit)."""
    if given is None:
        return PEER_TIME_LIMIT[size]
    return given or None


def run_engine_process(
    engine: str,
    jobs: t.Sequence[tuple[str, str]],
    time_limit: float | None = None,
    live: dict[str, t.Any] | None = None,
    final: t.Sequence[bool] = (),
    log: str | None = None,
    master: str | None = None,
) -> list[dict[str, t.Any]]:
    """`engine` on each (job, workdir) of `jobs`, one after another in one child process; each
    run's EngineRun as a dict, with the process's peak memory. `live`: the fields of
    `benchmarks.engines.Live`, for a run on a live source (``--rate`` mode); `final[i]`: job
    i declares its input finished; `log`: a file for the child's whole stderr; `master`: a
    cluster's to run on (default: local mode)."""
    plan = []
    for i, (job, workdir) in enumerate(jobs):
        shutil.rmtree(workdir, ignore_errors=True)
        os.makedirs(workdir)
        job_file = os.path.join(workdir, "job.sql")
        with open(job_file, "w", encoding="utf-8") as f:
            f.write(job.replace("{out}", os.path.join(workdir, "out")))
        done = i < len(final) and final[i]
        item = {"job": job_file, "workdir": workdir, "time_limit": time_limit, "live": live}
        plan.append(item | {"final": done})
    first = jobs[0][1]
    plan_file, result = os.path.join(first, "plan.json"), os.path.join(first, "result.json")
    with open(plan_file, "w", encoding="utf-8") as f:
        json.dump(plan, f)
    args = ["benchmarks.engines", engine, plan_file, result]
    env = {MASTER_ENV: master} if master else None
    code, tail, peak_mb = run_child(args, extra_env=env, log=log)
    if not os.path.exists(result):
        return [{"engine": engine, "error": f"exit {code}: {tail}"} for _ in jobs]
    with open(result, encoding="utf-8") as f:
        runs: list[dict[str, t.Any]] = json.load(f)
    for run in runs:
        run["peak_rss_mb"] = peak_mb
    return runs


def run_child(
    args: t.Sequence[str],
    paths: t.Sequence[str] = (),
    extra_env: t.Mapping[str, str] | None = None,
    log: str | None = None,
) -> tuple[int, str, float]:
    """``python -m *args`` with this checkout's benchmarks (and `paths`) first on the path and
    `extra_env` in its environment, sampling its process tree's memory: (exit code, last lines of
    stderr, peak RSS in MB); its whole stderr is written to `log`, if given."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, **(extra_env or {}))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, *paths, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak, done = _Peak(), threading.Event()
    sampler = threading.Thread(target=_sample_tree, args=(proc.pid, peak, done), daemon=True)
    sampler.start()
    _, stderr = proc.communicate()
    done.set()
    sampler.join()
    if log is not None:
        with open(log, "w", encoding="utf-8") as f:
            f.write(stderr)
    tail = "\n".join(stderr.strip().splitlines()[-5:])
    return proc.returncode, tail, round(peak.rss / 2**20, 1)


def expected_counts(case: Case) -> dict[str, int] | None:
    """The exact result size of each query, from a batch join of the whole backlog in DuckDB;
    None when a query has no equality key (DuckDB then runs a nested loop over billions of
    pairs, for hours). Such queries are checked by their peer, the foreachBatch join, which is
    itself a nested loop evaluating the predicate as written, and by the reference at tiny size.
    """
    import duckdb
    import sqlglot

    from streamjoin.plan import plan_job
    from streamjoin.sql import parse_job

    job = parse_job(case.job.replace("{out}", "/dev/null"), case.name)
    if any(qp.strategy != "hash" for qp in plan_job(job).queries):
        return None
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    for s in job.streams:
        con.execute(
            f"CREATE VIEW {s.name} AS SELECT * FROM read_parquet('{s.option('path')}/*.parquet')"
        )
    counts = {}
    for q in job.queries:
        on = sqlglot.transpile(q.predicate, read="spark", write="duckdb")[0]
        # sqlglot renders unix_seconds(t) as CAST(EPOCH(t) AS BIGINT), and DuckDB's cast rounds
        # where Spark's unix_seconds floors (measured: 83 of 112,913 Nexmark q8 pairs moved).
        on = re.sub(r"CAST\(EPOCH\(([^()]*)\) AS BIGINT\)", r"CAST(FLOOR(EPOCH(\1)) AS BIGINT)", on)
        sql = (
            f"SELECT count(*) FROM {q.left.stream} AS {q.left.alias} "
            f"JOIN {q.right.stream} AS {q.right.alias} ON {on}"
        )
        row = con.execute(sql).fetchone()
        counts[q.name] = int(row[0]) if row else 0
    return counts


def exact_differences(
    exact: str,
    streams: t.Mapping[str, str],
    outs: t.Mapping[str, str],
    latest_by: t.Sequence[str] = (),
) -> tuple[int, dict[str, tuple[int, int]]]:
    """The size of DuckDB's answer to `exact` over the Parquet directories of `streams`, and per
    engine of `outs` (its output directory) the rows it lacks and the rows it has in excess,
    compared as multisets (``EXCEPT ALL`` both ways). With `latest_by`, the output is an
    updating result: only each key's row of the newest batch counts."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    for name, path in streams.items():
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/*.parquet')")
    con.execute(f"CREATE TABLE exact AS {exact}")
    row = con.execute("SELECT count(*) FROM exact").fetchone()
    size = int(row[0]) if row else 0
    columns = _types(con, "exact")
    diffs = {}
    for engine, out in outs.items():
        files = glob.glob(os.path.join(out, "**", "*.parquet"), recursive=True)
        source = f"read_parquet({files!r}, hive_partitioning = {'true' if latest_by else 'false'})"
        got = f"SELECT * FROM {source}"
        if latest_by:
            newest = f"PARTITION BY {', '.join(latest_by)} ORDER BY batch DESC"
            ranked = f"SELECT *, row_number() OVER ({newest}) AS _rank FROM {source}"
            got = f"SELECT * EXCLUDE (batch, _rank) FROM ({ranked}) WHERE _rank = 1"
        if not files:
            got = "SELECT * FROM exact LIMIT 0"
        # By position, in the exact answer's column types (Spark may write other ones).
        con.execute(f"CREATE OR REPLACE TABLE got AS {got}")
        got_cols = [r[0] for r in con.execute("DESCRIBE got").fetchall()]
        if len(got_cols) != len(columns):
            diffs[engine] = (size, -1)
            continue
        cast = ", ".join(
            f'CAST("{g}" AS {kind}) AS "{c}"'
            for g, (c, kind) in zip(got_cols, columns, strict=True)
        )
        want, have = "SELECT * FROM exact", f"SELECT {cast} FROM got"
        counts = []
        for x, y in ((want, have), (have, want)):
            r = con.execute(f"SELECT count(*) FROM ({x} EXCEPT ALL {y})").fetchone()
            counts.append(int(r[0]) if r else 0)
        diffs[engine] = (counts[0], counts[1])
    con.close()
    return size, diffs


def _types(con: t.Any, table: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in con.execute(f"DESCRIBE {table}").fetchall()]


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


def figures(run: dict[str, t.Any], case: Case) -> dict[str, t.Any]:
    """Throughput, batch-time percentiles and state cost per live tuple of one engine run, and
    the steady-state figures where the case asks for them."""
    if run.get("error"):
        return run
    batch = run.get("batch_ms") or []
    steady = {} if case.warmup_batches is None else steady_figures(batch, case.warmup_batches)
    raw_per_row = sum(case.backlog.raw_bytes.values()) / max(case.backlog.total_rows, 1)
    live = run.get("state_rows") or 0
    state_bytes = run.get("state_bytes") or 0
    cpu = run.get("cpu_seconds")
    return {
        "engine": run["engine"],
        "rows": run["rows_in"],
        "seconds": round(run["seconds"], 2),
        "throughput": round(run["rows_in"] / run["seconds"], 1) if run["seconds"] else None,
        # CPU of the driver JVM and its Python process over the run (`engines.CpuClock`): the
        # cores it kept busy (2 at most on the benchmark machine), and rows per CPU second.
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
        **({"history": run["history"]} if run.get("history") else {}),
    }


def _engines(case: Case, engines: t.Sequence[str] | None) -> list[str]:
    peers = () if case.peer is None else (case.peer,)
    return [e for e in ("streamjoin", *peers) if engines is None or e in engines]


def run_cases(
    cases: t.Sequence[Case],
    size: str,
    *,
    engines: t.Sequence[str] | None = None,
    progress: t.TextIO | None = None,
    peer_limit: float | None = None,
    master: str | None = None,
) -> list[dict[str, t.Any]]:
    """Every case by our engine and its peer; each checked and with its ratios. `peer_limit`:
    seconds after which a peer's run is stopped (default `PEER_TIME_LIMIT` by size; 0: none);
    `master`: a cluster's to run every engine on (default: local mode).

    At full size each engine run has a process of its own (a cold JVM for everyone, and its own
    peak memory), and each case's engines run one after the other, so that a machine whose
    speed drifts over the minutes of a run (shared hosts do) weighs on both sides of a ratio
    alike; smaller sizes run all of one engine's cases in one process, to be quick.
    """
    results: dict[str, dict[str, dict[str, t.Any]]] = {c.name: {} for c in cases}
    if size == "full":
        groups = [(e, [c]) for c in cases for e in _engines(c, engines)]
    else:
        every = dict.fromkeys(e for c in cases for e in _engines(c, engines))
        groups = [(e, [c for c in cases if e in _engines(c, engines)]) for e in every]
    for engine, group in groups:
        names = ", ".join(c.name for c in group)
        _say(progress, f"[{names}] running {engine} …")
        limit = None if engine == "streamjoin" else peer_time_limit(size, peer_limit)
        if limit is not None and len(group) > 1:
            # One budget for the group, so that a quick run stays quick.
            limit = max(20.0, limit / len(group))
        jobs = [(c.job, os.path.join(ROOT, "work", c.name, engine)) for c in group]
        final = [c.final for c in group]
        runs = run_engine_process(engine, jobs, limit, final=final, master=master)
        for case, run in zip(group, runs, strict=True):
            results[case.name][engine] = figures(run, case)
            _say(progress, f"[{case.name}] {engine}: {_brief(results[case.name][engine])}")
    return [_checked(c, size, results[c.name]) for c in cases]


def _checked(case: Case, size: str, results: dict[str, dict[str, t.Any]]) -> dict[str, t.Any]:
    # An engine stopped early by its time limit cannot have the whole result; the others must
    # match the exact result (or its size), or, where there is none, each other.
    done = {e: r for e, r in results.items() if not r.get("stopped_early") and not r.get("error")}
    if case.final:
        # Only ours declares the input finished: a peer's windows still open at its end are
        # not emitted, so its result is short of the whole answer by design.
        for engine in [e for e in done if e != "streamjoin"]:
            done.pop(engine)["unchecked"] = "no end of input: the last windows stay open"
    agree: bool | None
    if case.exact is not None:
        outs = {e: os.path.join(ROOT, "work", case.name, e, "out") for e in done}
        size_of, diffs = exact_differences(case.exact, case.backlog.streams, outs, case.latest_by)
        expected: dict[str, int] | None = {"exact": size_of}
        for engine, (missing, extra) in diffs.items():
            done[engine]["missing_rows"], done[engine]["extra_rows"] = missing, extra
        errors = any(r.get("error") for r in results.values())
        agree = all(d == (0, 0) for d in diffs.values()) and not errors
    else:
        expected = expected_counts(case)
        finished = [r.get("out") for r in done.values()]
        if expected is not None:
            agree = all(out == expected for out in finished)
        else:
            agree = all(out == finished[0] for out in finished) if len(finished) > 1 else None
    ours = results.get("streamjoin", {})
    peer = results.get(case.peer, {}) if case.peer else {}
    ratios: dict[str, float | None] = {}
    if ours.get("throughput") and peer.get("throughput"):
        ratios["throughput"] = round(ours["throughput"] / peer["throughput"], 2)
        if ours.get("batch_p99_ms") and peer.get("batch_p99_ms"):
            ratios["batch_p99"] = round(ours["batch_p99_ms"] / peer["batch_p99_ms"], 2)
    if ours.get("rows_per_cpu_second") and peer.get("rows_per_cpu_second"):
        ratios["rows_per_cpu_second"] = round(
            ours["rows_per_cpu_second"] / peer["rows_per_cpu_second"], 2
        )
    if ours.get("steady_batch_p99_ms") and peer.get("steady_batch_p99_ms"):
        ratios["steady_batch_p99"] = round(
            ours["steady_batch_p99_ms"] / peer["steady_batch_p99_ms"], 2
        )
    return {
        "case": case.name,
        "size": size,
        "predicate": case.predicate,
        "window_seconds": case.window_seconds,
        "input_rows": case.backlog.total_rows,
        "files": case.backlog.files,
        "expected": expected,
        "results_agree": agree,
        "final": case.final,
        "why_no_peer": case.why_no_peer,
        "engines": results,
        "ratios": ratios,
    }


def _say(progress: t.TextIO | None, text: str) -> None:
    if progress is not None:
        print(text, file=progress, flush=True)


def _brief(r: dict[str, t.Any]) -> str:
    if r.get("error"):
        return f"ERROR {r['error']}"
    early = " (stopped early at its time limit)" if r.get("stopped_early") else ""
    steady = (
        f", steady p50/p99 {r['steady_batch_p50_ms']}/{r['steady_batch_p99_ms']} ms "
        f"(growth ×{r['batch_growth']})"
        if "steady_batches" in r
        else ""
    )
    return (
        f"{r['throughput']} rows/s{early}, {r['seconds']} s, "
        f"CPU {r.get('cpu_seconds')} s, batches p50/p99 "
        f"{r['batch_p50_ms']}/{r['batch_p99_ms']} ms{steady}, out {r['out']}, "
        f"peak {r['peak_rss_mb']} MB"
    )


def machine() -> dict[str, t.Any]:
    """Cores, memory and versions, reported with every run."""
    import psutil
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "java": (java.strip().splitlines() or ["?"])[0],
    }


def source_commit() -> str | None:
    """The commit of the checkout the benchmarks run from (None outside a git checkout), with
    ``+dirty`` when its tracked files have changes (the benchmarks' own results aside: a run
    of several benchmarks writes them as it goes)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "-C", here, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                *("git", "-C", here, "status", "--porcelain", "--untracked-files=no", "--"),
                *(".", ":!benchmarks/results", ":!benchmarks/RESULTS.md", ":!benchmarks/*.png"),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{head}+dirty" if dirty else head


def check_workload(workload: str, size: str) -> None:
    """Raise ValueError naming `workload` or `size` when either is unknown."""
    if workload not in WORKLOADS:
        msg = f"unknown workload {workload!r}; one of: {', '.join(WORKLOADS)}"
        raise ValueError(msg)
    if size not in SIZES:
        msg = f"unknown size {size!r}; one of: {', '.join(SIZES)}"
        raise ValueError(msg)


def run_workload(
    workload: str,
    size: str = "quick",
    *,
    engines: t.Sequence[str] | None = None,
    progress: t.TextIO | None = None,
    peer_limit: float | None = None,
    cluster: bool = False,
) -> dict[str, t.Any]:
    """Every case of `workload` at `size`; the JSON object the CLI prints last.

    `engines` limits the run to some of ``streamjoin`` and the peers; `progress` receives a line
    per engine run; `peer_limit` (seconds, 0 for none) overrides the size's `PEER_TIME_LIMIT`;
    `cluster`: every engine runs on a standalone cluster on 127.0.0.1 (`CLUSTER`), which the
    run starts and stops.
    """
    if peer_limit is not None and peer_limit < 0:
        msg = f"--peer-limit must be 0 (no limit) or a number of seconds, not {peer_limit:g}"
        raise ValueError(msg)
    check_workload(workload, size)
    started = time.monotonic()
    _say(progress, f"[{workload}] generating the {size} backlog …")
    cases = WORKLOADS[workload](os.path.join(ROOT, "data", workload, size), size)
    with contextlib.ExitStack() as stack:
        master = None
        if cluster:
            from streamjoin.cluster import LocalCluster

            _say(progress, f"[{workload}] starting a cluster ({CLUSTER}) …")
            nodes = LocalCluster(os.path.join(ROOT, "work", "cluster"), workers=2, cores=1)
            master = stack.enter_context(nodes).master_url
        ran = run_cases(
            cases, size, engines=engines, progress=progress, peer_limit=peer_limit, master=master
        )
    return {
        "workload": workload,
        "size": size,
        "machine": machine(),
        "commit": source_commit(),
        "peer_time_limit_s": peer_time_limit(size, peer_limit),
        **({"cluster": CLUSTER} if cluster else {}),
        "cases": ran,
        "wall_seconds": round(time.monotonic() - started, 1),
    }


CLUSTER = "standalone, 2 workers of 1 core and 2 GiB on 127.0.0.1, the driver beside them"
"""The cluster of ``streamjoin bench --cluster`` (`run_workload`). On a machine of 2 cores the
driver and both executors share them: it measures what a cluster adds to a batch (tasks sent
to other JVMs, a shuffle between processes, no state in the driver's memory), not speed-up."""


def summary_line(report: dict[str, t.Any]) -> list[str]:
    """One human line per case: throughput of each engine, the ratio, and whether they agree."""
    lines = []
    for c in report["cases"]:
        engines = ", ".join(
            f"{name} {r.get('throughput')} rows/s" for name, r in c["engines"].items()
        )
        ratio = c["ratios"].get("throughput")
        agree = {True: "results agree", False: "RESULTS DIFFER", None: "unchecked"}[
            c["results_agree"]
        ]
        lines.append(f"{c['case']}: {engines}; ratio {ratio}; {agree}")
    return lines


if __name__ == "__main__":
    print(json.dumps(run_workload(sys.argv[1], sys.argv[2], progress=sys.stderr)))
