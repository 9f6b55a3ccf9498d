"""What a sourced Parquet stream's input files tell of a batch before Spark reads a row.

A batch of a stream whose state is its input files (`runtime.state.sourcefiles`) reads files Spark's
logs name. Their Parquet footers hold each file's row count and, per row group, the event-time
column's least and greatest value and its NULL count: about a millisecond a file (pyarrow, no
Spark job). From them:

- the least event time of the batch's rows, which bounds the state that can meet them
  (`runtime.batch.twoway`);
- when no row is NULL and the least is at or past the watermark the batch started with, every
  row is ok (`runtime.batch.intake`): the batch's counts and event-time range are the footers', and
  the batch needs no statistics job (`runtime.state.statejob`). Spark's own count of the batch's
  input rows, which such a job used to make true, is then set from them
  (`inputrows.count_input_rows`).

Only local files whose event-time column is stored as a UTC-adjusted Parquet timestamp under
the stream's own name (not computed, not cast from another type) qualify: there the footers'
values are the event times Spark reads.
"""

from __future__ import annotations

import json
import typing as t
from dataclasses import dataclass

from streamjoin.runtime.batch.intake import EVENT_TIME_RANGE
from streamjoin.runtime.sources import column_exprs

if t.TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from streamjoin.plan import StreamPlan

_LEAST = -(2**63)
"""The least long: `Footers.bound` when every value is NULL."""
_MICROS_PER = {"milliseconds": 1_000, "microseconds": 1, "nanoseconds": 0}
"""Parquet timestamp units, as microseconds each (0: nanoseconds, divided instead)."""


@dataclass(frozen=True)
class Footers:
    """The footers of one stream's files in a batch."""

    rows: Mapping[str, int]
    """Each file's rows."""
    least: int | None
    """The least event time (microseconds) of any row; None when every one is NULL."""
    greatest: int | None
    """The greatest, likewise; None also when a nanosecond column cannot tell it exactly."""
    nulls: int
    """Rows whose event time is NULL."""
    bound: int | None = None
    """For a stream whose rows leave by a column (`StreamPlan.expiry`): its greatest value
    (microseconds; the least long when every one is NULL, `StateUnit.bound`); None when the
    footers do not tell it, or the stream has none."""

    @property
    def total(self) -> int:
        """The rows of all the files."""
        return sum(self.rows.values())

    def all_ok(self, watermark: int | None) -> bool:
        """Whether every row is ok for a batch that started at `watermark`: none has a NULL
        event time or one outside `EVENT_TIME_RANGE` (malformed), or one behind the watermark
        (late)."""
        if self.nulls:
            return False
        if self.least is None:
            return True  # (no rows)
        low, high = EVENT_TIME_RANGE
        return (
            self.greatest is not None
            and low <= self.least
            and self.greatest <= high
            and (watermark is None or self.least >= watermark)
        )


def read_footers(sp: StreamPlan, files: Collection[str]) -> Footers | None:
    """The footers of `sp`'s Parquet `files`, or None where any does not bound its event
    times (see the module's text)."""
    s = sp.stream
    ts = s.event_time
    if s.format != "parquet" or ts is None or ts in column_exprs(s) or not files:
        return None
    import pyarrow.parquet as pq

    rows: dict[str, int] = {}
    lows: list[int] = []
    highs: list[int | None] = []
    nulls = 0
    expiry = sp.expiry.column if sp.expiry is not None else None
    # (A column computed from others is not in the files: the state job measures it.)
    ends: list[int] | None = [] if expiry and expiry not in column_exprs(s) else None
    for file in files:
        path = _local_path(file)
        if path is None:
            return None
        try:
            meta = pq.read_metadata(path)
        except (OSError, ValueError, NotImplementedError):  # (Arrow's errors derive from these)
            return None
        rows[file] = 0
        for g in range(meta.num_row_groups):
            stored = meta.row_group(g)
            group = _RowGroup.of(stored, ts)
            if group is None:
                return None
            rows[file] += stored.num_rows
            nulls += group.nulls
            if group.least is not None:
                lows.append(group.least)
                highs.append(group.greatest)
            if ends is not None:
                end = _RowGroup.of(stored, t.cast("str", expiry))
                if end is None or (end.least is not None and end.greatest is None):
                    ends = None  # (not told: the state job measures it)
                elif end.greatest is not None:
                    ends.append(end.greatest)
    exact = [h for h in highs if h is not None]
    return Footers(
        rows=rows,
        least=min(lows) if lows else None,
        greatest=max(exact) if exact and len(exact) == len(highs) else None,
        nulls=nulls,
        bound=None if ends is None else max(ends, default=_LEAST),
    )


def _local_path(file: str) -> str | None:
    """The local path of `file` as Spark's logs name it (decoded already: ``file:///a b``), or
    None for another file system."""
    scheme, colon, rest = file.partition(":")
    if not colon or "/" in scheme:
        return file
    return "/" + rest.lstrip("/") if scheme == "file" else None


@dataclass(frozen=True)
class _RowGroup:
    least: int | None
    greatest: int | None
    nulls: int

    @staticmethod
    def of(group: t.Any, column: str) -> _RowGroup | None:
        """The event-time bounds of a Parquet row group (its least and greatest None when every
        value is NULL), or None when its statistics do not bound them."""
        for j in range(group.num_columns):
            chunk = group.column(j)
            if chunk.path_in_schema != column:
                continue
            stats = chunk.statistics
            if chunk.physical_type != "INT64" or stats is None or not stats.has_null_count:
                return None
            kind = json.loads(stats.logical_type.to_json())
            scale = _MICROS_PER.get(kind.get("timeUnit", ""))
            if kind.get("Type") != "Timestamp" or not kind.get("isAdjustedToUTC") or scale is None:
                return None
            nulls = int(stats.null_count)
            if not stats.has_min_max:
                return _RowGroup(None, None, nulls) if nulls == group.num_rows else None
            low, high = int(stats.min_raw), int(stats.max_raw)
            if scale:
                return _RowGroup(low * scale, high * scale, nulls)
            # Nanoseconds: the floor of the least is a bound; the greatest is not exact.
            return _RowGroup(low // 1_000, None, nulls)
        return None
