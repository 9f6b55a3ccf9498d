"""Spark gives a predicate's timestamp comparisons made in microseconds (`plan.micros`) the
truth values of the comparisons as written, in session zones with daylight saving: pairs of
event times around each zone's clock changes, at and next to each interval's bounds."""

from __future__ import annotations

import random
import typing as t

import pytest

from streamjoin.plan.micros import micros_predicate

if t.TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

# Clock changes, in microseconds since the epoch (UTC): New York's spring and autumn of 2024,
# Lord Howe Island's half-hour change of April 2024, London's of March 2024.
_CHANGES = [1710054000, 1730613600, 1712415600, 1711846800]
_INTERVALS = {
    "INTERVAL '10' SECOND": 10_000_000,
    "INTERVAL '90' MINUTE": 5_400_000_000,
    "INTERVAL '23' HOUR": 82_800_000_000,
    "INTERVAL '0.5' SECOND": 500_000,
}
_PREDICATES = [
    "r.ts BETWEEN l.ts - {a} AND l.ts + {b}",
    "r.ts < l.ts + {a}",
    "r.ts >= l.ts - {b}",
    "l.ts + {a} = r.ts",
    "l.ts - {a} <=> r.ts - {b}",
]


@pytest.fixture(params=["America/New_York", "Australia/Lord_Howe", "Europe/London", "UTC"])
def zone(spark: SparkSession, request: pytest.FixtureRequest) -> Iterator[str]:
    before = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    spark.conf.set("spark.sql.session.timeZone", request.param)
    yield str(request.param)
    spark.conf.set("spark.sql.session.timeZone", before)


def _pairs(seed: int) -> list[tuple[int | None, int | None]]:
    """(l, r) event times in microseconds: l within two days of a clock change, r at, just
    inside and just outside l plus or minus each interval, or anywhere near; and NULLs."""
    rnd = random.Random(seed)
    pairs: list[tuple[int | None, int | None]] = [(None, 0), (0, None), (None, None)]
    for _ in range(1500):
        l_us = rnd.choice(_CHANGES) * 1_000_000 + rnd.randint(-2 * 86_400, 2 * 86_400) * 1_000_000
        l_us += rnd.choice([0, rnd.randint(0, 999_999)])
        us = rnd.choice(list(_INTERVALS.values())) * rnd.choice([-1, 1])
        r_us = l_us + us + rnd.choice([-1, 0, 1, rnd.randint(-86_400_000_000, 86_400_000_000)])
        pairs.append((l_us, r_us))
    return pairs


def test_every_pair_meets_the_predicate_as_written_does(spark: SparkSession, zone: str) -> None:
    rows = spark.createDataFrame(_pairs(len(zone)), "l_us BIGINT, r_us BIGINT")
    rows.selectExpr(
        "named_struct('ts', timestamp_micros(l_us)) AS l",
        "named_struct('ts', timestamp_micros(r_us)) AS r",
    ).createOrReplaceTempView("pairs")
    names = list(_INTERVALS)
    columns: list[tuple[str, str, str]] = []
    for template in _PREDICATES:
        for a, b in zip(names, names[1:] + names[:1], strict=True):
            written = template.format(a=a, b=b)
            made = micros_predicate(written, ["l.ts", "r.ts"])
            assert "UNIX_MICROS" in made and "INTERVAL" not in made, made
            columns.append(
                (written, f"({written}) AS w{len(columns)}", f"({made}) AS m{len(columns)}")
            )
    sql = ", ".join(f"{w}, {m}" for _, w, m in columns)
    checked = spark.sql(f"SELECT {sql} FROM pairs").collect()
    assert len(checked) == 1503
    for j, (written, _, _) in enumerate(columns):
        differ = [r for r in checked if r[f"w{j}"] != r[f"m{j}"]]
        assert not differ, (zone, written, differ[:3])
    # (The pairs reach both truth values of each predicate, and NULL.)
    for j in range(len(columns)):
        assert {r[f"w{j}"] for r in checked} >= {True, False, None} or "<=>" in columns[j][0]
