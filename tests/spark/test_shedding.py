"""Probe shedding under overload (``WITH (overload = 'shed')``) on Spark: every pair written is
a pair of the exact result, written once, across a replay; with a budget that covers the input
the result is exact; the probes skipped are reported per direction."""

from __future__ import annotations

import typing as t
from collections import Counter

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job

from .harness import read_sink, run_batches
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from streamjoin.model import Job

COLUMNS = ["aid", "bid"]


def _job(tmp_path: Path, budget: int) -> Job:
    sink = f"CREATE SINK g WITH (format = 'parquet', path = '{tmp_path / 'g'}');"
    insert = (
        "INSERT INTO g SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON a.k = b.k "
        "AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND "
        f"WITH (overload = 'shed', budget = '{budget}');"
    )
    return parse_job("\n".join([stream_ddl("A"), stream_ddl("B"), sink, insert]))


def test_a_tight_budget_writes_a_subset_of_true_pairs_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    job = _job(tmp_path, budget=4)
    batches = make_batches(5, n_batches=5, rows_per_batch=16, keys=2)
    ckpt = tmp_path / "ckpt"
    first = run_batches(spark, job, batches[:3], ckpt)
    rest = run_batches(spark, job, batches[2:], ckpt, first_batch=2)  # (replays batch 2)
    exact = Counter(normalize(run_reference(job, batches).outputs["q1"]))
    got = Counter(normalize(read_sink(spark, job, "g", COLUMNS)))
    assert not got - exact, "a pair that is not in the exact result, or one written twice"
    assert sum(got.values()) < sum(exact.values())
    skipped = [r.shed["q1"] for r in [*first, *rest[1:]] if r.shed.get("q1")]
    assert any(s["left"] + s["right"] > 0 for s in skipped)
    last = rest[-1].manifest.overload["q1"]
    assert last["shed.left"] + last["shed.right"] == sum(s["left"] + s["right"] for s in skipped)


def test_a_budget_that_covers_the_input_is_exact(spark: SparkSession, tmp_path: Path) -> None:
    job = _job(tmp_path, budget=1_000_000)
    batches = make_batches(6, n_batches=3, rows_per_batch=12, keys=2)
    reports = run_batches(spark, job, batches, tmp_path / "ckpt")
    got = read_sink(spark, job, "g", COLUMNS)
    assert normalize(got) == normalize(run_reference(job, batches).outputs["q1"])
    assert all(set(r.shed["q1"].values()) == {0} for r in reports)
