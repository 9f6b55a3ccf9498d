"""The event-time span of the stored rows a batch can meet, per side of a query: what the
time-bucket policy weighs (`runtime.routing.router._spans`, `adapt.hashskew.bucket_gain`)."""

from __future__ import annotations

from streamjoin.plan import QueryPlan, plan_job
from streamjoin.runtime.routing.router import _spans
from streamjoin.runtime.state.manifest import Manifest, StateUnit
from streamjoin.runtime.state.nextmanifest import StreamStats
from streamjoin.sql import parse_job

S = 1_000_000
JOB = "".join(
    f"CREATE STREAM {s} (id BIGINT, k BIGINT, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) "
    f"WITH (format = 'json', path = '/in/{s}');"
    for s in "ab"
) + (
    "CREATE SINK o WITH (format = 'json', path = '/out');"
    "INSERT INTO o SELECT a.id AS i FROM a JOIN b ON a.k = b.k AND "
    "b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '3' SECOND;"
)


def _qp() -> QueryPlan:
    return plan_job(parse_job(JOB)).queries[0]


def test_a_side_spans_from_the_querys_cut_off_to_its_newest_stored_or_new_row() -> None:
    """The stream keeps rows from 0 s (another query's retention, or a unit not yet wholly
    dead), but this query meets left rows from W - 3 s and right rows from W - 1 s only."""
    units = [
        StateUnit("a", 0, 10, 0, 5 * S),
        StateUnit("a", 1, 10, 5 * S, 10 * S),
        StateUnit("a", 2, 0, None, None),
        StateUnit("b", 1, 10, 2 * S, 9 * S),
    ]
    prev = Manifest(batch=2, global_wm=8 * S, units=units)
    stats = {"a": StreamStats(ok=5, min_ts=9 * S, max_ts=11 * S), "b": StreamStats()}
    assert _spans(_qp(), prev, stats) == (11 * S - 5 * S, 9 * S - 7 * S)


def test_before_any_watermark_a_side_spans_its_rows_and_without_rows_is_unknown() -> None:
    prev = Manifest(units=[StateUnit("a", 0, 10, 1 * S, 4 * S)])
    stats = {"a": StreamStats(ok=3, min_ts=3 * S, max_ts=6 * S), "b": StreamStats()}
    assert _spans(_qp(), prev, stats) == (5 * S, None)
