"""Starting Spark: a clear line when Java is missing, and a session tuned for small batches —
in local mode, on a cluster (``--master spark://…``), or under ``spark-submit``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import typing as t

from streamjoin.errors import JavaMissingError
from streamjoin.runtime.local import local_conf
from streamjoin.runtime.settings import Settings

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAVA_FIX = (
    "Java 17 is needed to run Spark and none was found: install it "
    "(Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless) or set JAVA_HOME"
)


def check_java() -> str:
    """The java executable Spark will use; `JavaMissingError` with the fix if there is none."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise JavaMissingError(JAVA_FIX)
    try:
        subprocess.run([java, "-version"], capture_output=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        msg = f"{JAVA_FIX} ({java} -version failed: {err})"
        raise JavaMissingError(msg) from err
    return java


DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
"""The setting that carries the driver JVM's flags."""

FILE_STATUS_CACHE = "spark.sql.hive.filesourcePartitionFileCacheSize"
"""The bytes of file statuses Spark keeps across reads (0: none)."""

LOCAL_CONF: dict[str, str] = {
    # Event times are wall-clock instants; a fixed zone keeps output independent of the machine.
    "spark.sql.session.timeZone": "UTC",
    # Non-ANSI rules: a division by zero in one row's predicate yields NULL (no match) instead of
    # failing the whole stream; the reference executor follows the same rules.
    "spark.sql.ansi.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # With the UI off, Spark's status store still keeps its last 1,000 jobs, stages and SQL
    # executions with their plans' graphs: on a live stream of several jobs a second that was
    # most of a 2 GB driver's live heap, which ran out within 15 minutes (the soak benchmark).
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "1000",
    "spark.sql.ui.retainedExecutions": "50",
    # Spark's file source compacts its log every 10 batches into a file naming every file it
    # ever read, and keeps each compact file this long (10 minutes by default): on a live
    # stream, about 60 of them, 93 MB an hour (the soak benchmark). The engine reads a batch's
    # entries as the batch starts.
    "spark.sql.streaming.fileSource.log.cleanupDelay": "60s",
    # State is read back as many small directories; listing them with a Spark job per batch
    # would cost more than the listing itself.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
    # Every read of files (Spark's file source each batch, the engine's own reads) keeps their
    # statuses in Spark's shared cache under a key no later read uses, until the cache holds
    # 250 MB: a live heap that grew ~40 MB an hour in the soak benchmark, for no hit.
    FILE_STATUS_CACHE: "0",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "2g",
    # Each broadcast join's hash table takes a first page of this size; Spark's default (up to
    # 64 MB, from memory and cores) made every small delta's broadcast a huge array and the
    # driver's old generation fill every few batches (docs/dev-log.md has the GC log).
    "spark.buffer.pageSize": "1m",
    # The parallel collector needs no concurrent GC threads, which compete with the tasks for
    # the cores of a small machine. Under spark-submit, or with a driver of one's own, its
    # flags apply.
    DRIVER_JAVA_OPTIONS: "-XX:+UseParallelGC",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    # PySpark's call-site capture costs three JVM round trips per column function (a batch
    # makes hundreds); the engine's errors name the job's own lines instead.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


# Settings of the session foreachBatch hands over (a clone: the caller's session is untouched).
BATCH_CONF = {
    # The joins broadcast a small delta; adaptive re-planning adds a planning round per query
    # and batch and has nothing to adapt.
    "spark.sql.adaptive.enabled": "false",
    # INT96 timestamps (Spark's default) go through a calendar rebase per value (a profile is in
    # docs/dev-log.md); plain int64 microseconds need none.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    # Writing one directory per stream needs no sort of the batch when each task keeps a
    # writer open per stream.
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "16",
    # Spark caches a DataFrame in a clone of its session unless these are off (its cache
    # manager turns them off for the cached plan); the batches cache every stream's new rows.
    "spark.sql.sources.bucketing.autoBucketedScan.enabled": "false",
    "spark.sql.adaptive.applyFinalStageShuffleOptimizations": "false",
    # (See LOCAL_CONF: also on a session the caller built.)
    FILE_STATUS_CACHE: "0",
}


def clone(spark: SparkSession) -> SparkSession:
    """A clone of `spark` (its settings and temp views, copied): where batches put theirs, off
    the caller's session, as Spark's loop runs each batch in a clone."""
    from pyspark.sql import SparkSession

    return SparkSession(spark.sparkContext, jsparkSession=spark._jsparkSession.cloneSession())


def get_session(
    master: str | None = None,
    app_name: str = "streamjoin",
    conf: t.Mapping[str, str] | None = None,
) -> SparkSession:
    """The active session, or a new one with `LOCAL_CONF`, updated by `conf`.

    The master is `master` if given; else, under ``spark-submit``, the one it was given;
    else ``local[*]``. Under ``spark-submit`` its ``--conf`` settings win over both.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    java = check_java()
    submitted = _submitted_conf()
    settings = LOCAL_CONF | dict(conf or {})
    if not submitted and Settings.read(settings.get).local:
        settings |= _local_conf(java, master or "local[*]", settings)
    if not submitted:
        # Executors start Python workers with the driver's PYSPARK_PYTHON (default "python3",
        # whichever that is on the PATH): make it the interpreter streamjoin runs in.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    if "spark.app.name" not in submitted:
        builder = builder.appName(app_name)
    if master or "spark.master" not in submitted:
        builder = builder.master(master or "local[*]")
    for key, value in settings.items():
        if key not in submitted:
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _local_conf(java: str, master: str, settings: t.Mapping[str, str]) -> dict[str, str]:
    """The local-mode settings of a driver this process is about to start (`runtime.local`);
    none if a JVM runs in this process already (its flags and class path are set)."""
    from pyspark import SparkContext
    from pyspark.find_spark_home import _find_spark_home

    if SparkContext._gateway is not None:
        return {}
    return local_conf(java, _find_spark_home(), master, settings)


def _submitted_conf() -> dict[str, str]:
    """The settings ``spark-submit`` started this driver with (empty when Python started it).

    spark-submit runs the driver's JVM first and hands its gateway to Python in
    ``PYSPARK_GATEWAY_PORT``; the JVM's system properties then hold the master and every
    ``--conf``.
    """
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())
