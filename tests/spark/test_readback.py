"""Files a run writes into its checkpoint and reads back (`runtime.state.readback`): only the
first read of a kind infers its schema, which Spark does with a job; later reads run none and
see the same rows and columns."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.state.readback import WrittenSchemas

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


def _jobs_of(spark: SparkSession, group: str, read: t.Callable[[], t.Any]) -> int:
    """The Spark jobs that `read` starts (under job group `group`)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        read()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return len(sc.statusTracker().getJobIdsForGroup(group))


def test_only_the_first_read_of_a_kind_infers_its_schema(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = spark.sql("SELECT id, CAST(id AS DOUBLE) / 2 AS x, 'k' || id AS k FROM range(5)")
    paths = [str(tmp_path / f"unit-{i}") for i in range(2)]
    for path in paths:
        rows.write.parquet(path)
    schemas = WrittenSchemas()
    got: dict[str, t.Any] = {}

    def read(name: str, signature: str, files: list[str]) -> t.Callable[[], None]:
        def run() -> None:
            got[name] = schemas.read(spark, files, signature)

        return run

    assert _jobs_of(spark, "sj-first", read("first", "s1", paths[:1])) >= 1
    assert _jobs_of(spark, "sj-again", read("again", "s1", paths)) == 0
    assert _jobs_of(spark, "sj-other", read("other", "s2", paths[1:])) >= 1
    assert got["again"].schema == got["first"].schema
    assert got["again"].columns == ["id", "x", "k"]
    assert sorted(r.id for r in got["again"].collect()) == sorted([*range(5), *range(5)])
