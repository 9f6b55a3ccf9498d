"""The band-bucket SQL covers every matching pair: checked by evaluating the generated SQL with
the reference evaluator (no JVM), for random values and bands."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from streamjoin.plan import Band
from streamjoin.reference import compile_expression
from streamjoin.runtime.batch.joins import Side, bucket_range


def _ev(sql: str, env: Mapping[str, Mapping[str, object]]) -> int:
    value = compile_expression(sql)(env)
    assert isinstance(value, int)
    return value


SIDES: tuple[Side, ...] = ("left", "right")
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(x=finite, lo=st.floats(-100, 100), span=st.floats(1e-3, 100), t=st.floats(0, 1))
def test_numeric_band_buckets_cover_the_band(x: float, lo: float, span: float, t: float) -> None:
    band = Band("a.x", "b.y", lo, lo + span)
    y = x + lo + t * span  # a right value inside the band of x
    if not (y - x >= band.lo and y - x <= band.hi):
        return  # rounding pushed it out of the band: the predicate would reject it too
    env = {"a": {"x": x}, "b": {"y": y}}
    for side in SIDES:  # delta on the left (state right), and the other way round
        low, high, key = bucket_range(band, side)
        assert _ev(low, env) <= _ev(key, env) <= _ev(high, env)
        # At most the band's two buckets, plus those of the rounding margin on both ends
        # (which matters only when the width is tiny next to |x|).
        margin = 1e-9 * (abs(x) + abs(band.lo) + abs(band.hi) + 1.0)
        assert _ev(high, env) - _ev(low, env) <= 3 + 2 * margin / band.width


@given(
    base=st.integers(0, 10**9),
    lo=st.integers(-(10**8), 10**8),
    span=st.integers(0, 10**8),
    t=st.floats(0, 1),
    split=st.sampled_from([1, 4]),
)
def test_temporal_band_buckets_cover_the_window(
    base: int, lo: int, span: int, t: float, split: int
) -> None:
    band = Band(
        "unix_micros(a.ts)",
        "unix_micros(b.ts)",
        float(lo),
        float(lo + span),
        temporal=True,
        split=split,
    )
    a_ts = datetime(2020, 1, 1) + timedelta(microseconds=base)
    b_ts = a_ts + timedelta(microseconds=lo + math.floor(t * span))
    env = {"a": {"ts": a_ts}, "b": {"ts": b_ts}}
    for side in SIDES:
        low, high, key = bucket_range(band, side)
        assert _ev(low, env) <= _ev(key, env) <= _ev(high, env)
        if span > 0:  # (a window cut in `split` buckets reaches at most `split` + 1 of them)
            assert _ev(high, env) - _ev(low, env) <= split
