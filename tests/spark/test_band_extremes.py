"""Band joins over infinities, NaN and the largest doubles: the result is the reference's, and
no value explodes into more buckets than a batch can hold (x = Infinity once asked for 2^63).
The BETWEEN form, where an infinity meets an infinity and NaN meets NaN; `abs(a - b) <= c`
meets neither and takes the same buckets (`tests/spark/test_hostile_job`)."""

from __future__ import annotations

import math
import typing as t

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job
from tests.spark.harness import read_sink, run_batches
from tests.spark.streams import stream_ddl, ts

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

XS = [math.inf, -math.inf, math.nan, 1.7976931348623157e308, -1.7976931348623157e308, 1e300,
      1e300 + 1e285, 1e15, 1e15 + 0.5, 0.5, 1.0, -0.0, 5e-324, None]  # fmt: skip


def test_band_join_of_extreme_doubles(spark: SparkSession, tmp_path: Path) -> None:
    text = "\n".join(
        [
            stream_ddl("A"),
            stream_ddl("B"),
            f"CREATE SINK o WITH (format = 'parquet', path = '{tmp_path / 'out'}');",
            "INSERT INTO o SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b "
            "ON b.x BETWEEN a.x - 1.0 AND a.x + 1.0 "
            "AND b.ts BETWEEN a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL '5' SECOND;",
        ]
    )
    job = parse_job(text)
    rows = [{"id": i, "k": 1, "x": x, "s": "p", "ts": ts(1 + i % 3)} for i, x in enumerate(XS)]
    other = [{**r, "id": 100 + int(t.cast("int", r["id"]))} for r in rows]
    batches = [{"A": rows[:7], "B": other[7:]}, {"A": rows[7:], "B": other[:7]}]
    run_batches(spark, job, batches, tmp_path / "ckpt")
    expected = run_reference(job, batches).outputs["q1"]
    meet = {(a, b - 100) for a, b in t.cast("list[tuple[int, int]]", expected)}
    assert {(0, 0), (1, 1), (2, 2), (5, 5)} <= meet  # (±Infinity, NaN, 1e300 meet their own)
    assert normalize(read_sink(spark, job, "o", ("aid", "bid"))) == normalize(expected)
