"""Speed-ups for a driver in Spark's local mode.

They apply only where streamjoin starts the driver's JVM itself with a ``local[…]`` master
(never under ``spark-submit``, nor for ``spark://``, ``local-cluster``, YARN or Kubernetes), and
``STREAMJOIN_LOCAL=off`` (`runtime.settings`) turns them off. Each is kept because it pays on a
job that runs for minutes, batch after batch, not only on a short benchmark (docs/dev-log.md,
*Local-mode speed-ups on a 10-minute live run*):

- Spark's checkpoint logs written through Hadoop's FileSystem instead of its FileContext, which
  on a local disk without Hadoop's native library starts a ``readlink`` process per file
  status, hundreds between a job's batches (the FileSystem's rename is atomic on a local disk);
- `localfs`: Hadoop's local file system without a ``chmod`` process for each file it creates.

`local_conf` also puts streamjoin's jar (`runtime.jvm`) on the class path of every driver it
starts, and in ``spark.jars`` for a cluster's executors (`runtime.batch.placed`); ``streamjoin
jar`` prints its path for ``spark-submit``.
"""

from __future__ import annotations

import re
import typing as t

from streamjoin.runtime.jvm.jar import build_jar, placed_index_conf
from streamjoin.runtime.local.localfs import local_fs_settings

if t.TYPE_CHECKING:
    from collections.abc import Mapping

LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?")
"""A master whose executors run inside the driver's JVM (``local-cluster[…]`` starts others)."""

CHECKPOINT_MANAGER = {
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager"
    )
}


def local_conf(java: str, spark_home: str, master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """The settings a driver started with `master` and `conf` takes from this package (none
    for a master that is not local)."""
    if not LOCAL_MASTER.fullmatch(master.strip()):
        return placed_index_conf(conf, lambda: build_jar(java, spark_home))
    out = {k: v for k, v in CHECKPOINT_MANAGER.items() if k not in conf}
    return out | local_fs_settings(conf, lambda: build_jar(java, spark_home))
