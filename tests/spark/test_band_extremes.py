"""Band joins over infinities, NaN and the largest doubles: the result is the reference's, and
no value explodes into more buckets than a batch can hold (x = Infinity once asked for 2^63)."""

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


BANDS = ("abs(a.x - b.x) <= 1.0", "b.x BETWEEN a.x - 1.0 AND a.x + 1.0")


def test_band_joins_of_extreme_doubles(spark: SparkSession, tmp_path: Path) -> None:
    window = "b.ts BETWEEN a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL '5' SECOND"
    text = "\n".join(
        [
            stream_ddl("A"),
            stream_ddl("B"),
            *(
                f"CREATE SINK o{i} WITH (format = 'parquet', path = '{tmp_path / f'out{i}'}');\n"
                f"INSERT INTO o{i} SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b "
                f"ON {band} AND {window};"
                for i, band in enumerate(BANDS)
            ),
        ]
    )
    job = parse_job(text)
    rows = [{"id": i, "k": 1, "x": x, "s": "p", "ts": ts(1 + i % 3)} for i, x in enumerate(XS)]
    other = [{**r, "id": 100 + int(t.cast("int", r["id"]))} for r in rows]
    batches = [{"A": rows[:7], "B": other[7:]}, {"A": rows[7:], "B": other[:7]}]
    run_batches(spark, job, batches, tmp_path / "ckpt")
    expected = run_reference(job, batches).outputs
    # Infinities meet in the BETWEEN form only, equal finite values in both.
    assert len(expected["q2"]) > len(expected["q1"]) > 0
    for i, q in enumerate(("q1", "q2")):
        got = read_sink(spark, job, f"o{i}", ("aid", "bid"))
        assert normalize(got) == normalize(expected[q]), q
