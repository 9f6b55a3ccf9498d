"""Live state of a window join stays bounded; a full-history join keeps everything."""

from __future__ import annotations

import random
import typing as t

from streamjoin.sql import parse_job

from .harness import run_batches
from .streams import ts, window_join_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

RATE = 20  # rows per stream per second of event time; one batch per second
DELAY_S = 2  # the streams' watermark delay (see streams.STREAM_DDL)
WINDOW_S = 4  # b.ts - a.ts in [-2 s, +2 s]


def _steady(n_batches: int) -> list[dict[str, list[dict[str, object]]]]:
    rng = random.Random(3)
    batches, uid = [], 0
    for b in range(n_batches):
        batch: dict[str, list[dict[str, object]]] = {}
        for name in ("A", "B"):
            rows: list[dict[str, object]] = []
            for i in range(RATE):
                uid += 1
                rows.append(
                    {
                        "id": uid,
                        "k": rng.randrange(5),
                        "x": 1.0,
                        "s": "p",
                        "ts": ts(b + i / RATE - rng.uniform(0, 1)),
                    }
                )
            batch[name] = rows
        batches.append(batch)
    return batches


def test_window_state_is_bounded_and_full_history_keeps_all(
    spark: SparkSession, tmp_path: Path
) -> None:
    text = window_join_job(str(tmp_path / "w"), 2)
    batches = _steady(14)  # eight batches of warm-up, six steady ones (the CI budget)
    reports = run_batches(spark, parse_job(text), batches, tmp_path / "w-ckpt")
    bound = RATE * (WINDOW_S + DELAY_S) * 1.5
    per_stream = [r.manifest.state_rows() for r in reports]
    # After the warm-up, every batch's live state is within the bound, and does not grow.
    for b, rows in enumerate(per_stream[8:], start=8):
        assert max(rows.values()) <= bound, (b, rows, bound)
    assert max(per_stream[-1].values()) > RATE  # the state is not trivially empty

    full = text.replace(
        " AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '2' SECOND", ""
    ).replace(str(tmp_path / "w"), str(tmp_path / "f"))
    few = batches[:8]
    reports = run_batches(spark, parse_job(full), few, tmp_path / "f-ckpt")
    assert reports[-1].manifest.state_rows() == {s: sum(len(b[s]) for b in few) for s in ("A", "B")}
