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
- ``apart``: the same job with ``streamjoin.twoway.share = false``: a join per query;
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
import contextlib
import itertools
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import typing as t

from benchmarks.harness import ROOT, _percentile, machine, run_child, source_commit

SIZES: dict[str, dict[str, t.Any]] = {
    "tiny": {"files": 4, "rows": 400, "queries": [4], "churn": 2, "limit": 300.0},
    "quick": {"files": 12, "rows": 2_000, "queries": [10, 100], "churn": 6, "limit": 600.0},
    "full": {"files": 20, "rows": 5_000, "queries": [10, 100, 500], "churn": 10, "limit": 1800.0},
}
KEYS = 50_000
"""Join keys per column: a row meets about one partner per second of window, so that a query's
results stay small and the joins, not the writing of results, are what N queries share."""
WINDOWS = (2, 5, 10)
MODES = ("shared", "apart", "spark")


def query(i: int, out: str) -> tuple[str, str]:
    """Query i: its CREATE SINK and INSERT (sink ``s<i>``), and its Spark condition."""
    window = WINDOWS[(i // 2) % len(WINDOWS)]
    c = (i * 37) % 91
    key, sel = ("k", f"a.x > {c}") if i % 2 == 0 else ("g", f"b.x < {c}")
    cond = (
        f"a.{key} = b.{key} AND {sel} AND b.ts BETWEEN a.ts - INTERVAL '{window}' SECOND "
        f"AND a.ts + INTERVAL '{window}' SECOND"
    )
    sql = (
        f"CREATE SINK s{i} WITH (format = 'parquet', path = '{out}/s{i}');\n"
        f"INSERT INTO s{i} SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON {cond};"
    )
    return sql, cond


def streams_sql(data: str, one_file: bool = True) -> str:
    per = "maxFilesPerTrigger = '1', " if one_file else ""
    return "\n".join(
        f"CREATE STREAM {s} (id BIGINT, k BIGINT, g BIGINT, x DOUBLE, ts TIMESTAMP, "
        f"WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
        f"WITH (format = 'parquet', {per}path = '{data}/{s}');"
        for s in "AB"
    )


def write_files(data: str, files: int, rows: int, first: int = 0, seed: int = 7) -> None:
    """Files ``first`` to ``first + files - 1`` of each stream, one second of event time each."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    for n, s in enumerate("AB"):
        folder = os.path.join(data, s)
        os.makedirs(folder, exist_ok=True)
        for f in range(first, first + files):
            rng = np.random.default_rng(seed * 1_000 + f * 2 + n)
            base = 1_700_000_000_000_000 + f * 1_000_000
            ids = np.arange(rows, dtype=np.int64) + (f * 2 + n) * rows
            table = pa.table(
                {
                    "id": ids,
                    "k": rng.integers(0, KEYS, rows),
                    "g": rng.integers(0, KEYS, rows),
                    "x": rng.uniform(0, 100, rows),
                    "ts": pa.array(
                        np.sort(rng.integers(0, 1_000_000, rows)) + base, pa.timestamp("us")
                    ),
                }
            )
            path = os.path.join(folder, f"part-{f:05d}.parquet")
            pq.write_table(table, path + ".tmp")
            os.replace(path + ".tmp", path)
            os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _, names in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, n)) for n in names)
    return total


def _counts(spark: t.Any, out: str, n: int) -> dict[str, int]:
    counts = {}
    for i in range(n):
        path = os.path.join(out, f"s{i}")
        has = os.path.isdir(path) and any(
            f.endswith(".parquet") for _, _, fs in os.walk(path) for f in fs
        )
        counts[f"s{i}"] = spark.read.parquet(path).count() if has else 0
    return counts


def run_ours(
    mode: str, n: int, data: str, work: str, limit: float | None = None, total: int = 0
) -> dict[str, t.Any]:
    """The backlog (`total` rows) through one streamjoin job of N queries (``shared`` or
    ``apart``), stopped after `limit` seconds."""
    from streamjoin.runtime.engine import Engine
    from streamjoin.sql import parse_job

    engine = Engine()
    spark = engine.spark
    spark.conf.set("streamjoin.twoway.share", "true" if mode == "shared" else "false")
    out = os.path.join(work, "out")
    text = streams_sql(data) + "\n" + "\n".join(query(i, out)[0] for i in range(n))
    job = parse_job(text)
    started = time.monotonic()
    ckpt = os.path.join(work, "ckpt")
    summary = engine.run(job, checkpoint=ckpt, once=True, progress=False, timeout=limit)
    wall = time.monotonic() - started
    plan = engine.validate(job)
    rows_in = sum(summary.rows_in.values())
    if total and rows_in < total:
        return {
            "wall_s": round(wall, 2),
            "finished": False,
            "rows_in": rows_in,
            "joins_per_batch": len(plan.joins),
            "state_bytes": _dir_bytes(ckpt),
        }
    return {
        "wall_s": round(wall, 2),
        "batches": summary.batches,
        "rows_in": sum(summary.rows_in.values()),
        "throughput_rows_s": round(sum(summary.rows_in.values()) / wall),
        "state_bytes": _dir_bytes(os.path.join(work, "ckpt")),
        "joins_per_batch": len(plan.joins),
        "counts": _counts(spark, out, n),
    }


def run_spark(n: int, data: str, work: str, limit: float) -> dict[str, t.Any]:
    """The backlog through N Spark native stream-stream joins, started together."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from streamjoin.runtime.session import get_session

    spark: SparkSession = get_session(None)
    schema = "id BIGINT, k BIGINT, g BIGINT, x DOUBLE, ts TIMESTAMP"
    out = os.path.join(work, "out")

    def side(s: str, alias: str) -> t.Any:
        df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(f"{data}/{s}")
        return df.withWatermark("ts", "1 second").alias(alias)

    started = time.monotonic()
    queries = []
    for i in range(n):
        cond = query(i, out)[1]
        joined = side("A", "a").join(side("B", "b"), F.expr(cond))
        queries.append(
            joined.select(F.col("a.id").alias("aid"), F.col("b.id").alias("bid"))
            .writeStream.format("parquet")
            .option("path", f"{out}/s{i}")
            .option("checkpointLocation", f"{work}/ckpt/q{i}")
            .trigger(availableNow=True)
            .start()
        )
    finished, error = True, None
    for q in queries:
        left = limit - (time.monotonic() - started)
        try:
            if left <= 0 or not q.awaitTermination(max(1, int(left))):
                finished = False
                break
        except Exception as err:  # (one query's failure: what a user running N would see)
            finished, error = False, (str(err).strip().splitlines() or [repr(err)])[0][:300]
            break
    wall = time.monotonic() - started
    for q in queries:
        with contextlib.suppress(Exception):
            q.stop()
    if error is not None:
        return {"failed_after_s": round(wall, 2), "error": error, "joins_per_batch": n}
    rows_in = sum(int(p["numInputRows"]) for q in queries[:1] for p in q.recentProgress)
    # (Rows a query had read when stopped, on average: what a throughput at the limit needs.)
    read = [sum(int(p["numInputRows"]) for p in q.recentProgress) for q in queries]
    result: dict[str, t.Any] = {
        "wall_s": round(wall, 2),
        "finished": finished,
        "state_bytes": _dir_bytes(os.path.join(work, "ckpt")),
        "joins_per_batch": n,
        "rows_read_per_query": round(sum(read) / max(1, len(read))),
    }
    if finished:
        result["counts"] = _counts(spark, out, n)
        result["rows_in"] = rows_in
    return result


def churn(n: int, work: str, rows: int, adds: int) -> dict[str, t.Any]:
    """Serve N queries on a live feed; add (then drop) `adds` queries one by one: per add, the
    batches and seconds until its first results."""
    from streamjoin.runtime.engine import Engine
    from streamjoin.sql import parse_job

    live = os.path.join(work, "live")
    write_files(live, 3, rows, first=0)
    out = os.path.join(work, "out-live")
    job = parse_job(streams_sql(live) + "\n" + "\n".join(query(i, out)[0] for i in range(n)))
    batches: list[tuple[int, float, float]] = []
    lock = threading.Lock()

    def on_batch(report: t.Any) -> None:
        with lock:
            batches.append((report.batch, time.monotonic(), report.seconds))

    serving = Engine().start(job, checkpoint=os.path.join(work, "ckpt-live"), on_batch=on_batch)
    stop = threading.Event()

    def feeder() -> None:
        f = 3
        while not stop.wait(1.0):
            write_files(live, 1, rows, first=f)
            f += 1

    feed = threading.Thread(target=feeder, daemon=True)
    feed.start()
    firsts = []
    try:
        for j in range(adds):
            i = n + j
            added_at = time.monotonic()
            change = serving.add_query(query(i, out)[0])
            serving.wait(change["change"], 120)
            since = next(q["since"] for q in serving.queries() if q["name"] == f"s{i}")
            deadline = time.monotonic() + 60
            first = None
            while first is None and time.monotonic() < deadline:
                row = next(q for q in serving.queries() if q["name"] == f"s{i}")
                if row["rows_out"]:
                    with lock:
                        first = batches[-1][0]
                        seen = batches[-1][1]
                time.sleep(0.05)
            firsts.append(
                {
                    "query": f"s{i}",
                    "since_batch": since,
                    "first_batch": first,
                    "batches_to_first": None if first is None else first - since + 1,
                    "seconds_to_first": None if first is None else round(seen - added_at, 2),
                }
            )
            serving.drop_query(f"s{i}" if j % 2 else f"s{j}")
        time.sleep(2)
    finally:
        stop.set()
        serving.stop()
    with lock:
        secs = [s * 1000 for _, _, s in batches[2:]]
    return {
        "adds": firsts,
        "batch_ms_p50": _percentile(secs, 50),
        "batch_ms_p99": _percentile(secs, 99),
        "batches": len(batches),
    }


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


def _brief(run: dict[str, t.Any]) -> str:
    if "error" in run:
        return str(run["error"])
    keys = ("wall_s", "throughput_rows_s", "joins_per_batch", "finished")
    return ", ".join(f"{k} {run[k]}" for k in keys if k in run)


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
