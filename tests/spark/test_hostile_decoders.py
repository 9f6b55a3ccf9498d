"""Hostile input through each decoder (JSON, CSV and Parquet files, Kafka's JSON values): no read
fails, every good row comes out ok and exactly as written, every record made malformed is
dead-lettered with its reason.

Examples are counted as hostile inputs: each hypothesis example is one file of
`hostile.HOSTILE_PER_EXAMPLE` hostile records (built to be malformed, or raw garbage) among good
rows with extreme values, decoded in one Spark read. ``STREAMJOIN_FUZZ_EXAMPLES=10000`` runs at
least 10,000 hostile inputs per decoder; without it, `hostile.CI_INPUTS`.
"""

from __future__ import annotations

import tempfile
import typing as t
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.spark.decoded import check, decode, decode_values
from tests.spark.hostile import Record, fuzz_settings, hostile_file, hostile_table

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

CSV_OPTIONS = ", escape = '\"'"
"""Quotes inside a quoted CSV field are doubled (RFC 4180), not backslash-escaped (Spark's
default)."""


def _run(spark: SparkSession, fmt: str, example: tuple[list[Record], bytes], options: str) -> None:
    records, data = example
    with tempfile.TemporaryDirectory(prefix="sj-fuzz-") as tmp:
        (Path(tmp) / f"part-0.{fmt}").write_bytes(data)
        got = decode(spark, fmt, tmp, options)
    check(records, got)


@fuzz_settings()
@given(hostile_file("json"))
def test_json_decoder(spark: SparkSession, example: tuple[list[Record], bytes]) -> None:
    _run(spark, "json", example, "")


@fuzz_settings()
@given(hostile_file("csv"))
def test_csv_decoder(spark: SparkSession, example: tuple[list[Record], bytes]) -> None:
    _run(spark, "csv", example, CSV_OPTIONS)


@fuzz_settings()
@given(hostile_table(), st.integers(1, 64))
def test_parquet_decoder(
    spark: SparkSession, example: tuple[list[Record], t.Any], row_group: int
) -> None:
    import pyarrow.parquet as pq

    records, table = example
    with tempfile.TemporaryDirectory(prefix="sj-fuzz-") as tmp:
        pq.write_table(table, Path(tmp) / "part-0.parquet", row_group_size=row_group)
        got = decode(spark, "parquet", tmp)
    check(records, got)


@fuzz_settings()
@given(hostile_file("json"))
def test_kafka_json_decoder(spark: SparkSession, example: tuple[list[Record], bytes]) -> None:
    # Kafka's values are the JSON file's lines, one record each (no connector needed).
    records, data = example
    check(records, decode_values(spark, data.split(b"\n")[:-1]))
