"""A class-data sharing archive for the driver JVM that streamjoin starts itself.

A cold driver loads, parses and verifies some twenty thousand Spark classes during its first
batches, on the same two cores the batches run on. The JVM can instead map them, already
parsed and verified, from an archive of the classes an earlier run of the same JVM, Spark and
flags loaded (Java's dynamic class-data sharing, ``-XX:ArchiveClassesAtExit`` and
``-XX:SharedArchiveFile``). The first session on a machine writes the archive when its JVM
exits; later ones map it.

The archive is an optimisation only: a JVM that cannot use it (another Java, Spark's jars
changed, a partial file) starts as it would have without it, and its warnings are silenced.
Set ``STREAMJOIN_JVM_ARCHIVE=off`` to start without one, ``STREAMJOIN_CACHE_DIR`` to keep
archives somewhere other than ``~/.cache/streamjoin``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
import typing as t
import uuid
from dataclasses import dataclass

SWITCH_ENV = "STREAMJOIN_JVM_ARCHIVE"
CACHE_ENV = "STREAMJOIN_CACHE_DIR"

# A configuration whose JVM could not write an archive (some cannot: a JDK without its base
# archive, a non-empty directory on the class path) is not tried again for this long.
_FAILED_SECONDS = 7 * 86400.0
# Archives not mapped for this long (a Java or Spark upgrade ago) are removed when a new one is
# written: each is 150-200 MB.
_UNUSED_SECONDS = 30 * 86400.0
# The first bytes of a dynamic archive (HotSpot's CDS_DYNAMIC_ARCHIVE_MAGIC, little-endian).
_MAGIC = (0xF00BABA8).to_bytes(4, "little")
# CDS reports every class it cannot archive (hundreds of generated accessors) as a warning on
# the JVM's stdout; none of them matters to the user.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# What else decides which classes a driver loads, besides its jars and flags.
_ENVIRONMENT = (
    "SPARK_CONF_DIR",
    "HADOOP_CONF_DIR",
    "SPARK_DIST_CLASSPATH",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
)


@dataclass(frozen=True)
class ClassArchive:
    """Where the archive for one JVM configuration lives, and whether this session writes it."""

    path: str
    """The finished archive (present when `writing` is None)."""
    writing: str | None = None
    """The file this session's JVM dumps into at exit, renamed to `path` when complete."""
    lock_fd: int | None = None
    """The open lock file this session holds while it writes (the kernel lets go of it when the
    process ends, however it ends)."""

    def java_options(self) -> str:
        """The driver flags that map the archive, or make this JVM dump one at exit."""
        if self.writing is None:
            return f"-XX:SharedArchiveFile={self.path} {_QUIET}"
        return f"-XX:ArchiveClassesAtExit={self.writing} {_QUIET}"

    def finish(self, wait_for_exit: t.Callable[[], int | None]) -> None:
        """After the session stopped: let the JVM exit (`wait_for_exit`: its exit code, None
        if it could not be awaited), then publish the archive it dumped. Renaming makes the
        archive appear whole or not at all; a JVM that wrote none marks the configuration as
        failed, so that later sessions do not wait for it again."""
        if self.writing is None:
            return
        try:
            code = wait_for_exit()
            if code == 0 and _is_archive(self.writing):
                _remove_unused(os.path.dirname(self.path))
                os.replace(self.writing, self.path)
            elif code is not None:
                with open(self.path + ".failed", "w", encoding="utf-8") as f:
                    f.write(f"the driver JVM exited with {code} and wrote no class archive\n")
        except OSError:
            pass  # (an optimisation only: never an error at exit)
        finally:
            with contextlib.suppress(OSError):
                os.remove(self.writing)
            if self.lock_fd is not None:
                os.close(self.lock_fd)


def cache_dir(root: str | None = None) -> str:
    """Where archives are kept: under `root`, else ``STREAMJOIN_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/streamjoin`` (``~/.cache/streamjoin``)."""
    root = root or os.environ.get(CACHE_ENV)
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "streamjoin")
    return os.path.join(root, "jvm")


def archives(root: str | None = None) -> list[str]:
    """The finished archives in the cache under `root` (see `cache_dir`)."""
    directory = cache_dir(root)
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return sorted(os.path.join(directory, n) for n in names if n.endswith(".jsa"))


def plan_archive(
    java: str, spark_home: str, java_options: str, settings: t.Mapping[str, str] | None = None
) -> ClassArchive | None:
    """The archive for a driver started with `java`, the jars of `spark_home`, `java_options`
    and its other `settings`: the finished one, or one for this session to write; None when
    archives are switched off, the driver's flags already choose how classes are shared,
    another session is writing this one, an earlier one failed to, or the cache directory
    cannot be written."""
    if os.environ.get(SWITCH_ENV, "").strip().lower() in {"off", "0", "false", "no"}:
        return None
    if any(flag in java_options for flag in ("SharedArchive", "ArchiveClasses", "-Xshare")):
        return None
    directory = cache_dir()
    key = configuration_key(java, spark_home, java_options, settings or {})
    path = os.path.join(directory, key + ".jsa")
    if os.path.exists(path):
        with contextlib.suppress(OSError):
            os.utime(path)  # (in use: see `_remove_unused`)
        return ClassArchive(path)
    try:
        if time.time() - os.path.getmtime(path + ".failed") < _FAILED_SECONDS:
            return None
    except OSError:
        pass
    try:
        os.makedirs(directory, exist_ok=True)
        fd = _take_lock(path + ".lock")
        if fd is None:
            return None
        # Holding the lock, no one else writes this archive: a part file is a dead writer's.
        for name in os.listdir(directory):
            if name.startswith(key + ".") and name.endswith(".part"):
                os.remove(os.path.join(directory, name))
    except OSError:
        return None
    return ClassArchive(path, writing=f"{path}.{uuid.uuid4().hex[:8]}.part", lock_fd=fd)


def configuration_key(
    java: str, spark_home: str, java_options: str, settings: t.Mapping[str, str] | None = None
) -> str:
    """A digest of everything an archive is only valid for: the java binary and its runtime,
    Spark's jars (the JVM's class path), the driver's flags and settings, and the environment
    that adds to them."""
    digest = hashlib.sha256()
    real = os.path.realpath(java)
    home = os.path.dirname(os.path.dirname(real))
    for part in (real, os.path.join(home, "lib", "modules"), os.path.join(home, "lib", "server")):
        with contextlib.suppress(OSError):
            stat = os.stat(part)
            digest.update(f"{part}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    digest.update(f"{java_options}\0".encode())
    driver = sorted((k, v) for k, v in (settings or {}).items() if k.startswith("spark.driver."))
    digest.update(repr((driver, [os.environ.get(v) for v in _ENVIRONMENT])).encode())
    # The JVM checks each jar on its class path against the one it archived; a jar rebuilt at
    # the same path needs a new archive.
    for entry in (settings or {}).get("spark.driver.extraClassPath", "").split(os.pathsep):
        with contextlib.suppress(OSError):
            stat = os.stat(entry)
            digest.update(f"{entry}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    jars = os.path.join(spark_home, "jars")
    for name in sorted(os.listdir(jars)) if os.path.isdir(jars) else ():
        jar = os.stat(os.path.join(jars, name))
        digest.update(f"{name}\0{jar.st_size}\0{jar.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def _is_archive(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(_MAGIC)) == _MAGIC
    except OSError:
        return False


def _remove_unused(directory: str) -> None:
    """Remove archives (and what their writers left) not used for `_UNUSED_SECONDS`."""
    now = time.time()
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            old = now - os.path.getmtime(path) > _UNUSED_SECONDS
            if old and name.endswith((".jsa", ".part", ".failed")):
                os.remove(path)


def _take_lock(lock: str) -> int | None:
    """An open descriptor of `lock`, exclusively locked; None if another process holds it."""
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
