"""Outer joins: what the parser keeps, when a row without a partner is decided, what is
refused (`plan.outer`)."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError, UnsupportedError
from streamjoin.model import OuterJoin
from streamjoin.plan import JobPlan, plan_job
from streamjoin.sql import parse_job
from tests.reference_cases import STREAMS

WINDOW = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '5' SECOND"


def _plan(sql: str) -> JobPlan:
    return plan_job(parse_job(f"{STREAMS}{sql};"))


@pytest.mark.parametrize("kind", ["LEFT", "RIGHT OUTER", "FULL"])
def test_the_on_condition_decides_matching_and_where_filters_after(kind: str) -> None:
    plan = _plan(
        f"INSERT INTO s SELECT a.id AS i, b.id AS j FROM A a {kind} JOIN B b "
        f"ON abs(a.x - b.x) < 1 AND {WINDOW} WHERE a.k > 0"
    )
    q = plan.job.queries[0]
    assert q.outer == OuterJoin(
        kind.split()[0].lower(),  # type: ignore[arg-type]
        f"ABS(a.x - b.x) < 1 AND {WINDOW}",
        "a.k > 0",
    )
    assert q.predicate.endswith("AND a.k > 0")
    (op,) = plan.outers
    assert (op.lag(0), op.lag(1), op.width) == (5_000_000, 3_000_000, 8_000_000)
    assert op.dead_below(0, 100_000_000) == 95_000_000
    assert not plan.shared


def test_the_other_side_is_kept_a_window_longer() -> None:
    inner = _plan(f"INSERT INTO s SELECT a.id AS i FROM A a JOIN B b ON a.k = b.k AND {WINDOW}")
    left = _plan(f"INSERT INTO s SELECT a.id AS i FROM A a LEFT JOIN B b ON a.k = b.k AND {WINDOW}")
    right = _plan(
        f"INSERT INTO s SELECT a.id AS i FROM A a RIGHT JOIN B b ON a.k = b.k AND {WINDOW}"
    )
    keep = {
        p: {sp.name: sp.retain_us for sp in plan.streams}
        for p, plan in (("inner", inner), ("left", left), ("right", right))
    }
    # Inner: a while a.ts >= W - 5 s, b while b.ts >= W - 3 s. A left row is decided at
    # W - 5 s against b rows down to 3 s before it: b is kept 8 s.
    assert keep["inner"] == {"A": 5_000_000, "B": 3_000_000}
    assert keep["left"] == {"A": 5_000_000, "B": 8_000_000}
    assert keep["right"] == {"A": 8_000_000, "B": 3_000_000}


def test_refused_outer_joins() -> None:
    with pytest.raises(UnsupportedError, match="a full-history outer join could never emit"):
        _plan("INSERT INTO s SELECT a.id AS i FROM A a LEFT JOIN B b ON a.k = b.k")
    with pytest.raises(UnsupportedError, match="bounded on both sides"):
        _plan("INSERT INTO s SELECT a.id AS i FROM A a LEFT JOIN B b ON a.k = b.k AND b.ts >= a.ts")
    with pytest.raises(UnsupportedError, match="window by a preserved side's event time"):
        _plan(
            f"INSERT INTO s SELECT count(*) AS n FROM A a LEFT JOIN B b ON a.k = b.k AND {WINDOW} "
            "GROUP BY window(b.ts, '10 seconds')"
        )


def test_a_grouped_outer_join_waits_for_its_rows_without_a_partner() -> None:
    plan = _plan(
        "INSERT INTO s SELECT count(*) AS n FROM A a LEFT JOIN B b ON a.k = b.k AND "
        "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '5' SECOND "
        "WHERE b.ts <= a.ts + INTERVAL '1' SECOND GROUP BY window(a.ts, '10 seconds')"
    )
    # Pairs have a.ts >= b.ts - 1 s; a left row without a partner waits 5 s.
    assert plan.aggregates[0].lag_us == 5_000_000


def test_rows_without_keys_look_for_partners_by_a_band() -> None:
    def band(on: str) -> object:
        (op,) = _plan(
            f"INSERT INTO s SELECT a.id AS i FROM A a LEFT JOIN B b ON {on} AND {WINDOW}"
        ).outers
        return None if op.band is None else (op.band.left_sql, op.band.temporal)

    assert band("a.k = b.k AND abs(a.x - b.x) < 1") is None  # (hashed on the key)
    assert band("abs(a.x - b.x) <= 1") == ("a.x", False)
    assert band("a.x < b.x") == ("unix_micros(a.ts)", True)


def test_a_ttl_gives_a_full_history_outer_join_its_window() -> None:
    join = "INSERT INTO s SELECT a.id AS i, b.id AS j FROM A a LEFT JOIN B b ON a.k = b.k"
    with pytest.raises(UnsupportedError, match=r"unless WITH \(ttl = '1 hour'\)"):
        _plan(join)
    plan = _plan(join + " WITH (ttl = '1 minute')")
    window = "b.ts BETWEEN a.ts - INTERVAL '60' SECOND AND a.ts + INTERVAL '60' SECOND"
    q = plan.job.queries[0]
    assert q.outer is not None and q.outer.on == f"a.k = b.k AND {window}"
    assert q.predicate == f"a.k = b.k AND {window}"
    (op,) = plan.outers
    assert (op.lag(0), op.lag(1)) == (60_000_000, 60_000_000)
    with pytest.raises(JobError, match="ttl is a duration of whole seconds"):
        _plan(join + " WITH (ttl = '1500 milliseconds')")
