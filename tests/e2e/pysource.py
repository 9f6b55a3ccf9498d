"""A live stream through Spark's Python data source API (`format = 'python'`, the stand-in
for Kafka here): each row is made from its offset alone, so a batch read again (a replay
after a SIGKILL) reads the same rows, and the rows published so far are counted in a file
(``feed``) that the test advances while the job runs."""

from __future__ import annotations

import typing as t
from datetime import datetime, timedelta
from pathlib import Path

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

if t.TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql.types import StructType

BASE = datetime(2026, 1, 1)
SCHEMA = "id BIGINT, k BIGINT, x DOUBLE, s STRING, ts TIMESTAMP"


def row(seed: int, i: int) -> tuple[int, int | None, float, str, datetime]:
    """Row `i` of stream `seed`: event time 20 ms a row, a little out of order; a few NULL
    keys."""
    k = None if i % 11 == 7 else (i * 7 + seed) % 5
    x = ((i * 13 + seed * 5) % 100) / 10
    late = 150 if i % 4 == 1 else 0  # (behind the rows before it, within the watermark's delay)
    ts = BASE + timedelta(milliseconds=20 * i + 3 * seed - late)
    return seed * 1_000_000 + i, k, x, "p" if i % 2 else "q", ts


def rows(seed: int, n: int) -> list[dict[str, object]]:
    """The first `n` rows of stream `seed`, as the reference executor takes them."""
    return [dict(zip(("id", "k", "x", "s", "ts"), row(seed, i), strict=True)) for i in range(n)]


def published(feed: str) -> int:
    """The rows published so far (the feed file's count; none before it exists)."""
    path = Path(feed)
    return int(path.read_text(encoding="utf-8") or 0) if path.exists() else 0


class CountedRows(DataSource):
    """Options: ``feed`` (the counter file), ``seed`` (which stream's rows)."""

    @classmethod
    def name(cls) -> str:
        return "streamjoin_counted_rows"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _Reader(self.options["feed"], int(self.options.get("seed", "0")))


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        super().__init__((start, end))
        self.start, self.end = start, end


class _Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, feed: str, seed: int) -> None:
        self.feed, self.seed = feed, seed
        self.target: int | None = None  # (availableNow: the rows published when it began)

    def initialOffset(self) -> dict[str, int]:
        return {"rows": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = published(self.feed)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        now = published(self.feed)
        return {"rows": now if self.target is None else min(now, self.target)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [_Range(start["rows"], end["rows"])]

    def read(self, partition: InputPartition) -> Iterator[tuple[object, ...]]:
        assert isinstance(partition, _Range)
        for i in range(partition.start, partition.end):
            yield row(self.seed, i)

    def commit(self, end: dict[str, int]) -> None:
        pass
