"""When `auto` keys an equi join by the window's time bucket too: the router's decision after a
batch, from the rows each hash unit received (no JVM: the router only writes SQL text)."""

from __future__ import annotations

import pytest

from streamjoin.plan import plan_job
from streamjoin.runtime.routing.router import QueryRouter, UnitStats
from streamjoin.sql import parse_job

STREAMS = "".join(
    f"CREATE STREAM {s} (id BIGINT, k BIGINT, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) "
    f"WITH (format = 'json', path = '/in/{s}');"
    for s in "ab"
)


def _router(with_: str = "units = 8") -> QueryRouter:
    text = (
        STREAMS
        + "CREATE SINK o WITH (format = 'json', path = '/out');"
        + "INSERT INTO o SELECT a.id AS i FROM a JOIN b ON a.k = b.k AND "
        + "b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND"
        + f" WITH ({with_});"
    )
    job = plan_job(parse_job(text))
    qp = job.queries[0]
    return QueryRouter.restore(qp, job.job.stream("a"), job.job.stream("b"), None, 8)


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
    note = router.after_batch(0, 12_000, 12_000, _units(hot), state_rows=(12_000, 12_000))
    assert bool(router.params.get("time_bucket")) is bucketed
    assert router.scheme is None  # still the engine's own path: a broadcast of the delta
    assert ("keyed by event-time bucket" in note) is bucketed


def test_a_key_hot_within_its_buckets_moves_on_to_a_content_insensitive_scheme() -> None:
    router = _router()
    router.after_batch(0, 12_000, 12_000, _units(0.6), state_rows=(12_000, 12_000))
    assert router.params.get("time_bucket") and router.scheme is None
    router.after_batch(1, 12_000, 12_000, _units(0.6), state_rows=(12_000, 12_000))
    assert router.scheme is not None and router.params.get("time_bucket")


def test_time_buckets_false_keeps_plain_keys_and_leaves_hashing_as_before() -> None:
    router = _router("units = 8, time_buckets = 'false'")
    router.after_batch(0, 12_000, 12_000, _units(0.6), state_rows=(12_000, 12_000))
    assert not router.params.get("time_bucket") and router.scheme is not None
