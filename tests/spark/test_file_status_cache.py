"""A long run's reads leave nothing in Spark's shared file-status cache (the soak benchmark
found each batch's file statuses kept there, under a key no later read uses, until 250 MB):
the sessions streamjoin builds and each batch's session set its size to 0
(`runtime.session.FILE_STATUS_CACHE`)."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.session import BATCH_CONF, FILE_STATUS_CACHE

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

SPARK_DEFAULT = str(250 * 1024 * 1024)
FILES = 4


def _cached(spark: SparkSession) -> int:
    """Entries in Spark's shared file-status cache (0 before any read created it)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    holder = jvm.java.lang.Class.forName(
        "org.apache.spark.sql.execution.datasources.FileStatusCache$"
    )
    field = holder.getDeclaredField("sharedCache")
    field.setAccessible(True)
    shared = field.get(holder.getField("MODULE$").get(None))
    if shared is None:
        return 0
    # (Scala may name the private field after its class: the one that ends in "cache".)
    (inner,) = [f for f in shared.getClass().getDeclaredFields() if f.getName().endswith("cache")]
    inner.setAccessible(True)
    return int(inner.get(shared).size())


def _read_each(spark: SparkSession, paths: t.Sequence[str]) -> None:
    for path in paths:
        assert spark.read.parquet(path).count() == 3


def test_reads_in_the_engines_sessions_keep_no_file_statuses(
    spark: SparkSession, tmp_path: Path
) -> None:
    paths = [str(tmp_path / str(i)) for i in range(FILES)]
    for path in paths:
        spark.range(3).write.parquet(path)
    # The session streamjoin builds (the tests' one has its settings).
    before = _cached(spark)
    _read_each(spark, paths)
    assert _cached(spark) == before

    # A caller's session with Spark's default keeps one entry a read or more ...
    caller = spark.newSession()
    caller.conf.set(FILE_STATUS_CACHE, SPARK_DEFAULT)
    before = _cached(caller)
    _read_each(caller, paths)
    assert _cached(caller) >= before + FILES

    # ... and a batch's session made from it, none.
    batch = caller.newSession()
    batch.conf.set(FILE_STATUS_CACHE, SPARK_DEFAULT)
    for key, value in BATCH_CONF.items():
        batch.conf.set(key, value)
    before = _cached(batch)
    _read_each(batch, paths)
    assert _cached(batch) == before
