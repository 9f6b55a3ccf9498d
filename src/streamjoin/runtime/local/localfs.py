"""A local file system for a local driver that creates files without starting processes.

Spark's pip package has no native Hadoop library, so Hadoop's local file system runs the
``chmod`` command for every file and directory it creates, some 20 per batch of a streaming
query (Spark's offset, commit and source logs, each a temporary file and its checksum file, then
the batch's output), 8 of them on the stream's own thread between batches.
``LocalFiles`` (``runtime/jvm/localfs/``, in streamjoin's jar: `runtime.jvm`) is the same file
system with permissions set through Java's own calls, named as Hadoop's ``fs.file.impl``; only
for a driver streamjoin starts itself with a local master (`runtime.local`).
"""

from __future__ import annotations

import os
import typing as t

from streamjoin.runtime.jvm.jar import CLASS_PATH

FS_IMPL = "spark.hadoop.fs.file.impl"
CLASS_NAME = "streamjoin.localfs.LocalFiles"


def local_fs_settings(settings: t.Mapping[str, str], jar: t.Callable[[], str]) -> dict[str, str]:
    """The settings that put `jar` (the built jar's path) on a local driver's class path and
    make it use `LocalFiles`, unless `settings` choose a local file system already."""
    path = jar()
    prior = settings.get(CLASS_PATH)
    out = {CLASS_PATH: f"{prior}{os.pathsep}{path}" if prior else path}
    return out | ({} if FS_IMPL in settings else {FS_IMPL: CLASS_NAME})
