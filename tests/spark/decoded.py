"""What a stream's decoder makes of a file (`decode`) or of Kafka's values (`decode_values`),
and the check that good rows came out ok and exact and built records malformed with their
reasons (`check`); the records are `tests.spark.hostile`'s."""

from __future__ import annotations

import typing as t
from decimal import Decimal

from streamjoin.plan import plan_job
from streamjoin.runtime.batch.intake import classify
from streamjoin.runtime.sources import conform, file_reader, parse_values, reader_options, tag
from streamjoin.sql import parse_job
from tests.spark.hostile import Built, Good, Record, job_text, micros

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.plan import JobPlan


def decode(spark: SparkSession, fmt: str, path: str, options: str = "") -> list[dict[str, t.Any]]:
    """The rows the stream's decoder makes of the files under `path`: the reader, `conform`,
    `tag` and `intake.classify`, as a streaming batch runs them."""
    plan = plan_job(parse_job(job_text(fmt, path, options)))
    sp = plan.streams[0]
    df = file_reader(spark.read.options(**reader_options(sp.stream)), sp.stream).load(path)
    return _classified(df, plan)


def decode_values(spark: SparkSession, values: list[bytes]) -> list[dict[str, t.Any]]:
    """The rows a Kafka stream's decoder makes of records with these values (`parse_values`,
    then as `decode`)."""
    plan = plan_job(parse_job(job_text("kafka", "/unused")))
    raw = spark.createDataFrame([(bytearray(v),) for v in values], "value BINARY")
    return _classified(parse_values(raw, plan.streams[0].stream), plan)


def _classified(df: DataFrame, plan: JobPlan) -> list[dict[str, t.Any]]:
    sp = plan.streams[0]
    rows = classify(tag(conform(df, sp.stream), sp), plan, None)
    picked = rows.selectExpr(
        "_sj_raw AS raw", "_sj_status AS status", "_sj_reason AS reason", "_sj_ts AS ts",
        "s0_id AS id", "s0_n AS n", "s0_x AS x", "CAST(s0_d AS STRING) AS d", "s0_s AS s",
        "s0_b AS b",
    )  # fmt: skip
    return [r.asDict() for r in picked.collect()]


def check(records: list[Record], got: list[dict[str, t.Any]]) -> None:
    """Every good row came out once, ok and exact; every built record once, malformed with its
    reason. (Garbage may come out as anything.)"""
    by_id: dict[int, list[dict[str, t.Any]]] = {}
    for row in got:
        if row["id"] is not None:
            by_id.setdefault(row["id"], []).append(row)
    for r in records:
        if isinstance(r, Good):
            rows = by_id.get(r.id, [])
            assert len(rows) == 1, (r, rows)
            _check_good(r, rows[0])
        elif isinstance(r, Built):
            mine = [row for row in got if _marked(row, r.mark)]
            assert len(mine) == 1, (r, mine)
            row = mine[0]
            assert row["status"] == "malformed", (r, row)
            assert row["reason"], (r, row)
            if r.reason is not None:
                assert row["reason"] == r.reason, (r, row)


def _marked(row: dict[str, t.Any], mark: int) -> bool:
    raw = row["raw"]
    return (raw is not None and str(mark) in raw) or row["id"] == mark or row["s"] == f"m{mark}"


def _check_good(r: Good, row: dict[str, t.Any]) -> None:
    assert row["status"] == "ok" and row["raw"] is None, (r, row)
    assert row["ts"] == micros(r.ts), (r, row)
    assert (row["n"], row["s"], row["b"]) == (r.n, r.s, r.b), (r, row)
    assert (row["x"] is None) == (r.x is None) and repr(row["x"]) == repr(r.x), (r, row)
    assert (row["d"] is None) == (r.d is None), (r, row)
    assert row["d"] is None or Decimal(row["d"]) == r.d, (r, row)
