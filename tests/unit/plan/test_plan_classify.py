"""Predicate classification, strategies and state retention."""

from __future__ import annotations

import pytest

from streamjoin.plan import Band, EquiKey, TimeWindow, classify_predicate, plan_job
from streamjoin.sql import parse_job

STREAMS = """
CREATE STREAM A (k BIGINT, x DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (format = 'json', path = '/a');
CREATE STREAM B (k BIGINT, y DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (format = 'json', path = '/b');
CREATE STREAM N (k BIGINT, y DOUBLE) WITH (format = 'json', path = '/n');
CREATE SINK o WITH (format = 'console');
"""


def _c(pred: str) -> object:
    return classify_predicate(pred, "a", "b", "ts", "ts")


def test_mixed_predicate_splits_into_keys_band_window_residual() -> None:
    p = classify_predicate(
        "a.k = b.k AND abs(a.x - b.y) <= 2 AND a.x <> b.y "
        "AND b.ts BETWEEN a.ts - INTERVAL '10' SECOND AND a.ts + INTERVAL '5' SECOND",
        "a",
        "b",
        "ts",
        "ts",
    )
    assert p.equi == (EquiKey("a.k", "b.k"),)
    assert p.bands == (Band("a.x", "b.y", -2.0, 2.0),)
    assert p.window == TimeWindow(-10_000_000, 5_000_000)
    assert p.residual == ("a.x <> b.y",)


@pytest.mark.parametrize(
    ("pred", "lo", "hi"),
    [
        ("b.y BETWEEN a.x - 1.5 AND a.x + 2", -1.5, 2.0),
        ("a.x BETWEEN b.y - 1 AND b.y + 3", -3.0, 1.0),  # mirrored: b.y - a.x in [-3, 1]
        ("a.x < b.y AND b.y < a.x + 5", 0.0, 5.0),
        ("b.y >= a.x - 1 AND a.x + 4 >= b.y", -1.0, 4.0),
        ("abs(b.y - a.x) < 0.25", -0.25, 0.25),
    ],
)
def test_band_forms(pred: str, lo: float, hi: float) -> None:
    p = classify_predicate(pred, "a", "b", None, None)
    assert [(b.lo, b.hi) for b in p.bands] == [(lo, hi)]
    assert p.window is None


@pytest.mark.parametrize(
    ("pred", "window"),
    [
        ("a.ts >= b.ts AND a.ts <= b.ts + INTERVAL 3 SECONDS", TimeWindow(-3_000_000, 0)),
        ("b.ts BETWEEN a.ts AND a.ts + INTERVAL '2' MINUTE", TimeWindow(0, 120_000_000)),
        ("b.ts > a.ts", TimeWindow(0, None)),
        ("a.ts = b.ts", TimeWindow(0, 0)),
    ],
)
def test_window_forms(pred: str, window: TimeWindow) -> None:
    assert classify_predicate(pred, "a", "b", "ts", "ts").window == window


def test_or_and_same_side_conjuncts_are_residual() -> None:
    p = classify_predicate("(a.k = b.k OR a.x > b.y) AND a.x = a.k", "a", "b", "ts", "ts")
    assert p.equi == () and p.bands == () and p.window is None
    assert len(p.residual) == 2


def test_strategies_and_retention() -> None:
    job = parse_job(
        STREAMS + "INSERT INTO o SELECT a.k AS k FROM A a JOIN B b ON a.k = b.k "
        "AND b.ts BETWEEN a.ts - INTERVAL '10' SECOND AND a.ts + INTERVAL '5' SECOND;\n"
        "INSERT INTO o SELECT a.k AS k FROM A a JOIN B b ON abs(a.x - b.y) <= 1 "
        "AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND;\n"
        "INSERT INTO o SELECT a.k AS k FROM A a JOIN B b "
        "ON b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND;\n"
        "INSERT INTO o SELECT a.k AS k FROM A a JOIN B b "
        "ON a.x < b.y AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND;\n"
    )
    plan = plan_job(job)
    assert [q.strategy for q in plan.queries] == ["hash", "band", "band", "band"]
    assert plan.queries[2].band is not None and plan.queries[2].band.temporal
    assert plan.queries[0].band is None  # equality keys and no value band: hash keys alone
    # A waits for B rows up to hi = 5 s; B waits for A rows up to -lo = 10 s.
    assert plan.stream("A").retain_us == 5_000_000
    assert plan.stream("B").retain_us == 10_000_000
    assert plan.stream("A").horizon(100_000_000) == 95_000_000
    assert plan.stream("A").horizon(None) is None
    text = plan.explain()
    assert "hash join on the equality keys" in text and "band join by bucket equality" in text


def test_full_history_and_streams_without_watermark_keep_everything() -> None:
    job = parse_job(
        STREAMS + "INSERT INTO o SELECT a.k AS k FROM A a JOIN N n ON a.k = n.k;\n"
        "INSERT INTO o SELECT a.k AS k FROM A a JOIN B b ON a.x + b.y > 3;\n"
    )
    plan = plan_job(job)
    assert plan.queries[1].strategy == "nested-loop"
    assert all(s.retain_us is None for s in plan.streams)
    assert "full history" in plan.explain()


def test_a_between_with_one_constant_end_bounds_the_window_and_stays_evaluated() -> None:
    # Nexmark q9: a bid falls between its auction's start and expiry (a column, not a
    # constant); the start alone bounds the window from below, a second conjunct from above.
    p = classify_predicate(
        "a.id = b.auction AND b.`dateTime` BETWEEN a.`dateTime` AND a.expires"
        " AND b.`dateTime` <= a.`dateTime` + INTERVAL '10' SECOND",
        "a",
        "b",
        "dateTime",
        "dateTime",
    )
    assert p.window == TimeWindow(lo_us=0, hi_us=10_000_000)
    assert p.residual == ("b.`dateTime` BETWEEN a.`dateTime` AND a.expires",)
    alone = classify_predicate("b.t BETWEEN a.t AND a.e", "a", "b", "t", "t")
    assert alone.window == TimeWindow(lo_us=0, hi_us=None)
    assert alone.residual == ("b.t BETWEEN a.t AND a.e",)


def test_an_or_of_equalities_between_the_sides_is_found_in_order() -> None:
    parts = classify_predicate(
        "(a.k = b.k OR b.id = a.id OR (a.s = b.s)) AND a.x < b.x", "a", "b", None, None
    )
    assert [k.describe() for k in parts.ors] == ["a.k = b.k", "a.id = b.id", "a.s = b.s"]
    assert "(a.k = b.k OR b.id = a.id OR (a.s = b.s))" in parts.residual
    for other in ("(a.k = b.k OR a.x < b.x)", "(a.k = b.k OR a.id = 3)", "a.k = b.k AND a.x < 1"):
        assert classify_predicate(other, "a", "b", None, None).ors == ()
