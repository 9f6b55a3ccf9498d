"""Starting Spark: a clear line when Java is missing, and a local session tuned for small
batches."""

from __future__ import annotations

import os
import shutil
import subprocess
import typing as t

from streamjoin.errors import JavaMissingError

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
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
}


def get_session(master: str | None = None, app_name: str = "streamjoin") -> SparkSession:
    """The active session, or a new one on `master` (default ``local[*]``) with `LOCAL_CONF`."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    check_java()
    builder = SparkSession.builder.appName(app_name).master(master or "local[*]")
    for key, value in LOCAL_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
