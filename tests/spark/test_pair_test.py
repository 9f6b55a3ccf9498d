"""A predicate with no key and no value band, within an event-time window: the operator tests
each pair its window reaches over the stored side's columns (``PairTest``, Spark's code for
the predicate over arrays), or, where the predicate reads a value of no primitive type, with
Spark's predicate on the pair's row. Both against the reference, on values that test Spark's
rules: NULL, NaN, infinities, -0.0, an INT beside a BIGINT."""

from __future__ import annotations

import math
import random
import shutil
import tempfile
import typing as t
from datetime import datetime, timedelta
from math import floor
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from benchmarks.engines_measure import ProbeWork
from streamjoin.plan.physical import TIME_BAND_SPLIT
from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job

from .harness import read_sink, run_batches
from .streams import ts

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

DDL = """
CREATE STREAM {name} (id BIGINT, i INT, n BIGINT, x DOUBLE, s STRING, ts TIMESTAMP,
                      WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (format = 'json', path = '/unused');
"""

DOUBLES = [None, math.nan, math.inf, -math.inf, -0.0, 0.0, 0.5, 1.0, 2.5, -3.0, 7.0]

atoms = st.sampled_from(
    [
        "a.x * b.x > 1",
        "a.x < b.x",
        "NOT (a.x >= b.x)",
        "a.x + b.x <= 3.5",
        "a.x / b.x > 0.5",
        "a.i * b.i >= 2",
        "a.i + b.n < 4",
        "CAST(a.i AS DOUBLE) > b.x",
        "coalesce(a.x, 1.0) * b.i > 2",
        "(a.x IS NULL OR b.x > 1)",
        "(a.i > b.i OR a.x = b.x)",
        "abs(a.n - b.i) >= 1",
        "a.s <> b.s",
    ]
)


def _batches(seed: int, n_batches: int) -> list[dict[str, list[dict[str, object]]]]:
    """Rows of both streams, 2 s of event time a batch, out of order by up to 1.5 s."""
    rng = random.Random(seed)
    batches = []
    uid = 0
    for b in range(n_batches):
        batch: dict[str, list[dict[str, object]]] = {}
        for name in ("A", "B"):
            rows: list[dict[str, object]] = []
            for _ in range(rng.randint(4, 10)):
                uid += 1
                rows.append(
                    {
                        "id": uid,
                        "i": rng.choice([None, -2, 0, 1, 3, 5]),
                        "n": rng.choice([None, -1, 2, 4]),
                        "x": rng.choice(DOUBLES),
                        "s": rng.choice(["p", "q", None]),
                        "ts": ts(b * 2.0 + rng.uniform(-1.5, 2.0)),
                    }
                )
            batch[name] = rows
        batches.append(batch)
    return batches


@settings(max_examples=8, deadline=None)
@given(
    conjuncts=st.lists(atoms, min_size=1, max_size=2),
    seconds=st.integers(1, 4),
    seed=st.integers(0, 10_000),
    n_batches=st.integers(1, 4),
)
@example(conjuncts=["a.x * b.x > 1"], seconds=3, seed=7, n_batches=4)
@example(conjuncts=["a.s <> b.s", "a.x < b.x"], seconds=2, seed=3, n_batches=3)
def test_window_loop_matches_reference(
    spark: SparkSession, conjuncts: list[str], seconds: int, seed: int, n_batches: int
) -> None:
    s = seconds
    window = f"b.ts BETWEEN a.ts - INTERVAL '{s}' SECOND AND a.ts + INTERVAL '{s}' SECOND"
    predicate = " AND ".join([*conjuncts, window])
    tmp = Path(tempfile.mkdtemp(prefix="sj-pairs-"))
    try:
        text = "\n".join(
            [
                DDL.format(name="A"),
                DDL.format(name="B"),
                f"CREATE SINK o WITH (format = 'parquet', path = '{tmp / 'o'}');",
                f"INSERT INTO o SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON {predicate};",
            ]
        )
        job = parse_job(text)
        batches = _batches(seed, n_batches)
        run_batches(spark, job, batches, tmp / "ckpt")
        got = read_sink(spark, job, "o", ("aid", "bid"))
        assert normalize(got) == normalize(run_reference(job, batches).outputs["q1"]), predicate
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_condition_that_reads_one_side_only_matches_reference(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The stored side whose columns the condition never reads keeps none (a nested loop over
    the full history, its condition on the left rows only)."""
    text = "\n".join(
        [
            DDL.format(name="A"),
            DDL.format(name="B"),
            f"CREATE SINK o WITH (format = 'parquet', path = '{tmp_path / 'o'}');",
            "INSERT INTO o SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON a.x * a.i > 1;",
        ]
    )
    job = parse_job(text)
    batches = _batches(11, 3)
    run_batches(spark, job, batches, tmp_path / "ckpt")
    got = read_sink(spark, job, "o", ("aid", "bid"))
    assert normalize(got) == normalize(run_reference(job, batches).outputs["q1"])


def _micros(at: object) -> int:
    """Microseconds since the epoch of a naive UTC event time."""
    return (t.cast("datetime", at) - datetime(1970, 1, 1)) // timedelta(microseconds=1)


def test_long_runs_of_a_time_bucket_match_reference(spark: SparkSession, tmp_path: Path) -> None:
    """Rows in time order, many a batch: each time bucket's rows lie in runs of consecutive
    slots longer than `IndexProbe.LONG_RUN`, tested a run at a time (a new right row only
    against the left rows of earlier batches, a run cut at the batch's first new slot)."""
    rng = random.Random(5)
    batches, uid = [], 0
    for b in range(4):
        batch: dict[str, list[dict[str, object]]] = {}
        for name in ("A", "B"):
            rows: list[dict[str, object]] = []
            for i in range(60):
                uid += 1
                x = rng.choice(DOUBLES)
                at = ts(b * 2.0 + i * 2.0 / 60)
                rows.append({"id": uid, "i": 1, "n": 2, "x": x, "s": "p", "ts": at})
            batch[name] = rows
        batches.append(batch)
    window = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND"
    text = "\n".join(
        [
            DDL.format(name="A"),
            DDL.format(name="B"),
            f"CREATE SINK o WITH (format = 'parquet', path = '{tmp_path / 'o'}');",
            "INSERT INTO o SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b "
            f"ON a.x * b.x > 1 AND {window};",
        ]
    )
    job = parse_job(text)
    work = ProbeWork(spark)
    run_batches(spark, job, batches, tmp_path / "ckpt")
    tested, cpu = work.since()
    got = read_sink(spark, job, "o", ("aid", "bid"))
    want = run_reference(job, batches).outputs["q1"]
    assert len(want) > 1000
    assert normalize(got) == normalize(want)
    # Each pair is tested once, by its newer row's probe (the left row's in a batch of both),
    # over the time buckets its window reaches (`joins.bucket_range`): no other pair.
    width = 6e6 / TIME_BAND_SPLIT

    def reaches(x: int, y: int) -> bool:
        return floor((x - 3e6) / width) <= floor(y / width) <= floor((x + 3e6) / width)

    sides = [[(i, _micros(r["ts"])) for i, b in enumerate(batches) for r in b[n]] for n in "AB"]
    pairs = [reaches(a, b) if i >= j else reaches(b, a) for i, a in sides[0] for j, b in sides[1]]
    assert tested == sum(pairs)
    assert cpu > 0
