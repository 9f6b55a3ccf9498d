"""A GROUP BY buffer's rows folded per pane and key (`plan.partials`), for `HeldGroups`: which
buffers fold (decided once per buffer by their rows' types), the fold planned once per buffer
and run in the tasks that make the rows (``PaneFold.java``), and how a close merges folded
rows; with the helpers both plan Spark SQL over."""

from __future__ import annotations

import typing as t
import uuid
import warnings

from pyspark.sql import DataFrame

from streamjoin.errors import StreamJoinError, StreamJoinWarning
from streamjoin.plan.partials import FOLDED, PartialBuffer, partial_buffer
from streamjoin.runtime.batch import indexplans

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import SparkSession

    from streamjoin.plan.aggregate import GroupBuffer


class PaneFolds:
    """Each buffer's partial aggregates and planned fold, by the buffer's key."""

    def __init__(self) -> None:
        self._folds: dict[str, PartialBuffer | None] = {}
        """Each buffer → its partial aggregates, where a batch's rows are folded (`folded`)."""
        self._made: dict[tuple[str, tuple[str, ...]], t.Any] = {}
        """Each buffer (and the columns a fold keeps last: a read back's unit batch) → the
        ``PaneFold`` that folds its rows in their tasks, planned once."""

    def folded(
        self,
        spark: SparkSession,
        buffer: GroupBuffer,
        key: str,
        rows: DataFrame,
        jar: bool,
        *batch: str,
    ) -> DataFrame:
        """`rows` (of `buffer`'s columns, and `batch`'s, the column of each row's unit's
        batch, if given: kept last) folded per pane and key where `buffer`'s groups merge from
        partial aggregates (`plan.partials`), decided once per buffer (`key`) by the rows'
        types; else as they are. With the `jar`, the fold is planned once per buffer
        (``PaneFold.java``) and runs in the tasks that make the rows; without it Spark plans it
        each batch."""
        if key not in self._folds:
            self._folds[key] = self._fold_of(spark, buffer, rows)
        partial = self._folds[key]
        if partial is None or FOLDED in rows.columns:
            return rows
        if not jar:
            return _fold_sql(spark, partial, rows, batch)
        made = self._made.get((key, batch))
        if made is None:
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            none = DataFrame(jvm.streamjoin.operator.PaneFold.placeholder(rows._jdf), spark)
            planned = _fold_sql(spark, partial, none, batch)
            made = self._made[(key, batch)] = jvm.streamjoin.operator.PaneFold.of(planned._jdf)
            if made is None:
                plan = planned._jdf.queryExecution().optimizedPlan().toString()
                msg = f"{buffer.name}: a batch's fold was planned as no GROUP BY of its own: {plan}"
                raise StreamJoinError(msg)
        return DataFrame(made.apply(rows._jdf), spark)

    def _fold_of(
        self, spark: SparkSession, buffer: GroupBuffer, rows: DataFrame
    ) -> PartialBuffer | None:
        """`buffer`'s partial aggregates, where the groups merged from them have the columns
        and types of its groups of its rows (`rows`, of its columns: an avg of decimals, say,
        merges as a double), planned over no rows; else None."""
        partial = partial_buffer(buffer)
        if partial is None or FOLDED in rows.columns:
            return partial
        none = rows.limit(0)
        try:
            folded = _fold_sql(spark, partial, none, ())
            types = types_of(folded)
            raw = over(spark, [none], lambda view: buffer.group_sql(view, None, None))
            merged = over(spark, [folded], lambda view: partial.group_sql(view, None, None, types))
        except indexplans.PLAN_ERRORS as err:  # (a type the fold's SQL cannot take)
            reason = indexplans.spark_reason(err)
            msg = f"{buffer.name}: its rows are buffered as they are, not folded ({reason})"
            warnings.warn(msg, StreamJoinWarning, stacklevel=2)
            return None
        same = [f.dataType for f in raw.schema.fields] == [f.dataType for f in merged.schema.fields]
        return partial if same else None

    def merging(
        self, buffer: GroupBuffer, key: str, rows: DataFrame
    ) -> tuple[PartialBuffer | None, dict[str, str]]:
        """How `buffer`'s groups of `rows` are made: merged from partial aggregates (with the
        rows' column types) where the rows are folded, else as a GROUP BY of the rows."""
        if FOLDED not in rows.columns:
            return None, {}
        partial = self._folds.get(key) or partial_buffer(buffer)
        assert partial is not None  # (folded rows of a buffer that folds)
        return partial, types_of(rows)

    def drop(self, prefix: str) -> None:
        """Let go of every buffer whose key starts with `prefix`."""
        for key in [k for k in self._folds if k.startswith(prefix)]:
            del self._folds[key]
        for made in [m for m in self._made if m[0].startswith(prefix)]:
            del self._made[made]


def _fold_sql(
    spark: SparkSession, partial: PartialBuffer, rows: DataFrame, batch: tuple[str, ...]
) -> DataFrame:
    """`partial`'s fold of `rows` as Spark plans it."""
    return over(spark, [rows], lambda view: partial.fold_sql(view, *batch))


def types_of(frame: DataFrame) -> dict[str, str]:
    """`frame`'s column types as Spark SQL writes them, by column."""
    return {f.name: f.dataType.simpleString() for f in frame.schema.fields}


def over(spark: SparkSession, frames: Sequence[DataFrame], sql: t.Callable[..., str]) -> DataFrame:
    """Spark's plan of the SQL `sql` makes of the names of temp views of `frames` (in order),
    which go once it is analysed."""
    names = [f"sj_held_{uuid.uuid4().hex[:12]}" for _ in frames]
    for frame, name in zip(frames, names, strict=True):
        frame.createOrReplaceTempView(name)
    try:
        return spark.sql(sql(*names))
    finally:
        for name in names:
            spark.catalog.dropTempView(name)
