"""A live stream read through Spark's Python data source API (`format = 'python'`,
`tests.e2e.pysource`), killed with SIGKILL while it feeds: the restart replays the batch the
kill cut from the source's offsets, and the joins' total output is exact."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.metrics.history import read_history
from streamjoin.sql import parse_job

from .cli import streamjoin
from .files import read_json_rows
from .pysource import SCHEMA, rows

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ("aid", "bid", "kx")
TOTAL = 900
"""Rows each stream publishes, a step at a time while the job runs."""


def _job(tmp_path: Path) -> Path:
    columns = SCHEMA.replace("TIMESTAMP", "TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND")
    streams = [
        f"CREATE STREAM {name} ({columns}) WITH (format = 'python', "
        f"source = 'tests.e2e.pysource.CountedRows', feed = '{tmp_path / 'feed'}', "
        f"seed = '{seed}');"
        for name, seed in (("A", 1), ("B", 2))
    ]
    window = "b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND"
    sinks = {"eq": f"a.k = b.k AND {window}", "band": f"abs(a.x - b.x) <= 0.3 AND {window}"}
    text = "\n".join(
        [
            *streams,
            *(
                f"CREATE SINK {s} WITH (format = 'json', path = '{tmp_path / 'out' / s}');\n"
                f"INSERT INTO {s} SELECT a.id AS aid, b.id AS bid, a.k AS kx "
                f"FROM A a JOIN B b ON {on};"
                for s, on in sinks.items()
            ),
        ]
    )
    path = tmp_path / "job.sql"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_python_source_killed_while_it_feeds_replays_exactly(tmp_path: Path) -> None:
    job, ckpt, feed = _job(tmp_path), tmp_path / "ckpt", tmp_path / "feed"
    env = {"PYTHONPATH": str(ROOT)}  # (the source's module, for the driver and its workers)

    def write(count: str) -> None:  # (whole or not at all: the source reads it meanwhile)
        (tmp_path / "feed.tmp").write_text(count, encoding="utf-8")
        os.replace(tmp_path / "feed.tmp", feed)

    def publish() -> None:
        # A first step, then one every half second once the job's first batch is in.
        write("100")
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not (
            (ckpt / "metrics").exists() and read_history(str(ckpt / "metrics"))
        ):
            time.sleep(0.2)
        for n in range(200, TOTAL + 1, 100):
            time.sleep(0.5)
            write(str(n))

    feeder = threading.Thread(target=publish, daemon=True)
    feeder.start()
    args = ("run", str(job), "--checkpoint", str(ckpt), "--timeout", "120")
    killed = streamjoin(*args, env={**env, "STREAMJOIN_FAULT": "after-sink:2"})
    assert killed.returncode == -9, killed.stderr[-3000:]
    feeder.join()
    done = streamjoin("run", str(job), "--checkpoint", str(ckpt), "--once", env=env)
    assert done.returncode == 0, done.stderr[-3000:]

    expected = run_reference(
        parse_job(job.read_text(encoding="utf-8")), [{"A": rows(1, TOTAL), "B": rows(2, TOTAL)}]
    )
    for i, sink in enumerate(("eq", "band"), start=1):
        got = read_json_rows(tmp_path / "out" / sink, COLUMNS)
        assert normalize(got) == normalize(expected.outputs[f"q{i}"]), sink
        assert got, sink
