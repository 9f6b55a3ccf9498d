"""Errors raised by streamjoin.

Every error a user can cause carries enough to find the mistake: a job-file error names the file,
the line, the column and the offending text (`JobError`); a run-time error names the stream, the
path or the option it came from (`StreamJoinError`).
"""

from __future__ import annotations


class StreamJoinError(Exception):
    """Base class of every error streamjoin raises on purpose."""


class JobError(StreamJoinError):
    """A mistake in a job file: syntax, unknown names, types, unsupported constructs.

    Args:
        message: what is wrong, in words a user understands ("unknown column 'pricee'").
        line: 1-based line of the offending text in the job file.
        col: 1-based column of the offending text.
        text: the offending text itself, as written.
        source: the file name (or "<string>" for SQL given as text).
    """

    def __init__(
        self, message: str, *, line: int, col: int, text: str, source: str = "<string>"
    ) -> None:
        self.message = message
        self.line = line
        self.col = col
        self.text = text
        self.source = source
        super().__init__(self.render())

    def with_source(self, source: str) -> JobError:
        """The same error, attributed to `source` (the CLI knows the file name, the parser not)."""
        return type(self)(self.message, line=self.line, col=self.col, text=self.text, source=source)

    def render(self) -> str:
        """One line: ``file:line:col: message (at 'text')``."""
        return f"{self.source}:{self.line}:{self.col}: {self.message} (at {self.text!r})"


class UnsupportedError(JobError):
    """A construct that is valid SQL but that streamjoin does not run (yet); the message
    says which."""


class StreamJoinWarning(UserWarning):
    """Something a user should know that does not stop the job (e.g. a query added at a restart
    that finds less history than its window reaches)."""


class SettingError(StreamJoinError, ValueError):
    """A setting (Spark conf or environment variable) with a value it cannot take."""


class JavaMissingError(StreamJoinError):
    """No Java runtime to start Spark with."""


class CheckpointInUseError(StreamJoinError):
    """Another run holds the checkpoint's lock; the message names it (host, pid, since when,
    its last heartbeat) and the checkpoint."""


class StorageError(StreamJoinError):
    """A file system refused a write (full, read-only, a failed rename); the message names the
    path and the cause, and nothing of the failed batch was committed."""
