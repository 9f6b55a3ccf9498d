"""The ``adhoc`` benchmark's throughput modes (`benchmarks.adhoc`): the backlog through one
streamjoin job of N queries, shared or apart, or through N Spark native joins."""

from __future__ import annotations

import contextlib
import os
import time
import typing as t

from benchmarks.adhoc_jobs import query, streams_sql


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
    spark.conf.set("streamjoin.share", "true" if mode == "shared" else "false")
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
