"""Storage faults told in one line: a full or read-only file system, or a failed rename, under a
sink or the checkpoint, named by path and cause instead of by Spark's or Hadoop's stack trace.

Nothing a failed write leaves behind is committed: a batch is committed by its manifest, written
last (`state.manifest`), and every file a batch writes is keyed by its id and overwritten when
the batch runs again. So a run that meets a fault stops, and a run after the fault is cleared
replays the batch and continues exactly.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import typing as t

from streamjoin.errors import StorageError, StreamJoinError

if t.TYPE_CHECKING:
    from collections.abc import Iterator

_CAUSES = (
    ("no space left on device", "No space left on device"),
    ("disk quota exceeded", "Disk quota exceeded"),
    ("read-only file system", "Read-only file system"),
    ("permission denied", "Permission denied"),
    ("input/output error", "Input/output error"),
    ("failed to rename", "a rename failed"),
    ("could not move", "a rename failed"),
    ("unable to rename", "a rename failed"),
    ("mkdirs failed to create", "a directory could not be made"),
    ("unable to clear output directory", "the directory could not be emptied"),
)
"""Text in an error (any case) that marks a storage fault, and the cause the line gives."""

_ERRNOS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.EIO,
    errno.EXDEV,
}
"""Python's own writes (manifests, the lock) fail with an OSError of one of these."""

_WRITES = (
    re.compile(r"writing rows to (\S+)"),  # (Spark's TASK_WRITE_FAILED names the output)
    re.compile(r"(?:rename|move)\w*\s+(?:temp file\s+)?\S+\s+to\s+(\S+)"),
    re.compile(r"Mkdirs failed to create (\S+)"),
    re.compile(r"Unable to clear output directory (\S+)"),
)
"""How a JVM error's messages name the path it failed to write, best first."""
_TEMPORARY = re.compile(r"(\.\d+)*\.tmp$")
"""The suffix of a temporary file (``.tmp``, after a pid and a thread)."""
_PATHS = (
    re.compile(r"\b((?:file|hdfs|s3a?|abfss?|gs|viewfs|wasbs?):/[^\s,;'\"()\[\]]+)"),
    re.compile(r"(?<![\w:/.])(/[^\s:,;'\"()\[\]]+)"),
)
"""Any path, looked for only in a message that tells the cause too (a query's own messages name
its sources)."""


def _jvm_messages(error: t.Any) -> list[str]:
    """The ``toString`` of JVM throwable `error` and of each of its causes."""
    messages: list[str] = []
    while error is not None and len(messages) < 32:
        with contextlib.suppress(Exception):  # (a JVM that went away tells nothing)
            messages.append(str(error.toString()))
        try:
            error = error.getCause()
        except Exception:
            break
    return messages


def _messages(error: BaseException | None, jvm: t.Any) -> tuple[list[str], OSError | None]:
    """Every message along `error`'s chain and JVM throwable `jvm`'s, and the first OSError."""
    messages, os_error, seen = _jvm_messages(jvm), None, 0
    while error is not None and seen < 16:
        if isinstance(error, OSError) and os_error is None:
            os_error = error
        inner = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
        if inner is not None:  # (py4j's or PySpark's error; its text repeats the JVM trace)
            messages += _jvm_messages(inner)
        else:
            messages.append(str(error))
        error, seen = error.__cause__ or error.__context__, seen + 1
    return messages, os_error


def storage_fault(
    error: BaseException | None = None, *, jvm: t.Any = None, where: str | None = None
) -> StorageError | None:
    """`error` (or JVM throwable `jvm`) told as a `StorageError` if a storage fault caused it,
    else None; `where` is the path to name when no message does."""
    messages, os_error = _messages(error, jvm)
    if os_error is not None and os_error.errno in _ERRNOS:
        strerror = os_error.strerror or errno.errorcode.get(os_error.errno or 0, "an OS error")
        filename = os_error.filename2 or os_error.filename or where
        # (A temporary file is named after the file it was to become.)
        shown = _TEMPORARY.sub("", str(filename)) if filename else None
        return StorageError(_line(shown, strerror))
    found = [(text, c) for text in messages for key, c in _CAUSES if key in text.lower()]
    if not found:
        return None
    named = [(rx, text) for rx in _WRITES for text in messages]
    named += [(rx, text) for rx in _PATHS for text, _ in found]
    path = next((m.group(1).rstrip(".:") for rx, text in named if (m := rx.search(text))), where)
    cause = found[0][1]
    why = _diagnose(path) if cause not in _ERRNO_CAUSES and path else None
    if why is not None:  # (Hadoop only said that it failed)
        cause = f"{cause} ({why})"
    return StorageError(_line(path, cause))


_ERRNO_CAUSES = {c for _, c in _CAUSES[:5]}
"""The causes that are the OS's own words."""


def _diagnose(path: str) -> str | None:
    """Why local `path` cannot be written, as the OS would say it: its file system is
    read-only or full (None: neither, or not a local path)."""
    if path.startswith("file:"):
        local = "/" + path[len("file:") :].lstrip("/")
    elif path.startswith("/"):
        local = path
    else:
        return None
    while not os.path.exists(local) and local != "/":
        local = os.path.dirname(local)
    try:
        st = os.statvfs(local)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return os.strerror(errno.EROFS)
    if st.f_bavail == 0 or st.f_favail == 0:
        return os.strerror(errno.ENOSPC)
    return None


def _line(path: str | None, cause: str) -> str:
    where = f"cannot write {path}" if path else "a write failed"
    return (
        f"{where}: {cause}. Nothing after the last committed batch was committed: clear the "
        "fault and run again to continue from there"
    )


@contextlib.contextmanager
def told(where: str) -> Iterator[None]:
    """Raise a storage fault in the block as a `StorageError` (naming `where` if its messages
    name no path); any other error as it is."""
    try:
        yield
    except StreamJoinError:
        raise
    except Exception as err:
        fault = storage_fault(err, where=where)
        if fault is None:
            raise
        raise fault from err
