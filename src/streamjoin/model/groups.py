"""Queries over windowed groups of single streams, with no join before them: one stream's rows
grouped per event-time window (``GROUP BY window(ts, ...)``, or Flink's ``TABLE(TUMBLE(...))``
and ``HOP``), or a join of two such groups on their common window (Flink's window join,
Nexmark q8's shape).

A group of one stream closes when the watermark passes its window's end: an on-time row has
an event time at or above the watermark, so no later row falls into it. Two groups joined on
the same window close in the same batch, and their join needs no state beyond the open windows'
rows: every pair it can make is of groups of one window.
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
class GroupQuery:
    """``INSERT INTO sink`` one stream's groups, or two streams' groups joined: then `on` is
    the join's condition and `select` the output, both over the groups' columns
    (``alias.name``), and `on` matches the two groups' windows."""

    name: str
    sink: str
    inputs: tuple[StreamGroup, ...]
    select: tuple[SelectItem, ...]
    on: str | None = None
    line: int = 0

    def __post_init__(self) -> None:
        if len(self.inputs) not in (1, 2) or (len(self.inputs) == 2) != (self.on is not None):
            msg = f"query {self.name!r}: one group, or two joined ON a condition"
            raise ValueError(msg)

    @property
    def output(self) -> tuple[SelectItem, ...]:
        """The columns the query writes to its sink."""
        return self.select

    @property
    def streams(self) -> tuple[str, ...]:
        """The streams the query reads, in its inputs' order."""
        return tuple(g.stream for g in self.inputs)

    @property
    def signature(self) -> str:
        """A digest of what the query computes (not its sink): a changed query, kept under its
        name after an edit of the job file, starts its buffers afresh."""
        text = repr((self.inputs, self.on, self.select))
        return hashlib.sha256(text.encode()).hexdigest()[:16]
