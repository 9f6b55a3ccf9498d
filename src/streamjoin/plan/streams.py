"""How each active stream's state is kept (`StreamPlan`): its rows' retention behind the
watermark, or the column they leave by (`plan.retention`)."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

if t.TYPE_CHECKING:
    from streamjoin.model import StreamDef
    from streamjoin.plan.retention import ColumnExpiry


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """One active stream: its position in the unified input, and how its state is kept.

    `retain_us` None means full history (nothing is ever dropped); otherwise a state row with event
    time ``< W - retain_us`` can never join again. State is kept in units, the rows one batch
    added to the stream, and a unit is dropped whole once all its rows are dead.
    """

    stream: StreamDef
    index: int
    retain_us: int | None
    expiry: ColumnExpiry | None = None
    """With `retain_us` None: the column by which every query that event times do not bound
    lets a row go (`retention.stream_expiry`); None: such rows are kept for good."""

    @property
    def name(self) -> str:
        """The stream's name."""
        return self.stream.name

    def horizon(self, watermark: int | None) -> int | None:
        """Event time below which this stream's state is dead, or None while nothing is."""
        if watermark is None or self.retain_us is None:
            return None
        return watermark - self.retain_us

    def dead(
        self, max_ts: int | None, bound: tuple[str | None, int | None], watermark: int | None
    ) -> bool:
        """Whether a unit whose greatest event time is `max_ts` and whose greatest value of a
        column is `bound` (``(column, value)``, `StateUnit.bound`; None: not measured) can meet
        no row to come."""
        horizon = self.horizon(watermark)
        if horizon is not None:
            return max_ts is not None and max_ts < horizon
        e, (column, value) = self.expiry, bound
        if e is None or watermark is None or value is None or max_ts is None:
            return False
        if column is None or column.lower() != e.column.lower():
            return False  # (measured for a column the job no longer lets rows go by)
        timed = e.retain_us is None or max_ts < watermark - e.retain_us
        return timed and value + e.offset_us < watermark
