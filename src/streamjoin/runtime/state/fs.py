"""Files the driver reads and writes itself (manifests), through Hadoop's FileSystem.

Going through the JVM's FileSystem rather than Python's `open` keeps every path the engine writes
on the same storage Spark writes to: a local directory, HDFS or an object store alike. A path
Hadoop has qualified as local (``file:``) is read and written with Python's own calls instead:
the same bytes, without a JVM round trip per call, and without the ``chmod`` process Hadoop's
local file system starts for every file it creates when its native library is missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import typing as t
from urllib.parse import urlsplit

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


class FileStore:
    """Small-file operations on Hadoop paths, for the driver."""

    def __init__(self, spark: SparkSession) -> None:
        # py4j's JVM view is untyped (and Optional in pyspark's hints, though set once started).
        self._jvm: t.Any = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()
        # Looked up once, by its full name: py4j resolves ``jvm.org.apache…`` one segment at a
        # time, and each of "org", "org.apache", … is first tried as a class, a miss that
        # searches every jar on Spark's class path (a batch makes several such calls).
        self._path_class: t.Any = getattr(self._jvm, "org.apache.hadoop.fs.Path")
        self._qualified: dict[str, str] = {}

    def _path(self, path: str) -> t.Any:
        return self._path_class(path)

    @staticmethod
    def _local(path: str) -> str | None:
        """The OS path of a ``file:`` path, or None for any other."""
        if path.startswith("file://"):
            rest = path[len("file://") :]
            return rest if rest.startswith("/") else None  # (no host: a local path)
        if path.startswith("file:/"):
            return path[len("file:") :]
        return None

    @staticmethod
    def _crc(local: str) -> str:
        """Where Hadoop's local file system keeps the checksum of file `local`: a stale one
        beside a file written here would fail Hadoop's later reads of it."""
        head, name = os.path.split(local)
        return os.path.join(head, f".{name}.crc")

    def _fs(self, path: t.Any) -> t.Any:
        return path.getFileSystem(self._conf)

    def exists(self, path: str) -> bool:
        """Whether `path` exists."""
        local = self._local(path)
        if local is not None:
            return os.path.exists(local)
        p = self._path(path)
        return bool(self._fs(p).exists(p))

    def list_names(self, path: str) -> list[str]:
        """Names of the entries of directory `path` (empty if it does not exist)."""
        local = self._local(path)
        if local is not None:
            if not os.path.isdir(local):
                return []
            # (Hadoop's local file system leaves its checksum files out of a listing.)
            return [n for n in os.listdir(local) if not (n.startswith(".") and n.endswith(".crc"))]
        p = self._path(path)
        fs = self._fs(p)
        if not fs.exists(p):
            return []
        return [str(s.getPath().getName()) for s in fs.listStatus(p)]

    def oldest_file(self, path: str) -> str | None:
        """The oldest visible file directly under directory `path` (by modification time, then
        name: the first a file stream reads), or None if there is none."""
        p = self._path(path)
        fs = self._fs(p)
        if not fs.exists(p) or not fs.getFileStatus(p).isDirectory():
            return None
        files = [
            (int(s.getModificationTime()), str(s.getPath().toString()))
            for s in fs.listStatus(p)
            if s.isFile() and not str(s.getPath().getName()).startswith(("_", "."))
        ]
        return min(files)[1] if files else None

    def size(self, path: str) -> int:
        """Bytes of the files under `path` (0 if it does not exist)."""
        p = self._path(path)
        fs = self._fs(p)
        return int(fs.getContentSummary(p).getLength()) if fs.exists(p) else 0

    def file_size(self, path: str) -> int | None:
        """Bytes of the file `path`, or None if there is none."""
        local = self._local(path)
        if local is not None:
            return os.path.getsize(local) if os.path.exists(local) else None
        p = self._path(path)
        fs = self._fs(p)
        return int(fs.getFileStatus(p).getLen()) if fs.exists(p) else None

    def read_text(self, path: str) -> str:
        """The whole file as UTF-8 text."""
        local = self._local(path)
        if local is not None:
            with open(local, encoding="utf-8") as f:
                return f.read()
        p = self._path(path)
        stream = self._fs(p).open(p)
        try:
            data = getattr(self._jvm, "org.apache.commons.io.IOUtils").toByteArray(stream)
        finally:
            stream.close()
        return bytes(data).decode("utf-8")

    def write_text_atomic(self, path: str, text: str) -> None:
        """Write `text` to `path` so that readers see the old file or the whole new one."""
        local = self._local(path)
        if local is not None:
            tmp = f"{local}.tmp"
            os.makedirs(os.path.dirname(local), exist_ok=True)  # (as Hadoop's create does)
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            for stale in (self._crc(tmp), self._crc(local)):
                if os.path.exists(stale):
                    os.remove(stale)
            os.replace(tmp, local)  # (atomic on POSIX)
            return
        final = self._path(path)
        fs = self._fs(final)
        tmp = self._path(f"{path}.tmp")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()
        if fs.exists(final):
            fs.delete(final, False)
        if not fs.rename(tmp, final):
            msg = f"could not move {tmp} to {final}"
            raise OSError(msg)

    def create_new(self, path: str, text: str) -> bool:
        """Write `text` to `path` only if no file is there (False if one is): of several callers
        racing for one path, exactly one gets True."""
        local = self._local(path)
        if local is not None:
            os.makedirs(os.path.dirname(local), exist_ok=True)
            tmp = f"{local}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            try:
                os.link(tmp, local)  # (fails if `local` exists; readers never see it half written)
            except FileExistsError:
                return False
            finally:
                os.remove(tmp)
            return True
        p = self._path(path)
        fs = self._fs(p)
        try:
            out = fs.create(p, False)
        except Exception:  # py4j's error around Hadoop's FileAlreadyExistsException
            if fs.exists(p):
                return False
            raise
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()
        return True

    def delete(self, path: str) -> None:
        """Delete `path` recursively, if it exists."""
        local = self._local(path)
        if local is not None:
            if os.path.isdir(local) and not os.path.islink(local):
                shutil.rmtree(local)
            elif os.path.lexists(local):
                os.remove(local)
            if os.path.exists(self._crc(local)):
                os.remove(self._crc(local))
            return
        p = self._path(path)
        fs = self._fs(p)
        if fs.exists(p):
            fs.delete(p, True)

    def move(self, src: str, dst: str) -> None:
        """Move file or directory `src` to `dst` (whose parent is made if missing); `dst`
        must not exist."""
        local, target = self._local(src), self._local(dst)
        if local is not None and target is not None:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.rename(local, target)
            return
        p, q = self._path(src), self._path(dst)
        fs = self._fs(q)
        fs.mkdirs(q.getParent())
        if not fs.rename(p, q):
            msg = f"could not move {src} to {dst}"
            raise OSError(msg)

    def copy_data_files(self, src: str, dst: str) -> None:
        """Copy the data files directly under directory `src` (not ``_SUCCESS``, not hidden)
        into directory `dst`, made if missing."""
        self.mkdirs(dst)
        for name in self.list_names(src):
            if not name.startswith(("_", ".")):
                self.copy_file(f"{src}/{name}", f"{dst}/{name}")

    def copy_file(self, src: str, dst: str) -> None:
        """Copy file `src` to `dst`, replacing it (its directory is made if missing)."""
        local, target = self._local(src), self._local(dst)
        if local is not None and target is not None:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(local, target)
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._crc(target))  # (a stale checksum would fail Hadoop's reads)
            return
        p, q = self._path(src), self._path(dst)
        util = getattr(self._jvm, "org.apache.hadoop.fs.FileUtil")
        util.copy(self._fs(p), p, self._fs(q), q, False, True, self._conf)

    def mkdirs(self, path: str) -> None:
        """Make directory `path` and its parents."""
        local = self._local(path)
        if local is not None:
            os.makedirs(local, exist_ok=True)
            return
        p = self._path(path)
        self._fs(p).mkdirs(p)

    def same_system(self, a: str, b: str) -> bool:
        """Whether paths `a` and `b` are on one file system (a move between them is a rename)."""
        qa, qb = urlsplit(self.qualify(a)), urlsplit(self.qualify(b))
        return (qa.scheme, qa.netloc) == (qb.scheme, qb.netloc)

    def qualify(self, path: str) -> str:
        """`path` made absolute on its file system (``file:/…``, ``hdfs://…``)."""
        # (Remembered: a batch of a job with many sinks asks for the same few paths often.)
        known = self._qualified.get(path)
        if known is None:
            if len(self._qualified) > 4096:
                self._qualified.clear()
            p = self._path(path)
            known = self._qualified[path] = str(self._fs(p).makeQualified(p).toString())
        return known
