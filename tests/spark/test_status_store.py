"""A long run's driver keeps a bounded history of Spark's jobs and SQL executions (Spark's
status store, which the soak benchmark found filling a 2 GB driver on a live stream): the
local session keeps the last 50 of each (`runtime.session.LOCAL_CONF`)."""

from __future__ import annotations

import time
import typing as t

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEPT = 50


def _counts(spark: SparkSession) -> tuple[int, int]:
    """(jobs, SQL executions) Spark's status store holds now."""
    sc = spark.sparkContext
    jvm = sc._jvm
    assert jvm is not None
    store = sc._jsc.sc().statusStore()
    jobs = len(sc.statusTracker().getJobIdsForGroup(None))
    sql = jvm.org.apache.spark.sql.execution.ui.SQLAppStatusStore(
        store.store(), jvm.scala.Option.empty()
    )
    return jobs, int(sql.executionsCount())


def test_the_status_store_keeps_a_bounded_history(spark: SparkSession) -> None:
    for i in range(3 * KEPT):
        spark.range(i + 1).selectExpr("sum(id)").collect()
    # (Spark trims its store asynchronously, a tenth of the bound at a time.)
    deadline = time.monotonic() + 30
    while max(_counts(spark)) > KEPT and time.monotonic() < deadline:
        time.sleep(0.5)
    jobs, executions = _counts(spark)
    assert 0 < jobs <= KEPT and 0 < executions <= KEPT, (jobs, executions)
