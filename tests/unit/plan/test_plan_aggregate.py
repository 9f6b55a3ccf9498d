"""How a GROUP BY window query runs (`plan.aggregate`): its buffer, its lag, its groups' SQL."""

from __future__ import annotations

import pytest

from streamjoin.errors import UnsupportedError
from streamjoin.plan import JobPlan, plan_job
from streamjoin.sql import parse_job

STREAMS = """\
CREATE STREAM A (id BIGINT, k BIGINT, x DOUBLE, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'json', path = '/a');
CREATE STREAM B (id BIGINT, k BIGINT, x DOUBLE, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'json', path = '/b');
CREATE STREAM C (id BIGINT, k BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'json', path = '/c');
CREATE SINK s WITH (format = 'json', path = '/s');
"""
WINDOW = "b.ts BETWEEN a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL '2' SECOND"


def _plan(select: str, join: str, group: str) -> JobPlan:
    return plan_job(parse_job(f"{STREAMS}INSERT INTO s SELECT {select}\n{join}\n{group};"))


def test_the_join_selects_what_the_groups_read_and_the_lag_follows_the_window() -> None:
    plan = _plan(
        "window.start AS ws, a.k AS k, sum(b.x) AS sx",
        f"FROM A a JOIN B b ON a.k = b.k AND {WINDOW}",
        "GROUP BY window(b.ts, '10 seconds'), a.k",
    )
    (agg,) = plan.aggregates
    assert agg.columns == (("b.ts", "_g0"), ("a.k", "_g1"), ("b.x", "_g2"))
    # b.ts - a.ts in [-5 s, 2 s]: a result still to come, whose last row is at W or later,
    # has b.ts >= W - 5 s.
    assert agg.lag_us == 5_000_000
    assert agg.closed_below(100_000_000) == 95_000_000
    joined = plan.job.queries[0]
    assert [s.alias for s in joined.select] == ["_g0", "_g1", "_g2"]
    assert not plan.shared
    # Windowed by a.ts instead: a's rows trail b's by at most 2 s.
    plan = _plan(
        "count(*) AS n",
        f"FROM A a JOIN B b ON a.k = b.k AND {WINDOW}",
        "GROUP BY window(a.ts, '1 minute')",
    )
    assert plan.aggregates[0].lag_us == 2_000_000


def test_a_multiway_join_lags_by_its_longest_path() -> None:
    plan = _plan(
        "count(*) AS n",
        f"FROM A a JOIN B b ON a.k = b.k AND {WINDOW} JOIN C c ON c.k = b.k "
        "AND c.ts BETWEEN b.ts - INTERVAL '3' SECOND AND b.ts",
        "GROUP BY window(a.ts, '10 seconds')",
    )
    # a.ts >= b.ts - 2 s >= c.ts - 2 s (c.ts <= b.ts); a.ts >= W - 2 s.
    assert plan.aggregates[0].lag_us == 2_000_000
    plan = _plan(
        "count(*) AS n",
        f"FROM A a JOIN B b ON a.k = b.k AND {WINDOW} JOIN C c ON c.k = b.k "
        "AND c.ts BETWEEN b.ts - INTERVAL '3' SECOND AND b.ts",
        "GROUP BY window(c.ts, '10 seconds')",
    )
    # c.ts >= b.ts - 3 s >= a.ts - 8 s.
    assert plan.aggregates[0].lag_us == 8_000_000


def test_a_full_history_join_never_closes_a_window() -> None:
    with pytest.raises(UnsupportedError, match="would never close a window"):
        _plan(
            "count(*) AS n", "FROM A a JOIN B b ON a.k = b.k", "GROUP BY window(b.ts, '1 second')"
        )


def test_the_groups_of_the_windows_ending_in_a_range() -> None:
    plan = _plan(
        "window.end AS we, count(DISTINCT b.id) AS d",
        f"FROM A a JOIN B b ON a.k = b.k AND {WINDOW}",
        "GROUP BY window(b.ts, '10 seconds', '5 seconds') HAVING count(*) > 1",
    )
    sql = plan.aggregates[0].group_sql("buf", 20_000_000, 30_000_000)
    assert (
        "FROM buf WHERE _g0 >= timestamp_micros(10000001) AND _g0 < timestamp_micros(30000000)"
        in sql
    )
    assert "GROUP BY window(_g0, '10000000 microseconds', '5000000 microseconds')" in sql
    assert "HAVING COUNT(*) > 1" in sql
    assert "COUNT(DISTINCT _g1) AS `d`" in sql
    assert sql.endswith(
        "WHERE unix_micros(_sj_window_end) > 20000000 AND unix_micros(_sj_window_end) <= 30000000"
    )
    held = plan.aggregates[0].held_sql("buf")
    assert "FROM buf WHERE _g0 >= timestamp_micros(10000001)" not in held
    assert "GROUP BY window(_g0, '10000000 microseconds', '5000000 microseconds')" in held
    assert held.endswith(
        "WHERE unix_micros(_sj_window_end) > _sj_after AND unix_micros(_sj_window_end) <= _sj_upto"
    )
