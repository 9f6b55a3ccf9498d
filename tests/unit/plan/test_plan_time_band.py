"""The event-time window as a bucket key of an equi join (the query option ``time_buckets``)."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError, UnsupportedError
from streamjoin.plan import QueryPlan, plan_job
from streamjoin.sql import parse_job

STREAMS = "".join(
    f"CREATE STREAM {s} (id BIGINT, k BIGINT, x DOUBLE, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) "
    f"WITH (format = 'json', path = '/in/{s}');"
    for s in "ab"
)
W = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '5' SECOND"


def _plan(on: str, with_: str = "") -> QueryPlan:
    text = (
        STREAMS
        + "CREATE SINK o WITH (format = 'json', path = '/out');"
        + f"INSERT INTO o SELECT a.id AS i FROM a JOIN b ON {on}"
        + (f" WITH ({with_})" if with_ else "")
        + ";"
    )
    return plan_job(parse_job(text)).queries[0]


def test_an_equi_join_with_a_window_carries_the_window_as_a_temporal_band() -> None:
    qp = _plan(f"a.k = b.k AND {W}")
    assert qp.strategy == "hash" and qp.band is None
    assert qp.time_band is not None and qp.time_band.temporal
    assert (qp.time_band.lo, qp.time_band.hi) == (-3e6, 5e6)
    assert qp.time_band.width == 8e6  # a window reaches at most two buckets


@pytest.mark.parametrize(
    "on",
    [
        f"a.k = b.k AND abs(a.x - b.x) <= 1 AND {W}",  # the value band is bucketed already
        "a.k = b.k",  # full history: no window
        f"abs(a.x - b.x) <= 1 AND {W}",  # no key: a band join already
        "a.k = b.k AND b.ts >= a.ts",  # the window is open on one side
    ],
)
def test_no_time_band_without_key_and_bounded_window_or_with_a_value_band(on: str) -> None:
    assert _plan(on).time_band is None


def test_forcing_time_buckets_without_a_window_is_an_error_naming_the_query() -> None:
    with pytest.raises(UnsupportedError, match="query q1: time_buckets = true needs"):
        _plan("a.k = b.k", "time_buckets = 'true'")


def test_time_buckets_takes_auto_true_or_false() -> None:
    assert _plan(f"a.k = b.k AND {W}", "time_buckets = 'false'").time_band is not None
    with pytest.raises(JobError, match="time_buckets must be auto, true or false, got 'yes'"):
        _plan(f"a.k = b.k AND {W}", "time_buckets = 'yes'")
