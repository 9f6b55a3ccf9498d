"""The ``adhoc`` benchmark (issue 33, AJoin's workload): many two-way queries over the same two
streams, three ways, side by side; then queries added and dropped while a served job runs.

``python -m benchmarks.adhoc [--quick|--tiny] [--queries 10,100] [--modes shared,apart,spark]``
(or ``streamjoin bench adhoc``); the last line printed is one JSON object, also written to
``benchmarks/results/adhoc-<size>.json`` for quick and full runs.

**Streams and queries.** Streams A and B, each a backlog of `files` Parquet files of `rows`
rows (one second of event time a file; columns id, k and g, keys out of 50,000, x uniform in
[0, 100), ts). With 1,000 keys a query's results were tens of thousands of rows a batch and
writing them took most of every mode's time; AJoin's workload is a join's work shared, so the
key space keeps results near a row per input row. Query i comes from one of two templates,
alternately, as in AJoin's generator at 50 % similarity: ``a.k = b.k AND a.x > c`` or
``a.g = b.g AND b.x < c``, with a window of 2, 5 or 10 s and a constant c from 0 to 90 (each
query's own); queries of a template are similar (same streams and keys, overlapping windows and
selections).

**Throughput** (each mode in a fresh process, after a warm-up run of one query on two files):

- ``shared``: one streamjoin job with the N queries (two-way sharing on, the default);
- ``apart``: the same job with ``streamjoin.share = false``: a join per query;
- ``spark``: one Spark native stream-stream join per query (``availableNow``), all N started
  together in one session, as a Spark user runs N queries.

Each reads the backlog one file a batch per stream (``maxFilesPerTrigger = 1``) and writes each
query's results as Parquet; throughput is the backlog's rows (both streams) over the wall time
until every query has finished it, so a mode that shares less pays for it in time. The state
bytes are what the checkpoint directories hold at the end. Checks: every query's result count is
equal in every mode that finished.

**Churn** (served job, in the ``shared`` process after its backlog): `Engine.start` serves the N
queries on a live feed (one file a second per stream); queries of the same templates are added
and dropped, one every few seconds; for each add, the batches and seconds from the add to its
first results.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import typing as t

from benchmarks.adhoc_churn import churn
from benchmarks.adhoc_jobs import write_files
from benchmarks.adhoc_modes import run_ours, run_spark
from benchmarks.adhoc_targets import _ratios, targets
from benchmarks.harness import ROOT, machine, source_commit
from benchmarks.harness_process import run_child

SIZES: dict[str, dict[str, t.Any]] = {
    "tiny": {"files": 4, "rows": 400, "queries": [4], "churn": 2, "limit": 300.0},
    "quick": {"files": 12, "rows": 2_000, "queries": [10, 100], "churn": 6, "limit": 600.0},
    "full": {"files": 20, "rows": 5_000, "queries": [10, 100, 500], "churn": 10, "limit": 1800.0},
}
MODES = ("shared", "apart", "spark")


def child(args: argparse.Namespace) -> None:
    """One mode for one N, in this process; prints its result as JSON."""
    size = SIZES[args.size]
    work = tempfile.mkdtemp(prefix=f"sj-adhoc-{args.mode}-")
    # A warm-up: one query over two files, so that no mode measures a cold JVM.
    warm = os.path.join(work, "warm")
    if args.mode == "spark":
        run_spark(1, args.warm_data, warm, size["limit"])
    else:
        run_ours(args.mode, 1, args.warm_data, warm)
    shutil.rmtree(warm, ignore_errors=True)
    run = os.path.join(work, "run")
    if args.mode == "spark":
        result = run_spark(args.n, args.data, run, size["limit"])
    else:
        total = 2 * size["files"] * size["rows"]
        result = run_ours(args.mode, args.n, args.data, run, size["limit"], total)
    if args.mode == "shared" and args.churn:
        where = os.path.join(work, "churn")
        result["churn"] = churn(args.n, where, size["rows"], size["churn"])
    shutil.rmtree(work, ignore_errors=True)
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(result, f)


def run_adhoc(size: str, queries: t.Sequence[int], modes: t.Sequence[str]) -> dict[str, t.Any]:
    """Every mode at every N, each in its own process; the report."""
    spec = SIZES[size]
    root = tempfile.mkdtemp(prefix="sj-adhoc-")
    data, warm = os.path.join(root, "data"), os.path.join(root, "warm")
    write_files(data, spec["files"], spec["rows"])
    write_files(warm, 2, 200, seed=3)
    runs: dict[str, dict[str, t.Any]] = {}
    for n in queries:
        for mode in modes:
            result = os.path.join(root, f"{mode}-{n}.json")
            args = [
                "benchmarks.adhoc",
                "--child",
                mode,
                "--n",
                str(n),
                "--size",
                size,
                "--data",
                data,
                "--warm-data",
                warm,
                "--result",
                result,
            ]
            if n == max(queries):
                args.append("--churn")
            code, tail, peak = run_child(args)
            if os.path.exists(result):
                with open(result, encoding="utf-8") as f:
                    run = json.load(f)
            else:
                run = {"error": f"exit {code}: {tail}"}
            run["peak_rss_mb"] = peak
            runs[f"{mode}-{n}"] = run
            print(f"adhoc {mode} N={n}: {_brief(run)}", file=sys.stderr, flush=True)
    shutil.rmtree(root, ignore_errors=True)
    return {
        "workload": "adhoc",
        "size": size,
        "machine": machine(),
        "commit": source_commit(),
        "spec": spec,
        "runs": runs,
        "ratios": (ratios := _ratios(runs, queries, 2 * spec["files"] * spec["rows"])),
        "checks": _checks(runs, queries),
        "targets": targets(runs, ratios, queries),
    }


def _brief(run: dict[str, t.Any]) -> str:
    if "error" in run:
        return str(run["error"])
    keys = ("wall_s", "throughput_rows_s", "joins_per_batch", "finished")
    return ", ".join(f"{k} {run[k]}" for k in keys if k in run)


def _checks(runs: dict[str, dict[str, t.Any]], queries: t.Sequence[int]) -> dict[str, t.Any]:
    out = {}
    for n in queries:
        counts = [r["counts"] for m in MODES if "counts" in (r := runs.get(f"{m}-{n}", {}))]
        out[str(n)] = "equal" if counts and all(c == counts[0] for c in counts) else "DIFFER"
    return out


def main(argv: t.Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.adhoc")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--tiny", action="store_true")
    parser.add_argument("--queries", help="comma-separated N (default by size)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out")
    parser.add_argument("--child", choices=MODES, dest="mode")
    parser.add_argument("--n", type=int)
    parser.add_argument("--size", default=None)
    parser.add_argument("--data")
    parser.add_argument("--warm-data")
    parser.add_argument("--result")
    parser.add_argument("--churn", action="store_true")
    args = parser.parse_args(argv)
    if args.mode:
        child(args)
        return 0
    chosen = "tiny" if args.tiny else "quick" if args.quick else "full"
    queries = (
        [int(q) for q in args.queries.split(",")] if args.queries else SIZES[chosen]["queries"]
    )
    report = run_adhoc(chosen, queries, args.modes.split(","))
    text = json.dumps(report)
    out = args.out or (
        os.path.join(ROOT, "results", f"adhoc-{chosen}.json") if chosen != "tiny" else None
    )
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
