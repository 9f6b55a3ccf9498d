"""Run a workload: every case by our engine and its peer, side by side, then the figures (and,
where a case asks, by Spark's micro-batch loop with nothing but a read of each batch: the floor
under both, `engines_floor`).

Each engine runs in a fresh Python + JVM process (so its peak memory is its own) on the same
backlog; the parent samples the resident memory of that process tree. Results are checked
against each other and against an exact batch join of the whole backlog computed by DuckDB (the
backlogs carry no late rows, so the streaming result must equal it). The last line printed is
one JSON object with every figure and the ratios.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import typing as t

from benchmarks.engines_flink import FLINK
from benchmarks.engines_floor import FLOOR
from benchmarks.flink_env import flink_python
from benchmarks.harness_exact import counted, exact_differences, expected_counts
from benchmarks.harness_figures import figures, shed_pairs
from benchmarks.harness_process import run_engine_process
from benchmarks.workloads import SIZES, WORKLOADS

if t.TYPE_CHECKING:
    from benchmarks.workloads import Case

ROOT = os.path.join(tempfile.gettempdir(), "streamjoin-bench")


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


def _engines(case: Case, engines: t.Sequence[str] | None) -> list[str]:
    peers = () if case.peer is None else (case.peer,)
    floor = (FLOOR,) if case.floor else ()
    # (Flink, a peer of every case, runs only when named: it needs a venv of its own.)
    flink = (FLINK,) if engines is not None and FLINK in engines and not case.alone else ()
    return [e for e in ("streamjoin", *peers, *floor, *flink) if engines is None or e in engines]


def run_cases(
    cases: t.Sequence[Case],
    size: str,
    *,
    engines: t.Sequence[str] | None = None,
    progress: t.TextIO | None = None,
    peer_limit: float | None = None,
    master: str | None = None,
    warm: bool = False,
) -> list[dict[str, t.Any]]:
    """Every case by our engine and its peer; each checked and with its ratios. `peer_limit`:
    seconds after which a peer's run is stopped (default `PEER_TIME_LIMIT` by size; 0: none);
    `master`: a cluster's to run every engine on (default: local mode); `warm`: each engine
    runs each case's backlog once, untimed, in the process of the run measured just after it
    (its JVM warm, as it is on a stream that has run for minutes).

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
    if any(e == FLINK for e, _ in groups):
        flink_python(progress or sys.stderr)  # (made here, its progress shown, on first use)
    for engine, group in groups:
        names = ", ".join(c.name for c in group)
        _say(progress, f"[{names}] running {engine} …")
        limit = None if engine == "streamjoin" else peer_time_limit(size, peer_limit)
        if limit is not None and len(group) > 1:
            # One budget for the group, so that a quick run stays quick.
            limit = max(20.0, limit / len(group))
        jobs = [(c.job, os.path.join(ROOT, "work", c.name, engine)) for c in group]
        final = [c.final for c in group]
        # (Flink starts a JVM of its own for each run: nothing to warm in this process.)
        twice = warm and engine != FLINK
        if twice:  # (each case run first in a directory of its own, its figures dropped)
            jobs = [j for job, work in jobs for j in ((job, f"{work}-warmup"), (job, work))]
            final = [f for f in final for _ in range(2)]
        runs = run_engine_process(engine, jobs, limit, final=final, master=master)
        if twice:
            for first, run in zip(runs[0::2], runs[1::2], strict=True):
                if first.get("error") or first.get("stopped_early"):  # (then not warm)
                    run["warmup_error"] = first.get("error") or "stopped at its time limit"
            runs = runs[1::2]
        for case, run in zip(group, runs, strict=True):
            results[case.name][engine] = figures(run, case)
            if "warmup_error" in run:
                results[case.name][engine]["warmup_error"] = run["warmup_error"]
            _say(progress, f"[{case.name}] {engine}: {_brief(results[case.name][engine])}")
    return [_checked(c, size, results[c.name]) for c in cases]


def _checked(case: Case, size: str, results: dict[str, dict[str, t.Any]]) -> dict[str, t.Any]:
    # An engine stopped early by its time limit cannot have the whole result; the others must
    # match the exact result (or its size), or, where there is none, each other.
    if FLOOR in results:
        results[FLOOR]["unchecked"] = "no join: Spark's micro-batch loop, the batch read once"
    joins = {e: r for e, r in results.items() if e != FLOOR}
    done = {e: r for e, r in joins.items() if not r.get("stopped_early") and not r.get("error")}
    if case.final:
        # Only ours (and Flink, whose bounded input ends with a final watermark) declares the
        # input finished: a Spark peer's windows still open at its end are not emitted, so its
        # result is short of the whole answer by design.
        for engine in [e for e in done if e not in ("streamjoin", FLINK)]:
            done.pop(engine)["unchecked"] = "no end of input: the last windows stay open"
    elif FLINK in done and _has_outer(case):
        done.pop(FLINK)["unchecked"] = (
            "Flink's input ends with a final watermark: it writes every row still without a "
            "partner, which the others (no end of input) keep open"
        )
    agree: bool | None
    if case.exact is not None:
        outs = {e: os.path.join(ROOT, "work", case.name, e, "out") for e in done}
        # (Flink writes an updating result's final rows, not its changes batch by batch, and
        # where its SQL means another thing its answer is another: `Case.flink_exact`.)
        apart = FLINK in outs and (case.latest_by or case.flink_exact)
        own = {FLINK: outs.pop(FLINK)} if apart else {}
        size_of, diffs = exact_differences(case.exact, case.backlog.streams, outs, case.latest_by)
        if own:
            flink_exact = case.flink_exact or case.exact
            diffs |= exact_differences(flink_exact, case.backlog.streams, own)[1]
        expected: dict[str, int] | None = {"exact": size_of}
        for engine, (missing, extra) in diffs.items():
            done[engine]["missing_rows"], done[engine]["extra_rows"] = missing, extra
        # (A shedding run lacks the pairs its skipped probes counted, and has no row extra.)
        want = {e: (shed_pairs(done[e].get("shed") or {}) if case.shed else 0, 0) for e in diffs}
        agree = all(d == want[e] for e, d in diffs.items()) if done else None
    else:
        expected = expected_counts(case)
        finished = [r.get("out") for r in done.values()]
        if expected is not None:
            agree = all(out == expected for out in finished) if finished else None
        else:
            agree = all(out == finished[0] for out in finished) if len(finished) > 1 else None
    # An engine that failed confirms nothing: the others agreeing is not the case agreeing.
    failed = {e: r["error"] for e, r in joins.items() if r.get("error")}
    if failed and agree:
        agree = None
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
    flink = results.get(FLINK, {})
    if ours.get("throughput") and flink.get("throughput"):
        ratios["flink_throughput"] = round(ours["throughput"] / flink["throughput"], 2)
    floor = results.get(FLOOR, {})
    if floor.get("throughput") and peer.get("throughput"):
        # The most any engine in Spark's loop could reach: the loop, and the batch read once.
        ratios["floor_throughput"] = round(floor["throughput"] / peer["throughput"], 2)
    return {
        "case": case.name,
        "size": size,
        "predicate": case.predicate,
        "window_seconds": case.window_seconds,
        "input_rows": case.backlog.total_rows,
        "files": case.backlog.files,
        "expected": expected,
        "results_agree": agree,
        **({"failed": failed} if failed else {}),
        "final": case.final,
        "why_no_peer": case.why_no_peer,
        **({"reached_pairs": counted(case.reached, case.backlog.streams)} if case.reached else {}),
        "engines": results,
        "ratios": ratios,
    }


def _has_outer(case: Case) -> bool:
    from streamjoin.sql import parse_job

    job = parse_job(case.job.replace("{out}", "/dev/null"), case.name)
    return any(q.outer is not None for q in job.queries)


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
    warm: bool = False,
    only: t.Sequence[str] = (),
) -> dict[str, t.Any]:
    """Every case of `workload` at `size` (with `only`, those whose names contain one of its
    strings); the JSON object the CLI prints last.

    `engines` limits the run to some of ``streamjoin``, the peers and ``spark-floor``;
    `progress` receives a line per engine run; `peer_limit` (seconds, 0 for none) overrides the
    size's `PEER_TIME_LIMIT`; `cluster`: every engine runs on a standalone cluster on 127.0.0.1
    (`CLUSTER`), which the run starts and stops; `warm`: each engine's run measured comes after
    an untimed run of the same backlog in its process (`run_cases`).
    """
    if peer_limit is not None and peer_limit < 0:
        msg = f"--peer-limit must be 0 (no limit) or a number of seconds, not {peer_limit:g}"
        raise ValueError(msg)
    check_workload(workload, size)
    started = time.monotonic()
    _say(progress, f"[{workload}] generating the {size} backlog …")
    cases = chosen(WORKLOADS[workload](os.path.join(ROOT, "data", workload, size), size), only)
    with contextlib.ExitStack() as stack:
        master = start_cluster(stack, workload, "work", progress) if cluster else None
        ran = run_cases(
            cases,
            size,
            engines=engines,
            progress=progress,
            peer_limit=peer_limit,
            master=master,
            warm=warm,
        )
    return {
        "workload": workload,
        "size": size,
        "machine": machine(),
        "commit": source_commit(),
        "peer_time_limit_s": peer_time_limit(size, peer_limit),
        **({"cluster": CLUSTER} if cluster else {}),
        **({"warm": True} if warm else {}),
        **({"only": list(only)} if only else {}),
        "cases": ran,
        "wall_seconds": round(time.monotonic() - started, 1),
    }


def chosen(cases: t.Sequence[Case], only: t.Sequence[str]) -> list[Case]:
    """The `cases` whose names contain one of the strings of `only` (all of them without)."""
    if any(not part for part in only):
        msg = f"--cases {','.join(only)} has an empty name (it would take every case)"
        raise ValueError(msg)
    kept = [c for c in cases if not only or any(part in c.name for part in only)]
    if not kept:
        names = ", ".join(c.name for c in cases)
        msg = f"no case's name contains any of --cases {','.join(only)}; the cases: {names}"
        raise ValueError(msg)
    return kept


def start_cluster(
    stack: contextlib.ExitStack, workload: str, folder: str, progress: t.TextIO | None
) -> str:
    """The master URL of a cluster (`CLUSTER`) started under ``ROOT/<folder>/cluster`` for a
    run of `workload`, stopped when `stack` closes."""
    from streamjoin.cluster import LocalCluster

    _say(progress, f"[{workload}] starting a cluster ({CLUSTER}) …")
    nodes = LocalCluster(os.path.join(ROOT, folder, "cluster"), workers=2, cores=1)
    return stack.enter_context(nodes).master_url


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
        if c.get("failed"):
            agree += f" ({', '.join(f'{e} failed: {err}' for e, err in c['failed'].items())})"
        flink = c["ratios"].get("flink_throughput")
        versus = f"; ratio to flink {flink}" if flink is not None else ""
        lines.append(f"{c['case']}: {engines}; ratio {ratio}{versus}; {agree}")
    return lines


if __name__ == "__main__":
    print(json.dumps(run_workload(sys.argv[1], sys.argv[2], progress=sys.stderr)))
