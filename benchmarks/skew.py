"""Partitioning benchmarks of issue 4: skewed keys, a fluctuating |R|/|S| ratio, stored bytes.

``python -m benchmarks.skew {skew|passing|fluctuating|memory} [--quick|--tiny|--full]
[--cluster] [--out F]``; the last line printed is one JSON object. A ``--quick`` run writes
``benchmarks/results/<name>.json`` (``<name>-full.json`` at ``--full``, ``<name>-cluster…``
with ``--cluster``, or ``--out``) and regenerates ``benchmarks/results/SKEW.md`` from the result
files; ``python -m benchmarks.skew summary`` only regenerates the markdown.

- ``skew``: ``l.k = r.k AND r.ts BETWEEN l.ts - 1 s AND l.ts + 1 s`` on two streams whose keys
  are Zipf(z), z ∈ {0, 0.5, 1, 1.5, 2} (``tiny``: 0 and 2), the hottest key the same on both
  sides. Each z runs forced ``hash`` (Spark's shuffle hash join on the key: the baseline) and
  ``auto`` (the engine's own path, moving to the cheapest scheme once the observed per-unit
  input is skewed) on the same micro-batches. Event time is stretched so that a row of the
  hottest key meets about two partners at z = 2: the output stays near the input size, while
  the hot key's hash chain is still long (the join's key is k alone; the window is checked on
  each candidate).
- ``passing``: the same join over Zipf(2) keys for half the batches and even keys after, forced
  ``hash`` against ``auto``: auto leaves hash while the key is hot and returns once it has
  passed; each change's batch against the steady ones.
- ``fluctuating``: a full-history equi join under forced ``matrix`` with adaptation on, whose
  left:right arrival ratio alternates between 4:1 and 1:4 (a 16× swing) in phases of growing
  size, so that Squall's doubling trigger fires several times and the shape moves each time.
- ``memory``: a full-history band join ``abs(l.x - r.x) <= c`` under forced ``biclique`` and
  forced ``matrix`` on the same units and the same input.

**How the engine is driven.** In process, through the Python API: `Engine.processor` and
``processor.process(engine.unified(plan, frames), batch)`` per micro-batch, as
``tests/spark/harness.py`` does, each batch's frames read from file i of a Parquet backlog
written by `benchmarks.data.write_backlog` (or one file per batch). `benchmarks.engines.run_engine`
runs a job in a child process and hands back only totals and batch times; these benchmarks need
each batch's `BatchReport` (rows per unit, the scheme in force and its changes) and the query's
router (the matrix controller's decision log), which only the in-process API gives. One Spark
session (`streamjoin.runtime.session.get_session`, local mode, or with ``--cluster`` a driver
of a standalone cluster of 2 one-core workers on 127.0.0.1 that the run starts and stops)
serves every run; batch times are the wall time of ``process`` (the whole batch: state write,
joins, sink, commit).

**What "per unit" means.** `BatchReport.units[q]` counts the rows each *place* of the query's
scheme receives (probing delta rows and stored rows read). On forced hash a place is the key's
hash bucket ``pmod(xxhash64(k), units)``, where a hash partitioning by the key sends the row; on
the automatic hash path only the delta's keys are observed (the state scan stays unhashed), so
its ``store`` counts are 0 until it leaves hashing. Spark's shuffle then maps places (with the
join keys) onto ``spark.sql.shuffle.partitions`` tasks, so the places' max/mean is the engine's
model of the per-task input, not a measurement of Spark's tasks.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import typing as t

from benchmarks.skew_fluctuating import run_fluctuating
from benchmarks.skew_harness import ROOT, _say, _session
from benchmarks.skew_keys import run_skew
from benchmarks.skew_memory import run_memory
from benchmarks.skew_passing import run_passing
from benchmarks.skew_report import write_summary

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import SparkSession

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
BENCHMARKS = ("skew", "passing", "fluctuating", "memory")
SIZES = ("tiny", "quick")

RUNNERS = {
    "skew": run_skew,
    "passing": run_passing,
    "fluctuating": run_fluctuating,
    "memory": run_memory,
}


def run(
    name: str,
    size: str,
    spark: SparkSession | None = None,
    root: str = ROOT,
    say: t.TextIO | None = None,
    *,
    cluster: bool = False,
) -> dict[str, t.Any]:
    """One benchmark at one size, with the machine it ran on and its wall time; `cluster`: on
    a standalone cluster on 127.0.0.1 (`benchmarks.harness.CLUSTER`), started and stopped here
    (or the one at the master ``STREAMJOIN_BENCH_MASTER`` names)."""
    from benchmarks.harness import CLUSTER, machine, source_commit

    if cluster and spark is not None:
        msg = "a cluster run starts its own session: pass no spark with cluster=True"
        raise ValueError(msg)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if cluster:
            from benchmarks.engines import MASTER_ENV
            from streamjoin.cluster import LocalCluster

            master = os.environ.get(MASTER_ENV)
            where = f"the cluster at {master}" if master else CLUSTER
            if not master:
                _say(say, f"[{name}] starting a cluster ({CLUSTER}) …")
                nodes = LocalCluster(os.path.join(root, "work", "cluster"), workers=2, cores=1)
                master = stack.enter_context(nodes).master_url
            spark = _session(master)
            stack.callback(spark.stop)
        spark = spark or _session()
        result = RUNNERS[name](spark, size, root, say)
        result["spark_master"] = spark.sparkContext.master
    result["machine"] = machine()
    result["commit"] = source_commit()
    result["wall_seconds"] = round(time.monotonic() - started, 1)
    result["command"] = f"python -m benchmarks.skew {name} --{size}" + (
        " --cluster" if cluster else ""
    )
    if cluster:
        result["cluster"] = where
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.skew", description=__doc__.splitlines()[0]
    )
    parser.add_argument("benchmark", choices=(*BENCHMARKS, "summary"))
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", dest="size", action="store_const", const="quick")
    group.add_argument("--tiny", dest="size", action="store_const", const="tiny")
    group.add_argument("--full", dest="size", action="store_const", const="full")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run on a standalone cluster of 2 one-core workers on 127.0.0.1 (skew, passing)",
    )
    parser.add_argument(
        "--out",
        help="where to write the JSON (default: results/<name>.json at --quick, "
        "results/<name>-full.json at --full, results/<name>-cluster[-full].json with --cluster)",
    )
    args = parser.parse_args(argv)
    if args.benchmark == "summary":
        path = write_summary()
        print(json.dumps({"summary": path}))
        return 0
    size = args.size or "quick"
    if size == "full" and args.benchmark not in ("skew", "passing"):
        parser.error("--full is a size of the skew and passing benchmarks only")
    if args.cluster and args.benchmark not in ("skew", "passing"):
        parser.error("--cluster runs the skew and passing benchmarks only")
    result = run(args.benchmark, size, say=sys.stderr, cluster=args.cluster)
    name = {"quick": args.benchmark, "full": f"{args.benchmark}-full"}.get(size)
    if name and args.cluster:
        name = f"{args.benchmark}-cluster" + ("-full" if size == "full" else "")
    target = args.out or (os.path.join(RESULTS, f"{name}.json") if name else None)
    if target:
        with open(target, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        if os.path.dirname(os.path.abspath(target)) == RESULTS:
            write_summary()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
