"""The ``--rate`` mode of the benchmark at its tiny size: `equi` fed live to our engine and to
Spark's native join, in this process on the shared session. Every engine must drain the feed,
agree on the result (with DuckDB's batch join of the fed files) and report sane figures."""

from __future__ import annotations

import typing as t

import pytest

from benchmarks.rate import run_rate

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytest.importorskip("duckdb")


def test_tiny_equi_rate(spark: SparkSession) -> None:
    # No warm-up run (it makes the figures those of a warm engine, which this test does not need).
    report = run_rate("equi", 200, "tiny", duration=4, in_process=True, warmup=False)
    assert report["mode"] == "rate"
    (case,) = report["cases"]
    assert set(case["engines"]) == {"streamjoin", "spark-native"}
    outs = {
        name: (r.get("out"), r.get("drained"), r.get("dropped_late"))
        for name, r in case["engines"].items()
    }
    assert case["results_agree"] is True, (case["expected"], outs)
    assert case["expected"] and case["expected"]["q1"] > 0
    for name, r in case["engines"].items():
        assert not r.get("error"), (name, r.get("error"))
        assert r["drained"], name
        assert r["files_fed"] == 2 * 8  # two streams, one file per 0.5 s tick for 4 s
        assert r["rows_fed"] > 0
        assert r["rows_processed"] == r["rows_fed"] == r["rows_in"], name
        assert r["input_rate"] == pytest.approx(2 * 200, rel=0.2)
        for p in ("p50", "p95", "p99", "max"):
            assert r[f"latency_{p}_s"] > 0, (name, p)
        assert r["latency_p50_s"] <= r["latency_p99_s"] <= r["latency_max_s"]
        assert r["latency_max_s"] < 60
        assert r["batches"] >= 1 and r["batch_p50_ms"] > 0
        assert isinstance(r["keeps_up"], bool)
        assert r["out"] == case["expected"], (name, outs)
        assert r["dropped_late"] == 0, name  # (fed in event-time order: no row is late)
    assert case["ratios"]["latency_p50_s"] > 0
