"""Queries over windowed groups of single streams, with no join before them: one stream's rows
grouped per event-time window (``GROUP BY window(ts, ...)``, or Flink's ``TABLE(TUMBLE(...))``
and ``HOP``), a join of two such groups on their common window (Flink's window join,
Nexmark q8's shape), or a stream's rows joined with such groups (Nexmark q7's shape).

A group of one stream closes when the watermark passes its window's end: an on-time row has
an event time at or above the watermark, so no later row falls into it. Two groups joined on
the same window close in the same batch, and their join needs no state beyond the open windows'
rows: every pair it can make is of groups of one window. A stream's rows joined with groups
pair with the groups of the windows their event time is bounded by (`plan.groups.RowsPlan`),
and a pair is written when its group closes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from streamjoin.model.aggregate import Aggregation
from streamjoin.model.job import SelectItem


@dataclass(frozen=True, slots=True)
class StreamGroup:
    """``SELECT items FROM stream [AS alias] [WHERE where] GROUP BY window(...), keys``: the
    groups of one stream's rows (`where` and `aggregation`'s keys are over ``alias.column``;
    `select` is over each group, as in a GROUP BY query over a join)."""

    alias: str
    stream: str
    aggregation: Aggregation
    select: tuple[SelectItem, ...]
    where: str | None = None
    output: str = ""
    """The name the joining query gives the groups (``(SELECT ...) AS a``); else `alias`."""

    @property
    def name(self) -> str:
        """What the query calls the groups: `output`, or the stream's alias."""
        return self.output or self.alias


@dataclass(frozen=True, slots=True)
class StreamRows:
    """``FROM stream [AS alias] JOIN (SELECT ... GROUP BY window ...) g ON ...``: a stream's own
    rows, each joined with the groups its ON condition pairs it with."""

    alias: str
    stream: str
    time: str
    """The stream's event-time column: the condition must bound it by the groups' window."""


@dataclass(frozen=True, slots=True)
class GroupQuery:
    """``INSERT INTO sink`` one stream's groups, two streams' groups joined, or a stream's rows
    (`rows`) joined with one stream's groups: then `on` is the join's condition and `select`
    the output, both over the groups' columns (``alias.name``) and the rows' (``alias.col``).
    Two groups' `on` matches their windows."""

    name: str
    sink: str
    inputs: tuple[StreamGroup, ...]
    select: tuple[SelectItem, ...]
    on: str | None = None
    line: int = 0
    rows: StreamRows | None = None

    def __post_init__(self) -> None:
        joined = len(self.inputs) + (self.rows is not None)
        if len(self.inputs) not in (1, 2) or joined > 2 or (joined == 2) != (self.on is not None):
            msg = (
                f"query {self.name!r}: one group, or two groups or a group and a stream's rows "
                "joined ON a condition"
            )
            raise ValueError(msg)

    @property
    def output(self) -> tuple[SelectItem, ...]:
        """The columns the query writes to its sink."""
        return self.select

    @property
    def streams(self) -> tuple[str, ...]:
        """The streams the query reads: its groups' in their order, then its rows'."""
        rows = () if self.rows is None else (self.rows.stream,)
        return (*(g.stream for g in self.inputs), *rows)

    @property
    def signature(self) -> str:
        """A digest of what the query computes (not its sink): a changed query, kept under its
        name after an edit of the job file, starts its buffers afresh."""
        text = repr((self.inputs, self.on, self.select) + ((self.rows,) if self.rows else ()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]
