"""Split a job file into statements at the semicolons that are not inside quotes or comments."""

from __future__ import annotations

from streamjoin.sql.positions import SourceText, Statement


def split_statements(src: SourceText) -> list[Statement]:
    """The statements of a job file, in order.

    A statement starts at its first character that is neither whitespace nor comment and runs up
    to (not including) its ``;``; the last statement may omit the ``;``. Empty statements (``;;``
    or a file of comments only) are skipped. Quoting follows Spark SQL: ``'...'`` and ``"..."``
    are strings with backslash escapes, ```...``` is an identifier, and block comments nest.

    Args:
        src: the job file.

    Returns:
        One `Statement` per non-empty statement.

    Raises:
        JobError: at an unterminated string, quoted identifier or block comment.
    """
    text = src.text
    n = len(text)
    statements: list[Statement] = []
    start: int | None = None
    i = 0
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline + 1
        elif text.startswith("/*", i):
            i = _skip_block_comment(src, i)
        elif ch == ";":
            if start is not None:
                statements.append(Statement(src, start, text[start:i]))
                start = None
            i += 1
        else:
            if start is None:
                start = i
            i = _skip_quoted(src, i) if ch in "'\"`" else i + 1
    if start is not None:
        statements.append(Statement(src, start, text[start:]))
    return statements


def _skip_quoted(src: SourceText, i: int) -> int:
    """The offset just past the quoted text that starts at `i`."""
    text = src.text
    quote = text[i]
    j = i + 1
    while j < len(text):
        ch = text[j]
        if ch == "\\" and quote != "`":
            j += 2
        elif ch == quote:
            # A doubled backquote is an escaped backquote inside a quoted identifier.
            if quote == "`" and text.startswith("``", j):
                j += 2
            else:
                return j + 1
        else:
            j += 1
    what = "quoted identifier" if quote == "`" else "string"
    msg = f"unterminated {what}: {quote} is never closed"
    line_end = text.find("\n", i)
    raise src.error(msg, i, len(text) if line_end < 0 else line_end)


def _skip_block_comment(src: SourceText, i: int) -> int:
    """The offset just past the (possibly nested) block comment that starts at `i`."""
    text = src.text
    depth = 0
    j = i
    while j < len(text):
        if text.startswith("/*", j):
            depth += 1
            j += 2
        elif text.startswith("*/", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        else:
            j += 1
    msg = "unterminated comment: /* is never closed by */"
    raise src.error(msg, i, i + 2)
