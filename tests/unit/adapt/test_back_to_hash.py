"""A query the skew check moved off hash returns to it once its keys are even again
(`adapt.schemes.next_scheme` with the batch's rows per key hash unit)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamjoin.adapt.schemes import (
    EVEN_CHECKS,
    BatchCounts,
    SchemeState,
    UnitStats,
    initial_params,
    next_scheme,
    scheme_from_params,
)
from streamjoin.plan import QueryPlan, plan_job
from streamjoin.sql import parse_job

STREAMS = "".join(
    f"CREATE STREAM {s} (id BIGINT, k BIGINT, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) "
    f"WITH (format = 'json', path = '/in/{s}');"
    for s in "ab"
)
EVEN = (3_000,) * 8
"""24,000 rows over 8 hash units, none standing out."""
HOT = tuple(1_200 + (14_400 if u == 3 else 0) for u in range(8))
"""24,000 rows, 60 % of them one key's."""


def _query(with_: str) -> QueryPlan:
    text = (
        STREAMS
        + "CREATE SINK o WITH (format = 'json', path = '/out');"
        + "INSERT INTO o SELECT a.id AS i FROM a JOIN b ON a.k = b.k AND "
        + "b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND"
        + f" WITH ({with_});"
    )
    return plan_job(parse_job(text)).queries[0]


def _seen(batch: int, keys: tuple[int, ...] | None) -> BatchCounts:
    """A batch's counts: even over the scheme's places, `keys` over the hash units."""
    return BatchCounts(
        batch, 12_000, 12_000, UnitStats(EVEN, (0,) * 8), (), (12_000, 12_000), key_units=keys
    )


def _moved(qp: QueryPlan) -> SchemeState:
    """`qp` after a hot batch on hash: under the scheme the skew check chose."""
    state = SchemeState({**initial_params(qp, 8), "units": 8})
    hot = BatchCounts(0, 12_000, 12_000, UnitStats(HOT, (0,) * 8), (), (12_000, 12_000))
    state = next_scheme(qp, state, hot)
    assert state.params.get("moved")
    return state


def test_a_moved_query_returns_to_hash_after_even_checks_in_a_row() -> None:
    qp = _query("units = 8, time_buckets = 'false'")
    state = _moved(qp)
    assert scheme_from_params(state.params) is not None
    for batch in range(1, EVEN_CHECKS):
        state = next_scheme(qp, state, _seen(batch, EVEN))
        assert scheme_from_params(state.params) is not None
    # (A hot check between even ones starts the count again.)
    state = next_scheme(qp, state, _seen(EVEN_CHECKS, HOT))
    for batch in range(EVEN_CHECKS + 1, 2 * EVEN_CHECKS):
        state = next_scheme(qp, state, _seen(batch, EVEN))
        assert scheme_from_params(state.params) is not None
    # (A batch without a check of its keys tells nothing.)
    assert next_scheme(qp, state, _seen(2 * EVEN_CHECKS, None)).params == state.params
    state = next_scheme(qp, state, _seen(2 * EVEN_CHECKS, EVEN))
    assert state.params == {"name": "hash", "units": 8}
    assert state.history[-1]["batch"] == 2 * EVEN_CHECKS + 1
    assert state.history[-1]["scheme"] == "hash on 8 units"


def test_time_buckets_taken_for_a_hot_key_go_too_unless_the_query_asks_for_them() -> None:
    qp = _query("units = 8")
    state = _moved(qp)
    assert state.params.get("time_bucket") and scheme_from_params(state.params) is None
    for batch in range(1, EVEN_CHECKS + 1):
        state = next_scheme(qp, state, _seen(batch, EVEN))
    assert state.params == {"name": "hash", "units": 8}
    asked = _query("units = 8, time_buckets = 'true', partitioning = 'auto'")
    state = _moved(asked)
    for batch in range(1, EVEN_CHECKS + 1):
        state = next_scheme(asked, state, _seen(batch, EVEN))
    assert state.params == {"name": "hash", "time_bucket": True, "units": 8}


def test_a_scheme_the_user_chose_stays_however_even_the_keys() -> None:
    qp = _query("units = 8, time_buckets = 'false'")
    state = SchemeState({"name": "matrix", "n": 2, "m": 4, "units": 8})
    for batch in range(1, 3 * EVEN_CHECKS):
        state = next_scheme(qp, state, _seen(batch, EVEN))
        assert state.params["name"] == "matrix"


@given(st.lists(st.integers(0, 40), min_size=8, max_size=8))
def test_a_check_too_small_to_tell_changes_nothing(loads: list[int]) -> None:
    """Fewer rows than the controllers' warm-up: the scheme and its count of even checks
    stay as they were."""
    qp = _query("units = 8, time_buckets = 'false'")
    state = _moved(qp)
    assert next_scheme(qp, state, _seen(1, tuple(loads))).params == state.params
