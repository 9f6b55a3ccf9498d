"""Batches after the first reuse the compiled code: values that change from batch to batch (the
watermark, the state's lower bounds) must not be written into Spark's generated Java."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.engine import Engine
from streamjoin.sql import parse_job

from .harness import run_batches
from .streams import ts, window_join_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


def _compilations(spark: SparkSession) -> int:
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def _batch(b: int) -> dict[str, list[dict[str, object]]]:
    return {
        name: [
            {"id": 100 * b + i, "k": i % 3, "x": 1.0, "s": "p", "ts": ts(10 * b + i / 2)}
            for i in range(20)
        ]
        for name in ("A", "B")
    }


def test_a_window_join_compiles_no_new_code_once_the_watermark_moves(
    spark: SparkSession, tmp_path: Path
) -> None:
    job = parse_job(window_join_job(str(tmp_path / "w"), 5))
    ckpt = tmp_path / "ckpt"
    processor = Engine(spark).processor(job, str(ckpt))
    try:
        # Batch 0 has no watermark yet and batch 1 is the first with one: both compile.
        run_batches(spark, job, [_batch(0), _batch(1)], ckpt, processor=processor)
        before = _compilations(spark)
        batches = [_batch(2), _batch(3)]
        reports = run_batches(spark, job, batches, ckpt, first_batch=2, processor=processor)
    finally:
        processor.close()
    assert reports[-1].watermark != reports[0].watermark  # the bounds did move
    assert all(r.out for r in reports)
    assert _compilations(spark) == before
