"""A query's joined rows per event-time window, each window's answer emitted once, when the
watermark closes it: ``GROUP BY window(time, size[, slide]), keys`` (`Aggregation`), or the
first N rows of each window and key by an order (`TopN`, ``ROW_NUMBER() OVER (PARTITION BY
window(...), keys ORDER BY ...) <= N``).

A query with an `Aggregation` keeps its join (inputs and predicate) as any query; its SELECT
items are then over a group: aggregate calls (count, sum, avg, min, max, count(DISTINCT)), the
grouping keys, and ``window.start`` / ``window.end`` (Spark's names for the window's bounds). A
query with a `TopN` selects joined rows, as a join does, and keeps the first N of each group.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

if t.TYPE_CHECKING:
    from streamjoin.model.job import SelectItem, StreamDef

WINDOW = "window"
"""The name under which a query refers to its group's window (``window.start``)."""


@dataclass(frozen=True, slots=True)
class EventWindow:
    """``window(time, 'size', 'slide')``: windows ``[start, start + size)`` whose starts are the
    multiples of `slide` since the epoch (Spark's alignment); tumbling when slide == size. A
    row at event time ts is in every window with ``start <= ts < start + size``."""

    time: str
    """The qualified event-time column the rows are windowed by (``b.ts``)."""
    size_us: int
    slide_us: int

    def __post_init__(self) -> None:
        if self.size_us <= 0 or self.slide_us <= 0:
            msg = f"a window needs a positive size and slide, got {self.size_us}/{self.slide_us} us"
            raise ValueError(msg)
        if self.slide_us > self.size_us:
            msg = (
                f"a window's slide ({self.slide_us} us) longer than its size ({self.size_us} us) "
                "would skip rows"
            )
            raise ValueError(msg)

    @property
    def source(self) -> tuple[str, str]:
        """The alias and column of `time`, bare and lower-case (``B.`dateTime``` is
        ``("b", "datetime")``)."""
        alias, column = self.time.split(".", 1)
        return alias.strip("`").lower(), column.strip("`").lower()

    def by_event_time(self, stream: StreamDef) -> bool:
        """Whether the windows are of `stream`'s event time (its input's), not of another
        column that closes groups per row (`sql.rowgroups`)."""
        return self.source[1] == (stream.event_time or "").lower()

    @property
    def tumbling(self) -> bool:
        """Whether the windows do not overlap (each row is in exactly one)."""
        return self.slide_us == self.size_us

    def starts(self, ts_us: int) -> list[int]:
        """The starts of the windows holding event time `ts_us`, oldest first."""
        last = ts_us - ts_us % self.slide_us  # (Python's % floors: right before the epoch too)
        out = []
        start = last
        while start + self.size_us > ts_us:
            out.append(start)
            start -= self.slide_us
        return out[::-1]


@dataclass(frozen=True, slots=True)
class Aggregation:
    """The GROUP BY of a query: its event-time window and the other grouping expressions
    (qualified Spark SQL), and its HAVING condition if any."""

    window: EventWindow
    keys: tuple[str, ...] = ()
    having: str | None = None


POINT_US = 1
"""The size of the window that partitioning by an event-time column itself makes: a group per
instant, closed once the watermark passes it."""


@dataclass(frozen=True, slots=True)
class TopN:
    """``ROW_NUMBER() OVER (PARTITION BY window(...), keys ORDER BY order) <= limit``: of each
    window and key, the first `limit` joined rows by `order` (Spark SQL ordering terms, each
    with its direction and NULL placement written out). Partitioning by an input's event-time
    column instead of a window makes a window of `POINT_US`."""

    window: EventWindow
    keys: tuple[str, ...]
    order: tuple[str, ...]
    limit: int

    def __post_init__(self) -> None:
        if self.limit < 1:
            msg = f"a top-N keeps at least one row per group, got {self.limit}"
            raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class Rollup:
    """``SELECT items FROM (<a GROUP BY query>) alias GROUP BY keys``, with no
    window: groups over every row the inner query ever emits, so their values change as rows
    come. An updating result, as Spark's update mode and Flink's upsert sinks give: each batch
    writes, for each group its new rows changed, the group's values over all rows so far; a
    reader keeps each group's newest row. `keys` and `select` are over the inner query's output
    columns (``alias.name``); the aggregates are count, sum, avg, min and max (no HAVING: a
    group written once would have to be withdrawn when it stopped passing)."""

    alias: str
    keys: tuple[str, ...]
    select: tuple[SelectItem, ...]
