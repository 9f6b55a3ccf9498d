"""Offsets in a job file, their line and column, and errors that point at them."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from streamjoin.errors import JobError, UnsupportedError


@dataclass(frozen=True)
class SourceText:
    """A whole job file and its name, able to turn character offsets into line and column."""

    text: str
    source: str = "<string>"
    _line_starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        starts = [0] + [i + 1 for i, ch in enumerate(self.text) if ch == "\n"]
        object.__setattr__(self, "_line_starts", tuple(starts))

    def line_col(self, offset: int) -> tuple[int, int]:
        """The 1-based (line, column) of the character at 0-based `offset`."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def error(self, message: str, start: int, end: int, *, unsupported: bool = False) -> JobError:
        """A `JobError` (or `UnsupportedError`) about the text at ``[start, end)``."""
        line, col = self.line_col(start)
        cls = UnsupportedError if unsupported else JobError
        return cls(message, line=line, col=col, text=self.text[start:end], source=self.source)


@dataclass(frozen=True)
class Statement:
    """One statement of a job file: its text (no terminating ``;``) and where it starts."""

    src: SourceText
    start: int
    text: str

    def error(self, message: str, start: int, end: int, *, unsupported: bool = False) -> JobError:
        """An error about ``[start, end)``, given as offsets into this statement's text."""
        return self.src.error(
            message, self.start + start, self.start + end, unsupported=unsupported
        )

    @property
    def line(self) -> int:
        """The 1-based line on which the statement starts."""
        return self.src.line_col(self.start)[0]
