"""Files a run writes into its checkpoint and reads back (`runtime.state.readback`): a read of
files this run wrote with one schema names it and starts no job; a read of others, of files
written with different schemas, or of forgotten ones, lets Spark infer (a job)."""

from __future__ import annotations

import itertools
import time
import typing as t

from streamjoin.runtime.state.readback import WrittenSchemas

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

_groups = itertools.count()


def _jobs_of(spark: SparkSession, read: t.Callable[[], t.Any]) -> int:
    """The Spark jobs that `read` starts. Spark's status store learns of jobs asynchronously,
    in the order they start: once a job started after `read`'s is in it, so are they."""
    sc = spark.sparkContext
    group = f"sj-readback-{next(_groups)}"
    try:
        sc.setJobGroup(group, group)
        read()
        sc.setJobGroup(f"{group}-after", group)
        spark.range(1).collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
    tracker = sc.statusTracker()
    deadline = time.monotonic() + 30
    while not tracker.getJobIdsForGroup(f"{group}-after") and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(tracker.getJobIdsForGroup(group))


def _write(df: DataFrame, path: str, schemas: WrittenSchemas) -> None:
    df.write.mode("overwrite").parquet(path)
    schemas.wrote(path, df)


def test_files_this_run_wrote_are_read_with_their_schema(
    spark: SparkSession, tmp_path: Path
) -> None:
    # (A rollup's table of sums over decimals: each batch's is wider than the last.)
    narrow = spark.sql("SELECT id, CAST(id AS DECIMAL(30, 2)) / 2 AS x FROM range(5)")
    wide = spark.sql("SELECT id, CAST(id AS DECIMAL(38, 2)) AS x FROM range(3)")
    a, b, c = (str(tmp_path / name) for name in ("a", "b", "c"))
    schemas = WrittenSchemas()
    _write(narrow, a, schemas)
    _write(wide, b, schemas)
    narrow.write.parquet(c)  # (not through `schemas`: as a restart finds an older run's)
    got: dict[str, DataFrame] = {}

    def read(name: str, *paths: str) -> t.Callable[[], None]:
        return lambda: got.__setitem__(name, schemas.read(spark, paths))

    assert _jobs_of(spark, read("a", a)) == 0
    assert _jobs_of(spark, read("b", b)) == 0
    assert _jobs_of(spark, read("c", c)) >= 1
    assert _jobs_of(spark, read("ab", a, b)) >= 1  # (two schemas: Spark decides)
    assert got["a"].schema == got["c"].schema
    assert [f.dataType.simpleString() for f in got["b"].schema] == ["bigint", "decimal(38,2)"]
    assert sorted(r.id for r in got["b"].collect()) == [0, 1, 2]
    assert sorted(float(r.x) for r in got["a"].collect()) == [0.0, 0.5, 1.0, 1.5, 2.0]
    schemas.forget([a])
    assert _jobs_of(spark, read("a", a)) >= 1
