"""Spark's cached and checkpointed DataFrames as plans of their own rows: what the hot state
(`runtime.state.hot`) reads its slices through."""

from __future__ import annotations

import typing as t

from py4j.protocol import Py4JError
from pyspark.sql import DataFrame


def checkpoint_rdd(df: DataFrame) -> t.Any:
    """The RDD (JVM) under a locally checkpointed DataFrame, whose blocks hold its rows (None
    where its plan is not that RDD alone)."""
    plan = df._jdf.queryExecution().analyzed()
    return plan.rdd() if plan.getClass().getSimpleName() == "LogicalRDD" else None


def cached_leaf(df: DataFrame) -> tuple[DataFrame, t.Any]:
    """`df` (persisted) as a DataFrame whose plan is its cache alone, and the cache's builder:
    a slice merged from two others then plans as a union of two cached relations, where the
    plans of the DataFrames themselves would nest every merge of the run. Falls back to `df`
    (and no builder) where Spark's cache manager does not answer so."""
    session = df.sparkSession
    jss = session._jsparkSession
    try:
        cached = jss.sharedState().cacheManager().lookupCachedData(df._jdf)
        if cached.isEmpty():
            return df, None
        jvm = session.sparkContext._jvm
        assert jvm is not None
        relation = cached.get().cachedRepresentation()
        jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(jss, relation)
        builder = relation.cacheBuilder()
    except Py4JError:
        return df, None
    return DataFrame(jdf, session), builder
