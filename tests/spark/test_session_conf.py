"""The batches' Spark settings (`runtime.batch.context.SessionConf`): set on foreachBatch's
session once, and again on any other session a batch runs in (a restart's clone), or where a
value changes."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.batch.context import SessionConf
from streamjoin.runtime.session import BATCH_CONF

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEY = "spark.sql.maxConcurrentOutputFileWriters"


def test_settings_reach_each_session_a_batch_runs_in(spark: SparkSession) -> None:
    first, second = spark.newSession(), spark.newSession()
    conf = SessionConf()
    conf.apply(first, {KEY: "7"})
    assert first.conf.get(KEY) == "7"
    # (A handle of the same JVM session, as each batch gets one, is the same session.)
    again = type(first)(first.sparkContext, first._jsparkSession)
    first.conf.set(KEY, "3")  # (behind its back: it does not look again)
    conf.apply(again, {KEY: "7"})
    assert first.conf.get(KEY) == "3"
    # Another session (a restart's clone) takes every setting again.
    conf.apply(second, {KEY: "7"})
    assert second.conf.get(KEY) == "7"
    assert conf.get(second, KEY) == "7"
    # A changed value is set.
    conf.apply(second, {KEY: "9"})
    assert second.conf.get(KEY) == "9"
    assert conf.get(second, "spark.sql.shuffle.partitions") == second.conf.get(
        "spark.sql.shuffle.partitions"
    )


def test_a_batch_starts_with_its_settings_and_shuffle_partitions(spark: SparkSession) -> None:
    session = spark.newSession()
    conf = SessionConf()
    assert conf.start(session, 3) == 3
    assert session.conf.get("spark.sql.shuffle.partitions") == "3"
    assert all(session.conf.get(k) == v for k, v in BATCH_CONF.items())
    # (The next batch keeps them without being told again.)
    assert conf.start(type(session)(session.sparkContext, session._jsparkSession)) == 3
