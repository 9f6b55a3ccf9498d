"""Backlogs on disk: the bytes every engine reads, cut into files that become micro-batches.

A backlog is one directory per stream of Parquet files ``part-<i>.parquet``. File i of every
stream covers the same span of event time, and the files' modification times follow i, so a file
source with ``maxFilesPerTrigger = 1`` hands each engine the same micro-batches in the same order.
Rows are disordered inside a bounded jitter smaller than the watermark delay, so no row is late
and a batch join of all input is the exact expected result.
"""

from __future__ import annotations

import os
import shutil
import typing as t
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

if t.TYPE_CHECKING:
    from collections.abc import Mapping

BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)
_MTIME0 = 1_700_000_000
US = 1_000_000


@dataclass(frozen=True)
class Backlog:
    """What was written: a directory per stream, the file count and the rows per stream."""

    root: str
    streams: dict[str, str]
    files: int
    rows: dict[str, int]
    raw_bytes: dict[str, int]

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def write_backlog(
    root: str, tables: Mapping[str, pa.Table], ts_column: Mapping[str, str], files: int
) -> Backlog:
    """Cut every table into `files` equal spans of event time and write them as Parquet files.

    Every stream gets every file, empty or not, so the engines' batches stay aligned. Each
    stream's folder is emptied first: a file left by an earlier run with more files would be
    read as one more batch of rows that are late and of another key space.
    """
    lo = min(_ts_us(tab[ts_column[s]]).min() for s, tab in tables.items() if tab.num_rows)
    hi = max(_ts_us(tab[ts_column[s]]).max() for s, tab in tables.items() if tab.num_rows)
    width = (int(hi) - int(lo)) // files + 1
    dirs, rows, raw = {}, {}, {}
    for name, table in tables.items():
        folder = os.path.join(root, name)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        chunk = (_ts_us(table[ts_column[name]]) - lo) // width
        order = np.argsort(chunk, kind="stable")
        table = table.take(pa.array(order))
        bounds = np.searchsorted(chunk[order], np.arange(files + 1))
        for i in range(files):
            part = table.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i]))
            path = os.path.join(folder, f"part-{i:05d}.parquet")
            pq.write_table(part, path)
            os.utime(path, (_MTIME0 + i, _MTIME0 + i))
        dirs[name], rows[name] = folder, table.num_rows
        raw[name] = int(table.nbytes)
    return Backlog(root, dirs, files, rows, raw)


def _ts_us(column: pa.ChunkedArray) -> np.ndarray[t.Any, np.dtype[np.int64]]:
    return np.asarray(pc.cast(column, pa.timestamp("us", tz="UTC")).cast(pa.int64()))


def two_streams(
    rows: int,
    *,
    span_seconds: float,
    keys: int,
    x_range: float = 1_000_000.0,
    jitter_seconds: float = 0.5,
    seed: int = 0,
    names: tuple[str, ...] = ("a", "b"),
) -> dict[str, pa.Table]:
    """Streams `names` (``a`` and ``b``) of `rows` rows each: ``id``, uniform key ``k`` in [0,
    keys), uniform ``x`` in [0, x_range), and event time ``ts`` spread evenly over the span
    with up to `jitter_seconds` of disorder."""
    rng = np.random.default_rng(seed)
    out = {}
    base = int(BASE_TIME.timestamp()) * US
    for name in names:
        nominal = np.linspace(0, span_seconds * US, rows, endpoint=False).astype(np.int64)
        jitter = (rng.random(rows) * jitter_seconds * US).astype(np.int64)
        ts = base + nominal + jitter
        out[name] = pa.table(
            {
                "id": pa.array(np.arange(rows, dtype=np.int64)),
                "k": pa.array(rng.integers(0, keys, rows, dtype=np.int64)),
                "x": pa.array(np.round(rng.random(rows) * x_range, 3)),
                "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            }
        )
    return out
