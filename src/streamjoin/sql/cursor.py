"""Tokens of one statement (sqlglot's Spark tokenizer) and a cursor to parse them by hand."""

from __future__ import annotations

import re

from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

from streamjoin.errors import JobError
from streamjoin.sql.dialect import StreamJoinSpark
from streamjoin.sql.positions import Statement

WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_WORDS = frozenset({TokenType.STRING, TokenType.NUMBER, TokenType.IDENTIFIER})


def tokenize(stmt: Statement) -> list[Token]:
    """The tokens of `stmt`, with offsets into the statement text.

    Raises:
        JobError: when sqlglot cannot tokenize the text.
    """
    try:
        tokens = StreamJoinSpark().tokenize(stmt.text)
    except (SqlglotError, ValueError, IndexError) as err:
        # The statement splitter already rejects unterminated quotes; what is left is rare.
        msg = f"cannot read this statement: {err}"
        raise stmt.error(msg, 0, len(stmt.text.split("\n", 1)[0])) from None
    kept: list[Token] = []
    for tok in tokens:
        # The tokenizer expands some literals (10L) into extra tokens over the same text.
        if kept and tok.start <= kept[-1].end:
            continue
        kept.append(tok)
    return kept


def is_word(tok: Token) -> bool:
    """Whether `tok` is a bare word (keyword or unquoted name)."""
    return tok.token_type not in _NOT_WORDS and WORD_RE.fullmatch(tok.text) is not None


def is_name(tok: Token) -> bool:
    """Whether `tok` can name a stream, sink or column (a bare word or a ```quoted``` name)."""
    return tok.token_type == TokenType.IDENTIFIER or is_word(tok)


class Cursor:
    """A position in the tokens of one statement, with errors that point into the file."""

    def __init__(self, stmt: Statement) -> None:
        self.stmt = stmt
        self.tokens = tokenize(stmt)
        self.pos = 0

    def peek(self, ahead: int = 0) -> Token | None:
        """The token `ahead` places after the current one, or None past the end."""
        i = self.pos + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def at_end(self) -> bool:
        """Whether every token has been consumed."""
        return self.pos >= len(self.tokens)

    def advance(self) -> Token:
        """Consume and return the current token (the caller checked there is one)."""
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def raw(self, tok: Token) -> str:
        """`tok` as written, quotes included."""
        return self.stmt.text[tok.start : tok.end + 1]

    def error_at(
        self, msg: str, first: Token, last: Token | None = None, *, unsupported: bool = False
    ) -> JobError:
        """An error about the text from `first` to `last` (default: `first` alone)."""
        end = (last or first).end + 1
        return self.stmt.error(msg, first.start, end, unsupported=unsupported)

    def error_here(self, expected: str) -> JobError:
        """``expected X, found Y`` at the current token, or at the last one past the end."""
        tok = self.peek()
        if tok is None and not self.tokens:
            msg = f"expected {expected}"
            return self.stmt.error(msg, 0, len(self.stmt.text))
        if tok is None:
            last = self.tokens[-1]
            msg = f"expected {expected} after {self.raw(last)!r}, found the end of the statement"
            return self.error_at(msg, last)
        msg = f"expected {expected}, found {self.raw(tok)!r}"
        return self.error_at(msg, tok)

    def match_word(self, *words: str) -> Token | None:
        """Consume the current token if it is the bare word `words[0]` (any case), and so on."""
        for k, word in enumerate(words):
            tok = self.peek(k)
            if tok is None or not is_word(tok) or tok.text.upper() != word:
                return None
        first = self.advance()
        for _ in words[1:]:
            self.advance()
        return first

    def expect_word(self, word: str) -> Token:
        """Consume the bare word `word` or fail."""
        tok = self.match_word(word)
        if tok is None:
            raise self.error_here(word)
        return tok

    def match(self, token_type: TokenType) -> Token | None:
        """Consume the current token if it has `token_type`."""
        tok = self.peek()
        if tok is None or tok.token_type != token_type:
            return None
        return self.advance()

    def expect(self, token_type: TokenType, expected: str) -> Token:
        """Consume a token of `token_type` or fail saying `expected`."""
        tok = self.match(token_type)
        if tok is None:
            raise self.error_here(expected)
        return tok

    def expect_name(self, expected: str) -> Token:
        """Consume a name (its text, unquoted, is ``tok.text``) or fail saying `expected`."""
        tok = self.peek()
        if tok is None or not is_name(tok):
            raise self.error_here(expected)
        return self.advance()

    def expect_end(self, after: str) -> None:
        """Fail unless every token has been consumed."""
        tok = self.peek()
        if tok is not None:
            msg = f"unexpected {self.raw(tok)!r} after {after}; is a ';' missing?"
            raise self.error_at(msg, tok)
