"""When `auto` keys an equi join by the window's time bucket too, or moves it to a scheme, and
when it takes hash again: the policy's decision after a batch, from the rows each hash unit
received (`adapt.schemes.next_scheme`)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.adapt.hashskew import EVEN_CHECKS, bucket_gain
from streamjoin.adapt.schemes import next_scheme
from streamjoin.adapt.schemestate import (
    BatchCounts,
    SchemeState,
    UnitStats,
    describe,
    initial_params,
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


class _Router:
    """A query's scheme state, fed one batch at a time as the runtime's router feeds it."""

    def __init__(self, qp: QueryPlan) -> None:
        self.qp = qp
        self.state = SchemeState({**initial_params(qp, 8), "units": 8})

    @property
    def params(self) -> dict[str, object]:
        return self.state.params

    @property
    def scheme(self) -> object:
        return scheme_from_params(self.state.params)

    def after_batch(self, batch: int, units: UnitStats) -> str:
        seen = BatchCounts(batch, 12_000, 12_000, units, (), (12_000, 12_000))
        self.state = next_scheme(self.qp, self.state, seen)
        return describe(self.qp, self.state.params)


def _router(with_: str = "units = 8") -> _Router:
    text = (
        STREAMS
        + "CREATE SINK o WITH (format = 'json', path = '/out');"
        + "INSERT INTO o SELECT a.id AS i FROM a JOIN b ON a.k = b.k AND "
        + "b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND"
        + f" WITH ({with_});"
    )
    job = plan_job(parse_job(text))
    qp = job.queries[0]
    return _Router(qp)


def _units(hot_share: float, rows: int = 24_000) -> UnitStats:
    """Rows per unit when one key has `hot_share` of them and the rest spread evenly."""
    rest = rows * (1 - hot_share) / 8
    return UnitStats(
        tuple(int(rest + (rows * hot_share if i == 3 else 0)) for i in range(8)), (0,) * 8
    )


@pytest.mark.parametrize(("hot", "bucketed"), [(0.0, False), (0.004, False), (0.1, True)])
def test_time_buckets_join_the_key_once_the_hot_key_has_many_candidates(
    hot: float, bucketed: bool
) -> None:
    router = _router()
    note = router.after_batch(0, _units(hot))
    assert bool(router.params.get("time_bucket")) is bucketed
    assert router.scheme is None  # still the engine's own path: a broadcast of the delta
    assert ("keyed by event-time bucket" in note) is bucketed


def test_a_key_hot_within_its_buckets_moves_on_to_a_content_insensitive_scheme() -> None:
    router = _router()
    router.after_batch(0, _units(0.6))
    assert router.params.get("time_bucket") and router.scheme is None
    router.after_batch(1, _units(0.6))
    assert router.scheme is not None and router.params.get("time_bucket")


def test_a_batch_probed_in_one_task_keeps_hash_and_may_still_take_time_buckets() -> None:
    """One task probed every partition's rows: a scheme's placement would spread no work, only
    copy rows, so hash stays; time buckets still spare a hot key's rows their candidates."""
    router = _router()
    one = BatchCounts(0, 12_000, 12_000, _units(0.6), (), (12_000, 12_000), one_task=True)
    router.state = next_scheme(router.qp, router.state, one)
    assert router.params.get("time_bucket") and router.scheme is None
    for batch in (1, 2):
        router.state = next_scheme(router.qp, router.state, replace(one, batch=batch))
        assert router.scheme is None
    plain = _router("units = 8, time_buckets = 'false'")
    plain.state = next_scheme(plain.qp, plain.state, one)
    assert plain.scheme is None and not plain.params.get("time_bucket")


def test_time_buckets_false_keeps_plain_keys_and_leaves_hashing_as_before() -> None:
    router = _router("units = 8, time_buckets = 'false'")
    router.after_batch(0, _units(0.6))
    assert not router.params.get("time_bucket") and router.scheme is not None


def test_the_chance_spread_of_a_small_batch_over_two_units_is_no_hot_key() -> None:
    """A live stream's batch of 2,500 evenly hashed rows on 2 units, against a state 60 times
    larger: one unit gets 2 % more by chance, which is no reason to leave hash (the scheme
    would shuffle the whole state every batch)."""
    qp = _router("units = 2").qp
    state = SchemeState({**initial_params(qp, 2), "units": 2})
    seen = BatchCounts(7, 1_250, 1_250, UnitStats((1_275, 1_225), (0, 0)), (), (75_000, 75_000))
    assert next_scheme(qp, state, seen) == state
    hot = BatchCounts(7, 1_250, 1_250, UnitStats((1_500, 1_000), (0, 0)), (), (75_000, 75_000))
    assert next_scheme(qp, state, hot) != state


def _soak_batch(span_s: float) -> BatchCounts:
    """A live stream's batch of about 106,000 rows on 2 units against 876,000 stored ones, one
    unit 1.3 % over even (a 4-sigma chance a long run meets): a hot key of 1 %."""
    span = round(span_s * 1e6)
    return BatchCounts(
        210,
        53_100,
        53_145,
        UnitStats((52_442, 53_803), (0, 0)),
        (),
        (420_191, 455_654),
        (span, span),
    )


@pytest.mark.parametrize(("span_s", "bucketed"), [(3.5, False), (4.5, True), (60.0, True)])
def test_time_buckets_only_where_the_state_spans_more_than_two_buckets(
    span_s: float, bucketed: bool
) -> None:
    """A window of ±1 s has buckets of 2 s and a delta row meets two of them: a state that
    spans 4 s or less of event time (the window and the watermark's delay) would be met whole
    anyway, and the bucket only doubles the probe; a key that hot then leaves for the scheme
    the cost formulas rank first, one that no key's rows can overload. Beyond 4 s the bucket
    spares the hot key's rows of the other buckets."""
    qp = _router("units = 2").qp
    state = SchemeState({**initial_params(qp, 2), "units": 2})
    hot = BatchCounts(7, 12_000, 12_000, UnitStats((16_000, 8_000), (0, 0)), (), (75_000, 75_000))
    span = round(span_s * 1e6)
    after = next_scheme(qp, state, replace(hot, state_span_us=(span, span)))
    assert bool(after.params.get("time_bucket")) is bucketed
    assert (after.params["name"] == "hash") is bucketed, after.params


def test_each_sides_share_spared_weighs_by_its_stored_rows() -> None:
    """A left delta row meets the right side's stored rows and the other way round: a side
    that stores nothing has no say in what the buckets spare."""
    qp = _router().qp  # (buckets of 2 s)
    assert bucket_gain(qp, (40_000_000, 4_000_000), (1_000, 0)) == pytest.approx(0.9)
    assert bucket_gain(qp, (40_000_000, 4_000_000), (0, 1_000)) == 0.0
    assert bucket_gain(qp, (40_000_000, 4_000_000), (1_000, 1_000)) == pytest.approx(0.45)
    assert bucket_gain(qp, (None, 4_000_000), (0, 0)) == pytest.approx(0.5)


def test_a_long_run_chance_spread_keeps_a_short_window_on_plain_hashing() -> None:
    """The soak's batch 210: a 10 s window (buckets of 20 s) whose state spans 13 s of event
    time; the bucket spares nothing there, so the 1 % "hot key" leaves the scheme as it is."""
    text = (
        STREAMS
        + "CREATE SINK o WITH (format = 'json', path = '/out');"
        + "INSERT INTO o SELECT a.id AS i FROM a JOIN b ON a.k = b.k AND "
        + "b.ts BETWEEN a.ts - INTERVAL '10' SECOND AND a.ts + INTERVAL '10' SECOND;"
    )
    qp = plan_job(parse_job(text)).queries[0]
    state = SchemeState({**initial_params(qp, 2), "units": 2})
    assert next_scheme(qp, state, _soak_batch(13.0)) == state
    assert next_scheme(qp, state, _soak_batch(600.0)).params.get("time_bucket")


# A query the skew check moved off hash returns to it once its keys are even again.

EVEN = (3_000,) * 8
"""24,000 rows over 8 hash units, none standing out."""
HOT = tuple(1_200 + (14_400 if u == 3 else 0) for u in range(8))
"""24,000 rows, 60 % of them one key's."""


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
    qp = _router("units = 8, time_buckets = 'false'").qp
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
    assert state.params == {"name": "hash", "units": 8, "returns": 1}
    assert state.history[-1]["batch"] == 2 * EVEN_CHECKS + 1
    assert state.history[-1]["scheme"] == "hash on 8 units"


def test_time_buckets_taken_for_a_hot_key_go_too_unless_the_query_asks_for_them() -> None:
    qp = _router("units = 8").qp
    state = _moved(qp)
    assert state.params.get("time_bucket") and scheme_from_params(state.params) is None
    for batch in range(1, EVEN_CHECKS + 1):
        state = next_scheme(qp, state, _seen(batch, EVEN))
    assert state.params == {"name": "hash", "units": 8, "returns": 1}
    asked = _router("units = 8, time_buckets = 'true', partitioning = 'auto'").qp
    state = _moved(asked)
    for batch in range(1, EVEN_CHECKS + 1):
        state = next_scheme(asked, state, _seen(batch, EVEN))
    assert state.params == {"name": "hash", "time_bucket": True, "units": 8, "returns": 1}


def test_a_scheme_the_user_chose_stays_however_even_the_keys() -> None:
    qp = _router("units = 8, time_buckets = 'false'").qp
    state = SchemeState({"name": "matrix", "n": 2, "m": 4, "units": 8})
    for batch in range(1, 3 * EVEN_CHECKS):
        state = next_scheme(qp, state, _seen(batch, EVEN))
        assert state.params["name"] == "matrix"


@given(st.lists(st.integers(0, 40), min_size=8, max_size=8))
def test_a_check_too_small_to_tell_changes_nothing(loads: list[int]) -> None:
    """Fewer rows than the controllers' warm-up: the scheme and its count of even checks
    stay as they were."""
    qp = _router("units = 8, time_buckets = 'false'").qp
    state = _moved(qp)
    assert next_scheme(qp, state, _seen(1, tuple(loads))).params == state.params
