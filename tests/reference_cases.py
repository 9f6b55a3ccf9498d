"""Job texts shared by tests: two streams and three batches for the reference's hand-counted
tests (`STREAMS`, `BATCHES`), and the bids and asks of the parser's tests (`PRELUDE`, five
lines, so that a statement after it starts on line 6)."""

from __future__ import annotations

import datetime as dt

STREAMS = """\
CREATE STREAM A (id BIGINT, k BIGINT, x DOUBLE, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'json', path = '/a');
CREATE STREAM B (id BIGINT, k BIGINT, x DOUBLE, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'json', path = '/b');
CREATE SINK s WITH (format = 'json', path = '/s');
"""
PRELUDE = """\
CREATE STREAM bids (id BIGINT, price DOUBLE, name STRING, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (format = 'json', path = 'in/bids');
CREATE STREAM asks (id BIGINT, price DOUBLE, ok BOOLEAN, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (format = 'json', path = 'in/asks');
CREATE SINK matches WITH (format = 'json', path = 'out/matches');
"""
JOIN = (
    "FROM A a JOIN B b ON a.k = b.k "
    "AND b.ts BETWEEN a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL '5' SECOND\n"
)
T0 = dt.datetime(2024, 1, 1)


def _t(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def _row(i: int, k: int, x: float | None, s: float) -> dict[str, object]:
    return {"id": i, "k": k, "x": x, "ts": _t(s)}


BATCHES = [
    {"A": [_row(1, 1, 1.0, 1), _row(2, 1, 2.0, 2)], "B": [_row(10, 1, 0.5, 3)]},
    {"A": [_row(3, 1, 3.0, 12)], "B": [_row(11, 1, None, 9), _row(12, 1, 0.1, 30)]},
    {"A": [_row(4, 2, 3.0, 40)], "B": [_row(13, 1, 0.5, 41)]},
]
"""Joined (a, b): (1, 10), (2, 10) at b.ts 3 s, arriving in batch 0; (3, 11) at b.ts 9 s, in
batch 1. The watermark after each batch: 1 s, 11 s, 39 s; b trails it by at most 5 s."""
