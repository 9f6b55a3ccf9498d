"""Starting Spark: a clear line when Java is missing, and a session tuned for small batches —
in local mode, on a cluster (``--master spark://…``), or under ``spark-submit``."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import typing as t

from streamjoin.errors import JavaMissingError
from streamjoin.runtime.local.classarchive import ClassArchive, plan_archive
from streamjoin.runtime.local.localfs import build_jar, local_fs_settings

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
    # State is read back as many small directories; listing them with a Spark job per batch
    # would cost more than the listing itself.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "2g",
    # The JVM's optimising compiler (C2) is busy for the whole of a short job: on 2 cores it took
    # 31 s of CPU in the 25 s of the equi benchmark, half the machine, while every batch waited
    # for cores. The quick compiler alone (C1) makes task code slower per row but gives the CPU
    # back: that benchmark ran in 20 s instead of 23.5 s, Spark's native join 25-27 s instead of
    # 27 s (measured, session 11). The parallel collector needs no concurrent GC threads. This
    # is for local mode; under spark-submit, or with a driver of one's own, its flags apply.
    DRIVER_JAVA_OPTIONS: "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    # Spark's default checkpoint manager renames through Hadoop's FileContext, which on a local
    # disk without Hadoop's native library starts a `readlink` process per file status: about
    # 330 processes for the ten batches of the equi benchmark, on the stream's own thread
    # between batches. The FileSystem-based manager writes the same logs with none (its rename
    # is atomic on local and HDFS paths). Spark's loop between batches: 0.16-0.3 s -> 0.07-0.16 s,
    # the run 16.7 -> 15.7 s (four interleaved pairs, session 18).
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager"
    ),
    # PySpark's call-site capture costs three JVM round trips per column function (a batch
    # makes hundreds); the engine's errors name the job's own lines instead.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


# Settings of the session foreachBatch hands over (a clone: the caller's session is untouched).
BATCH_CONF = {
    # The joins broadcast a small delta; adaptive re-planning adds about 0.3 s per query and
    # batch (measured) and has nothing to adapt.
    "spark.sql.adaptive.enabled": "false",
    # INT96 timestamps (Spark's default) go through a calendar rebase per value: a tenth of the
    # batch's CPU in a profile of the equi benchmark. Plain int64 microseconds need none.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    # Writing one directory per stream needs no sort of the batch when each task keeps a
    # writer open per stream.
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "16",
}


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
    if not submitted:
        settings |= _local_fs(java, master or "local[*]", settings)
    archive = None if submitted else _class_archive(java, settings)
    if archive is not None:
        options = settings.get(DRIVER_JAVA_OPTIONS, "")
        settings[DRIVER_JAVA_OPTIONS] = f"{options} {archive.java_options()}".strip()
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
    try:
        spark = builder.getOrCreate()
    except BaseException:
        if archive is not None:
            from pyspark import SparkContext

            if SparkContext._gateway is not None:  # (the JVM started: it dumps when it exits)
                atexit.register(archive.finish, _jvm_exit(None))
            else:
                archive.finish(lambda: None)  # (releases it for another session)
        raise
    spark.sparkContext.setLogLevel("ERROR")
    if archive is not None:
        # When Python exits: stop the session, let the JVM exit (it dumps the archive on its
        # way out) and publish what it wrote.
        atexit.register(archive.finish, _jvm_exit(spark))
    return spark


def _class_archive(java: str, settings: t.Mapping[str, str]) -> ClassArchive | None:
    """The class archive for the driver JVM this session is about to start (None if a JVM is
    already running in this process: its flags are set)."""
    from pyspark import SparkContext
    from pyspark.find_spark_home import _find_spark_home

    if SparkContext._gateway is not None:
        return None
    # (The heap's size is part of what an archive is valid for: it sets how pointers are kept.)
    heap = settings.get("spark.driver.memory")
    flags = settings.get(DRIVER_JAVA_OPTIONS, "") + (f" -Xmx{heap}" if heap else "")
    # (`_find_spark_home` is PySpark's own way to find the jars its JVM will load.)
    return plan_archive(java, _find_spark_home(), flags, settings)


def _local_fs(java: str, master: str, settings: t.Mapping[str, str]) -> dict[str, str]:
    """The settings that give a local driver streamjoin's process-free local file system
    (`streamjoin.runtime.local.localfs`), building it at first use; none if a JVM is running in this
    process already (its class path is set)."""
    from pyspark import SparkContext
    from pyspark.find_spark_home import _find_spark_home

    if SparkContext._gateway is not None:
        return {}
    return local_fs_settings(master, settings, lambda: build_jar(java, _find_spark_home()))


def _jvm_exit(spark: SparkSession | None) -> t.Callable[[], int | None]:
    """A call that stops `spark`, lets the gateway's JVM exit and returns its exit code (None
    if there is no such process, or it had to be killed)."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)

    def jvm_exit() -> int | None:
        if proc is None:
            return None
        if proc.poll() is not None:
            # (Gone before Python: an orderly exit has dumped; any other is no verdict on
            # whether this configuration can.)
            return 0 if proc.returncode == 0 else None
        print(
            "streamjoin: saving the driver JVM's classes for faster starts (once)...",
            file=sys.stderr,
            flush=True,
        )
        if spark is not None:
            with contextlib.suppress(Exception):  # (a JVM gone already: nothing to stop)
                spark.stop()
        with contextlib.suppress(OSError):
            proc.stdin.close()  # the gateway exits when its stdin closes
        try:
            return int(proc.wait(timeout=300))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None

    return jvm_exit


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


def count_conf(
    spark: SparkSession, name: str, default: int, unit: str = "rows", least: int | None = None
) -> int:
    """The Spark conf `name`, a whole number of `unit` (at least `least`), checked (`default`
    when unset)."""
    value = spark.conf.get(name, None)
    if value is None:
        return default
    try:
        count = int(value)
    except ValueError:
        count = None
    if count is None or (least is not None and count < least):
        floor = "" if least is None else f", at least {least}"
        msg = f"{name} must be a whole number of {unit}{floor}; got {value!r}"
        raise ValueError(msg)
    return count
