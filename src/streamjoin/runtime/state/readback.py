"""Parquet files a run writes into its checkpoint and reads back in later batches (group
buffers, rollup tables), read with the schema they were written with.

Spark's Parquet source infers a schema with a Spark job of its own on every read that names
none (it reads a footer in a task). A batch of a job with windowed groups and a rollup read
such files three to five times: as many jobs, each with its scheduling. The schema of what a
batch writes is known without a job (the written DataFrame's), so it is kept by path; files
this run did not write (a restart's older units) are read as before, and a reader that infers
one's schema may record it (`wrote`).
"""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


class WrittenSchemas:
    """The schema of each Parquet directory this run wrote into one checkpoint, by path.

    By path, not by the kind of file: a rollup's table of sums over decimals widens from one
    batch's table to the next, and two buffers of one query may hold other columns' types.
    """

    def __init__(self) -> None:
        self._known: dict[str, StructType] = {}

    def wrote(self, path: str, df: DataFrame) -> None:
        """`df` was written as Parquet under `path` (replacing what was there)."""
        from pyspark.sql.types import StructField, StructType

        # (As a read of the files infers it: every column nullable, none with metadata.)
        fields = [StructField(f.name, f.dataType, nullable=True) for f in df.schema.fields]
        self._known[path] = StructType(fields)

    def known(self, path: str) -> StructType | None:
        """The schema this run wrote `path` with (None: it did not write it)."""
        return self._known.get(path)

    def read(self, spark: SparkSession, paths: Sequence[str]) -> DataFrame:
        """The rows of the Parquet directories `paths`: with their schema where this run wrote
        them all with one, else with the one Spark infers."""
        schemas = [self._known.get(p) for p in paths]
        first = schemas[0] if schemas else None
        if first is not None and all(s == first for s in schemas):
            return spark.read.schema(first).parquet(*paths)
        return spark.read.parquet(*paths)

    def forget(self, paths: Iterable[str]) -> None:
        """`paths` were deleted."""
        for path in paths:
            self._known.pop(path, None)
