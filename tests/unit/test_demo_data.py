"""The demo's generated streams (`streamjoin.demo.generate`): Parquet files whose footers tell
each file's rows and event times, in the order a file source takes them."""

from __future__ import annotations

import os
import typing as t

import pyarrow.parquet as pq

from streamjoin.demo import DEMO_JOB, generate
from streamjoin.sql import parse_job

if t.TYPE_CHECKING:
    from pathlib import Path


def test_the_demo_writes_parquet_files_in_event_time_order(tmp_path: Path) -> None:
    generate(str(tmp_path), rows=400)
    for stream in ("bids", "asks"):
        folder = tmp_path / stream
        names = sorted(os.listdir(folder))
        assert len(names) == 8 and all(n.endswith(".parquet") for n in names)
        mtimes = [os.stat(folder / n).st_mtime for n in names]
        assert mtimes == sorted(mtimes)  # (a file source takes them in this order)
        tables = [pq.read_table(folder / n) for n in names]
        assert sum(t.num_rows for t in tables) == 400
        assert tables[0].schema.field("ts").type.tz == "UTC"
        # Event times rise from file to file, up to the 2 s of disorder within one.
        maxima = [max(t.column("ts").to_pylist()) for t in tables]
        assert maxima == sorted(maxima)
    job = parse_job(DEMO_JOB.format(data=tmp_path, out=tmp_path / "out"))
    assert {s.format for s in job.streams} == {"parquet"}
