"""Timestamp comparisons made in microseconds (`plan.micros`): which are rewritten, and that the
rewritten predicate is true, false or NULL exactly when the written one is (the reference
executor's evaluation of both; Spark's own, in zones with daylight saving, is checked in
``tests/spark/test_micros_predicate.py``)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from streamjoin.model import Job
from streamjoin.plan import plan_job
from streamjoin.plan.micros import implied_by_window, micros_predicate
from streamjoin.reference.evaluate import compile_expression
from streamjoin.sql import parse_job

TS = ["l.ts", "r.ts", "r.at"]


@pytest.mark.parametrize(
    ("written", "made"),
    [
        (
            "r.ts BETWEEN l.ts - INTERVAL '10' SECOND AND l.ts + INTERVAL '5' SECOND",
            "UNIX_MICROS(r.ts) BETWEEN UNIX_MICROS(l.ts) - 10000000 "
            "AND UNIX_MICROS(l.ts) + 5000000",
        ),
        (
            "r.ts >= l.ts + INTERVAL '1.5' SECOND",
            "UNIX_MICROS(r.ts) >= UNIX_MICROS(l.ts) + 1500000",
        ),
        ("INTERVAL 3 MINUTES + l.ts < r.ts", "UNIX_MICROS(l.ts) + 180000000 < UNIX_MICROS(r.ts)"),
        (
            "(l.ts - INTERVAL '1' HOUR) + INTERVAL '2' MILLISECOND = r.at",
            "UNIX_MICROS(l.ts) - 3600000000 + 2000 = UNIX_MICROS(r.at)",
        ),
        (
            "r.TS <> L.ts - INTERVAL '23' HOUR",
            "UNIX_MICROS(r.TS) <> UNIX_MICROS(L.ts) - 82800000000",
        ),
        (
            "l.k = r.k AND (r.ts < l.ts + INTERVAL '1' SECOND OR l.x > 2)",
            "l.k = r.k AND (UNIX_MICROS(r.ts) < UNIX_MICROS(l.ts) + 1000000 OR l.x > 2)",
        ),
    ],
)
def test_timestamps_offset_by_less_than_a_day_compare_in_microseconds(
    written: str, made: str
) -> None:
    assert micros_predicate(written, TS) == made


@pytest.mark.parametrize(
    "written",
    [
        "r.ts < l.ts + INTERVAL '1' DAY",  # (days go through the session's calendar)
        "r.ts < l.ts + INTERVAL '24' HOUR",
        "r.ts < l.ts + INTERVAL '0.0000001' SECOND",  # (finer than a microsecond)
        "r.ts < l.ts",  # (no arithmetic to save)
        "r.ts < TIMESTAMP '2024-01-01 00:00:00' + INTERVAL '1' SECOND",
        "r.other < l.ts + INTERVAL '1' SECOND",  # (not a TIMESTAMP column)
        "ts < l.ts + INTERVAL '1' SECOND",  # (unqualified)
        "r.ts < l.ts + INTERVAL '1:30' MINUTE TO SECOND",
        "r.ts < l.ts * 2",
    ],
)
def test_anything_else_runs_as_written(written: str) -> None:
    assert micros_predicate(written, TS) == written


_times = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1))
_offsets = st.sampled_from(
    [
        "INTERVAL '10' SECOND",
        "INTERVAL '0.000001' SECOND",
        "INTERVAL '23' HOUR",
        "INTERVAL '90' MINUTE",
        "INTERVAL '-7' MILLISECOND",
    ]
)
_ops = st.sampled_from(["<", "<=", ">", ">=", "=", "<>", "<=>"])


@given(
    l_ts=st.none() | _times,
    r_ts=st.none() | _times,
    lo=_offsets,
    hi=_offsets,
    op=_ops,
)
def test_the_rewritten_predicate_has_the_same_truth_values(
    l_ts: dt.datetime | None, r_ts: dt.datetime | None, lo: str, hi: str, op: str
) -> None:
    env = {"l": {"ts": l_ts}, "r": {"ts": r_ts, "at": l_ts}}
    for written in (
        f"r.ts BETWEEN l.ts - {lo} AND l.ts + {hi}",
        f"r.ts {op} l.ts + {lo}",
        f"l.ts - {hi} {op} r.at + {lo}",
    ):
        made = micros_predicate(written, TS)
        assert made != written
        assert compile_expression(made)(env) == compile_expression(written)(env), written


def _job(on: str) -> Job:
    return parse_job(
        "CREATE STREAM a (k BIGINT, ts TIMESTAMP, at TIMESTAMP, n BIGINT, "
        "WATERMARK FOR ts AS ts) WITH (format = 'rate');\n"
        "CREATE SINK s WITH (format = 'console');\n"
        f"INSERT INTO s SELECT l.k AS k FROM a l JOIN a r ON {on};"
    )


def test_the_plan_carries_the_predicate_spark_runs() -> None:
    qp = plan_job(
        _job("l.k = r.k AND r.at < l.ts + INTERVAL '1' SECOND AND r.n < l.n + 1")
    ).queries[0]
    assert qp.spark_predicate == (
        "l.k = r.k AND UNIX_MICROS(r.at) < UNIX_MICROS(l.ts) + 1000000 AND r.n < l.n + 1"
    )
    assert "INTERVAL" in qp.query.predicate  # (the written one stays, for the reference)


@pytest.mark.parametrize(
    ("conjunct", "implied"),
    [
        ("r.ts BETWEEN l.ts - INTERVAL '10' SECOND AND l.ts + INTERVAL '10' SECOND", True),
        ("r.ts BETWEEN l.ts - INTERVAL '5' SECOND AND l.ts + INTERVAL '5' SECOND", True),
        ("r.ts BETWEEN l.ts - INTERVAL '4' SECOND AND l.ts + INTERVAL '5' SECOND", False),
        ("(l.ts <= r.ts + INTERVAL '5' SECOND)", True),
        ("l.ts < r.ts + INTERVAL '5' SECOND", False),  # (d = -5 s is in the window)
        ("l.ts < r.ts + INTERVAL '5.000001' SECOND", True),
        ("r.ts - INTERVAL '1' MINUTE < l.ts", True),
        ("r.ts >= l.ts - INTERVAL '5' SECOND", True),
        ("r.ts > l.ts - INTERVAL '5' SECOND", False),
        ("r.ts = l.ts", False),
        ("r.ts < l.ts + INTERVAL '1' DAY", False),  # (days go through the session's calendar)
        ("r.ts < r.ts + INTERVAL '1' SECOND", False),  # (one column: not a bound on the pair)
        ("r.at < l.ts + INTERVAL '10' SECOND", False),  # (not the window's columns)
        ("r.ts NOT BETWEEN l.ts - INTERVAL '9' SECOND AND l.ts - INTERVAL '8' SECOND", False),
        ("r.ts < l.ts + INTERVAL '9' SECOND OR r.k = 1", False),
        ("l.k = r.k", False),
        ("INTERVAL '5' SECOND + l.ts >= r.ts", True),  # (the interval first)
        ("R.`TS` <= L.ts + INTERVAL '3' SECOND + INTERVAL '2' SECOND", True),  # (summed)
        ("r.ts <= l.ts + INTERVAL '3' SECOND + INTERVAL '1' SECOND", False),
    ],
)
def test_a_conjunct_the_window_bounds_already(conjunct: str, implied: bool) -> None:
    assert implied_by_window(conjunct, "l.ts", "r.ts", -5_000_000, 5_000_000) is implied


def test_no_conjunct_is_implied_by_a_window_of_a_day_or_more() -> None:
    # (Spark adds such an interval in the session's zone: across a change of daylight saving
    # the shared window admits pairs 24 h apart by the clock, not by the instant.)
    day = 86_400_000_000
    written = "r.ts BETWEEN l.ts AND l.ts + INTERVAL '23' HOUR + INTERVAL '2' HOUR"
    assert implied_by_window(written, "l.ts", "r.ts", 0, day - 1)
    assert not implied_by_window(written, "l.ts", "r.ts", 0, day)


_us = st.integers(-(10**8), 10**8)


@given(
    lo=_us,
    width=st.integers(0, 10**8),
    d=st.integers(0, 10**8),
    a=_us,
    b=_us,
    op=st.sampled_from(["<", "<=", ">", ">=", "="]),
    swap=st.booleans(),
    l_ts=_times,
)
def test_an_implied_conjunct_holds_on_every_pair_in_the_window(
    lo: int, width: int, d: int, a: int, b: int, op: str, swap: bool, l_ts: dt.datetime
) -> None:
    """Whenever a conjunct is said to be implied, the reference finds it true on pairs at
    both ends of the window and inside it."""
    hi = lo + width
    x, y = ("l.ts", "r.ts") if swap else ("r.ts", "l.ts")
    for conjunct in (
        f"{x} + INTERVAL '{a}' MICROSECOND {op} {y} + INTERVAL '{b}' MICROSECOND",
        f"{x} BETWEEN {y} + INTERVAL '{min(a, b)}' MICROSECOND "
        f"AND {y} + INTERVAL '{max(a, b)}' MICROSECOND",
    ):
        if not implied_by_window(conjunct, "l.ts", "r.ts", lo, hi):
            continue
        event("implied")  # (hypothesis's statistics: the property is put to the test)
        check = compile_expression(conjunct)
        for diff in {lo, hi, lo + min(d, width)}:
            r_ts = l_ts + dt.timedelta(microseconds=diff)
            assert check({"l": {"ts": l_ts}, "r": {"ts": r_ts}}), (conjunct, diff)
