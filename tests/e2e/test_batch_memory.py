"""A batch whose pairs outweigh the driver's heap: the probe streams them to the sink as it finds
them (``ProbePairs.java``), so the batch runs where holding its pairs would not."""

from __future__ import annotations

import typing as t

import pyarrow.compute as pc
import pyarrow.parquet as pq

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job
from tests.spark.streams import stream_ddl, ts

from .cli import quick_driver, streamjoin
from .files import write_batches

if t.TYPE_CHECKING:
    from pathlib import Path

ROWS = 500
"""Rows a stream, all of one key within the window: 250,000 pairs in one batch."""
PAYLOAD = 3000
"""Characters of each row's ``s``, which every pair carries: about 750 MB of pairs, where the
driver's heap is Spark's least (`HEAP`)."""
HEAP = "512m"
PREFIX = 8
"""The characters of ``s`` that name its row (the rest repeat one letter)."""


def _rows(first_id: int, letter: str) -> list[dict[str, object]]:
    return [
        {
            "id": first_id + i,
            "k": 1,
            "x": 1.0,
            "s": f"{first_id + i:0{PREFIX}d}" + letter * PAYLOAD,
            "ts": ts(i * 0.001),
        }
        for i in range(ROWS)
    ]


def test_a_batch_of_pairs_larger_than_the_heap_streams_to_its_sink(tmp_path: Path) -> None:
    batches = [{"A": _rows(0, "a"), "B": _rows(10**6, "b")}]
    write_batches(tmp_path / "in", batches)
    out = tmp_path / "out"
    text = "\n".join(
        [
            stream_ddl("A", str(tmp_path / "in" / "A")),
            stream_ddl("B", str(tmp_path / "in" / "B")),
            f"CREATE SINK o WITH (format = 'parquet', path = '{out}');",
            "INSERT INTO o SELECT a.id AS aid, b.id AS bid, a.s AS s FROM A a JOIN B b "
            "ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '10' SECOND "
            "AND a.ts + INTERVAL '10' SECOND;",
        ]
    )
    job = tmp_path / "job.sql"
    job.write_text(text, encoding="utf-8")

    run = streamjoin("run", str(job), "--once", env=quick_driver(memory=HEAP))
    assert run.returncode == 0, run.stderr[-3000:]

    # (``s`` read as a dictionary of its few values: 750 MB of strings are not made again.)
    table = pq.read_table(out, columns=["aid", "bid", "s"], read_dictionary=["s"])
    named = [(c.dictionary, c.indices) for c in table["s"].chunks]
    got = zip(
        table["aid"].to_pylist(),
        table["bid"].to_pylist(),
        [n for d, i in named for n in pc.utf8_length(d).take(i).to_pylist()],
        [p for d, i in named for p in pc.utf8_slice_codeunits(d, 0, PREFIX).take(i).to_pylist()],
        strict=True,
    )
    expected = run_reference(parse_job(text), batches).outputs["q1"]
    assert len(expected) == ROWS * ROWS
    rows = ((a, b, str(s)) for a, b, s in expected)
    assert normalize(got) == normalize((a, b, len(s), s[:PREFIX]) for a, b, s in rows)
