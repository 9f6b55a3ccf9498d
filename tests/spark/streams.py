"""Generated input streams for Spark tests: disorder, late rows, NULL and duplicate keys."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

BASE = datetime(2026, 1, 1)


def ts(seconds: float) -> datetime:
    """BASE + `seconds`, to the microsecond."""
    return BASE + timedelta(microseconds=round(seconds * 1e6))


def make_batches(
    seed: int,
    streams: tuple[str, ...] = ("A", "B"),
    n_batches: int = 6,
    rows_per_batch: int = 12,
    step_s: float = 2.0,
    disorder_s: float = 1.5,
    late_per_batch: int = 1,
    keys: int = 4,
) -> list[dict[str, list[dict[str, object]]]]:
    """Batches of rows ``{k, x, s, ts}``; event time advances `step_s` per batch.

    Rows are out of order by up to `disorder_s` (inside a 2 s watermark delay), keys repeat and
    are sometimes NULL, and from the third batch on each batch carries `late_per_batch` rows far
    behind any watermark.
    """
    rng = random.Random(seed)
    batches = []
    uid = 0
    for b in range(n_batches):
        batch: dict[str, list[dict[str, object]]] = {}
        for name in streams:
            rows: list[dict[str, object]] = []
            for _ in range(rng.randint(rows_per_batch // 2, rows_per_batch)):
                uid += 1
                rows.append(
                    {
                        "id": uid,
                        "k": None if rng.random() < 0.1 else rng.randrange(keys),
                        "x": round(rng.uniform(0, 10), 1),
                        "s": rng.choice(["p", "q", None]),
                        "ts": ts(b * step_s + rng.uniform(-disorder_s, step_s)),
                    }
                )
            if b >= 2:
                for _ in range(late_per_batch):
                    uid += 1
                    rows.append({"id": uid, "k": 1, "x": 5.0, "s": "p", "ts": ts(b * step_s - 30)})
            rng.shuffle(rows)
            batch[name] = rows
        batches.append(batch)
    return batches


STREAM_DDL = """
CREATE STREAM {name} (id BIGINT, k BIGINT, x DOUBLE, s STRING, ts TIMESTAMP,
                      WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (format = 'json', path = '{path}');
"""


def stream_ddl(name: str, path: str = "/unused") -> str:
    """The CREATE STREAM statement of a generated stream."""
    return STREAM_DDL.format(name=name, path=path)


def window_join_job(
    sink_path: str, seconds: int, inputs: str | None = None, fmt: str = "json"
) -> str:
    """Streams A and B, a parquet sink `w`, and the equi join of A and B on `k` within ±`seconds`
    of event time. With `inputs`, the streams read the `fmt` files of ``inputs/A`` and
    ``inputs/B``, one file a micro-batch."""

    def ddl(name: str) -> str:
        if inputs is None:
            return stream_ddl(name)
        return stream_ddl(name, f"{inputs}/{name}").replace(
            "WITH (format = 'json', ", f"WITH (format = '{fmt}', maxFilesPerTrigger = '1', "
        )

    return "\n".join(
        [
            ddl("A"),
            ddl("B"),
            f"CREATE SINK w WITH (format = 'parquet', path = '{sink_path}');",
            "INSERT INTO w SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON a.k = b.k AND "
            f"b.ts BETWEEN a.ts - INTERVAL '{seconds}' SECOND "
            f"AND a.ts + INTERVAL '{seconds}' SECOND;",
        ]
    )
