"""Parquet files a run writes into its checkpoint and reads back in later batches (group
buffers, rollup tables), read with the schema they were written with.

Spark's Parquet source infers a schema with a Spark job of its own on every read that names
none (it reads a footer in a task). A batch of a job with windowed groups and a rollup read
such files three to five times: as many jobs, each with its scheduling, for a schema that
the files' kind already fixes. The first read of each kind infers it; later ones reuse it.
"""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


class WrittenSchemas:
    """The schema of each kind of file one checkpoint holds, by the kind's signature (a
    buffer's or a rollup's: what its rows mean, so a changed query has another)."""

    def __init__(self) -> None:
        self._known: dict[str, StructType] = {}

    def read(self, spark: SparkSession, paths: t.Sequence[str], signature: str) -> DataFrame:
        """The rows of Parquet `paths`, all files of the kind `signature` names."""
        known = self._known.get(signature)
        if known is not None:
            return spark.read.schema(known).parquet(*paths)
        df = spark.read.parquet(*paths)
        self._known[signature] = df.schema
        return df
