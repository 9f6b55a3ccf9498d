"""A key that hovers at the level that moves a query off hash: each return to hash waits for
twice the even checks of the last (`adapt.hashskew.even_checks_needed`), and a query that
stays calm on hash forgets its returns."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamjoin.adapt.hashskew import EVEN_CHECKS, MAX_EVEN_CHECKS, even_checks_needed
from streamjoin.adapt.schemes import next_scheme
from streamjoin.adapt.schemestate import (
    COUNTERS,
    BatchCounts,
    SchemeState,
    UnitStats,
    initial_params,
)
from streamjoin.plan import QueryPlan, plan_job
from streamjoin.sql import parse_job

JOB = (
    "".join(
        f"CREATE STREAM {s} (id BIGINT, k BIGINT, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) "
        f"WITH (format = 'json', path = '/in/{s}');"
        for s in "ab"
    )
    + "CREATE SINK o WITH (format = 'json', path = '/out');"
    + "INSERT INTO o SELECT a.id AS i FROM a JOIN b ON a.k = b.k AND "
    + "b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND"
    + " WITH (units = 8, time_buckets = 'false');"
)
EVEN = (3_000,) * 8
"""24,000 rows over 8 hash units, none standing out."""
HOT = tuple(1_200 + (14_400 if u == 3 else 0) for u in range(8))
"""24,000 rows, 60 % of them one key's."""


def _query() -> QueryPlan:
    return plan_job(parse_job(JOB)).queries[0]


def _check(state: SchemeState, batch: int, hot: bool) -> BatchCounts:
    """A skew check's counts: over the hash units on hash; over the scheme's places (even)
    and the key's hash units once moved."""
    keys = HOT if hot else EVEN
    if state.params.get("moved"):
        units = UnitStats(EVEN, (0,) * 8)
        return BatchCounts(batch, 12_000, 12_000, units, (), (12_000, 12_000), key_units=keys)
    return BatchCounts(batch, 12_000, 12_000, UnitStats(keys, (0,) * 8), (), (12_000, 12_000))


def _run(qp: QueryPlan, pattern: list[bool]) -> tuple[SchemeState, list[int]]:
    """The checks of `pattern` (hot or even, one a batch); the batches whose check changed
    where the query's rows go."""
    state = SchemeState({**initial_params(qp, 8), "units": 8})
    changes = []
    for batch, hot in enumerate(pattern):
        before = {k: v for k, v in state.params.items() if k not in COUNTERS}
        state = next_scheme(qp, state, _check(state, batch, hot))
        if {k: v for k, v in state.params.items() if k not in COUNTERS} != before:
            changes.append(batch)
    return state, changes


def test_a_key_hot_every_third_check_moves_the_query_back_once_then_keeps_it_moved() -> None:
    """Hot, even, even, hot, …: without damping each hot check would leave hash and each
    pair of even ones return (20 changes over 30 checks)."""
    qp = _query()
    state, changes = _run(qp, [i % 3 == 0 for i in range(30)])
    assert changes == [0, 2, 3], changes
    assert state.params.get("moved")


def test_each_return_waits_twice_the_even_checks_of_the_last() -> None:
    qp = _query()
    pattern = [True] + [False] * EVEN_CHECKS + [True] + [False] * (2 * EVEN_CHECKS)
    pattern += [True] + [False] * (4 * EVEN_CHECKS)
    state, changes = _run(qp, pattern)
    first = EVEN_CHECKS  # the even checks that count are those from batch 1
    second = first + 1 + 2 * EVEN_CHECKS
    third = second + 1 + 4 * EVEN_CHECKS
    assert changes == [0, first, first + 1, second, second + 1, third], changes
    assert state.params["returns"] == 3
    assert not state.params.get("moved")


def test_a_query_calm_on_hash_forgets_its_returns() -> None:
    """Back once (a second return would wait `2 * EVEN_CHECKS`), then calm on hash for that
    many checks: the next hot key's return waits `EVEN_CHECKS` again."""
    qp = _query()
    calm = even_checks_needed(1)
    pattern = [True] + [False] * EVEN_CHECKS + [False] * calm
    pattern += [True] + [False] * EVEN_CHECKS
    state, changes = _run(qp, pattern)
    again = EVEN_CHECKS + calm + 1
    assert changes == [0, EVEN_CHECKS, again, again + EVEN_CHECKS], changes
    assert state.params == {"name": "hash", "units": 8, "returns": 1}


def test_a_hot_key_that_small_batches_keep_on_hash_is_not_calm() -> None:
    """One task probes each small batch: hash stays for a hot key, whose checks must not
    count towards forgetting the query's returns."""
    qp = _query()
    state = SchemeState({"name": "hash", "units": 8, "returns": 1})
    for batch in range(3 * even_checks_needed(1)):
        units = UnitStats(HOT, (0,) * 8)
        seen = BatchCounts(batch, 12_000, 12_000, units, (), (12_000, 12_000), one_task=True)
        state = next_scheme(qp, state, seen)
    assert state.params == {"name": "hash", "units": 8, "returns": 1}


@given(st.integers(0, 100))
def test_the_even_checks_a_return_waits_for_are_bounded(returns: int) -> None:
    needed = even_checks_needed(returns)
    assert EVEN_CHECKS <= needed <= MAX_EVEN_CHECKS
    assert needed >= min(MAX_EVEN_CHECKS, EVEN_CHECKS * 2 ** min(returns, 10))
