"""Partitioning schemes: the exactly-once contract, balance and validation, checked by evaluating
the generated SQL with the reference evaluator (no JVM)."""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.partition import (
    BicliqueScheme,
    ContRandScheme,
    HashScheme,
    MatrixScheme,
    Places,
    RangeScheme,
    RowSql,
    Scheme,
    Side,
    Stats,
    estimate,
    range_bounds,
    range_index_sql,
    range_of,
)
from streamjoin.reference import compile_expression

Row = Mapping[str, object]
ALIAS: dict[Side, str] = {"left": "a", "right": "b"}
ROW: dict[Side, RowSql] = {
    side: RowSql(tag=f"{a}.tag", key=f"{a}.k", value=f"{a}.v") for side, a in ALIAS.items()
}
TAGS = st.integers(0, 2**63 - 1)
POW2 = st.sampled_from([1, 2, 4, 8, 16])
_compile = functools.lru_cache(maxsize=4096)(compile_expression)


class Placer:
    """A scheme's store/probe SQL, compiled once, evaluated on Python rows."""

    def __init__(self, scheme: Scheme) -> None:
        self.scheme = scheme
        self._compiled: dict[tuple[Side, str], tuple[Callable[..., object], ...]] = {}
        for side in ALIAS:
            for role in ("store", "probe"):
                p: Places = getattr(scheme, role)(side, ROW[side])
                assert isinstance(p.step, int)
                assert p.step >= 1
                self._compiled[side, role] = (
                    _compile(p.start),
                    _compile(p.stop),
                    lambda env, step=p.step: step,
                )

    def places(self, side: Side, role: str, row: Row) -> list[int]:
        env = {ALIAS[side]: row}
        start_f, stop_f, step_f = self._compiled[side, role]
        start, stop, step = start_f(env), stop_f(env), step_f(env)
        assert isinstance(start, int)
        assert isinstance(stop, int)
        assert isinstance(step, int)
        assert 0 <= start <= stop < self.scheme.places(), (start, stop)
        return list(range(start, stop + 1, step))

    def check_pair(self, left: Row, right: Row) -> None:
        """The exactly-once contract for one joinable pair, in both delta directions."""
        probe_l = set(self.places("left", "probe", left))
        store_r = set(self.places("right", "store", right))
        store_l = set(self.places("left", "store", left))
        probe_r = set(self.places("right", "probe", right))
        assert len(probe_l & store_r) == 1, (self.scheme, left, right)
        assert len(store_l & probe_r) == 1, (self.scheme, left, right)


def _row(tag: int, key: int = 0, value: float = 0.0) -> dict[str, object]:
    return {"tag": tag, "k": key, "v": value}


# --------------------------------------------------------------------------- exactly once


@settings(max_examples=40)
@given(
    n=POW2,
    m=POW2,
    pairs=st.lists(st.tuples(TAGS, TAGS), min_size=1, max_size=20),
)
def test_matrix_meets_every_pair_exactly_once(n: int, m: int, pairs: list[tuple[int, int]]) -> None:
    placer = Placer(MatrixScheme(n, m))
    for lt, rt in pairs:
        placer.check_pair(_row(lt), _row(rt))
        assert len(placer.places("left", "store", _row(lt))) == m  # R replicated m times
        assert len(placer.places("right", "store", _row(rt))) == n  # S replicated n times


@settings(max_examples=40)
@given(
    left=st.integers(1, 12),
    right=st.integers(1, 12),
    pairs=st.lists(st.tuples(TAGS, TAGS), min_size=1, max_size=20),
)
def test_biclique_meets_every_pair_exactly_once(
    left: int, right: int, pairs: list[tuple[int, int]]
) -> None:
    placer = Placer(BicliqueScheme(left, right))
    for lt, rt in pairs:
        placer.check_pair(_row(lt), _row(rt))
        assert placer.places("left", "store", _row(lt))[0] < left  # a left unit
        assert placer.places("right", "store", _row(rt))[0] >= left  # a right unit
        assert len(placer.places("left", "probe", _row(lt))) == right


@settings(max_examples=40)
@given(units=st.integers(1, 20), pairs=st.lists(st.tuples(TAGS, TAGS, TAGS), max_size=20))
def test_hash_meets_equal_keys_exactly_once(units: int, pairs: list[tuple[int, int, int]]) -> None:
    placer = Placer(HashScheme(units))
    for lt, rt, key in pairs:
        placer.check_pair(_row(lt, key), _row(rt, key))


@st.composite
def contrands(draw: st.DrawFn) -> ContRandScheme:
    left, right = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    return ContRandScheme(left, right, draw(st.integers(1, left)), draw(st.integers(1, right)))


@settings(max_examples=30)
@given(scheme=contrands(), pairs=st.lists(st.tuples(TAGS, TAGS, TAGS), min_size=1, max_size=20))
def test_contrand_meets_equal_keys_exactly_once(
    scheme: ContRandScheme, pairs: list[tuple[int, int, int]]
) -> None:
    placer = Placer(scheme)
    for lt, rt, key in pairs:
        left, right = _row(lt, key), _row(rt, key)
        placer.check_pair(left, right)
        # Stored on its own side, probing the other side.
        assert placer.places("left", "store", left)[0] < scheme.left_units
        assert min(placer.places("left", "probe", left)) >= scheme.left_units
        assert placer.places("right", "store", right)[0] >= scheme.left_units
        assert max(placer.places("right", "probe", right)) < scheme.left_units


@given(key=TAGS, tags=st.lists(TAGS, min_size=1, max_size=10))
def test_contrand_extremes_are_pure_hash_and_pure_random(key: int, tags: list[int]) -> None:
    hashed, rand = Placer(ContRandScheme(5, 3, 5, 3)), Placer(ContRandScheme(5, 3, 1, 1))
    for tag in tags:
        row = _row(tag, key)
        # d = left_units, e = right_units: one store unit and one probe unit, fixed by the key.
        assert hashed.places("left", "store", row) == [key % 5]
        assert hashed.places("left", "probe", row) == [5 + key % 3]
        assert hashed.places("right", "store", row) == [5 + key % 3]
        # d = e = 1: stored by the tag alone, probing the whole other side.
        assert rand.places("left", "store", row) == [tag % 5]
        assert rand.places("left", "probe", row) == [5, 6, 7]
        assert rand.places("right", "store", row) == [5 + tag % 3]
        assert rand.places("right", "probe", row) == [0, 1, 2, 3, 4]


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def ranges(draw: st.DrawFn) -> RangeScheme:
    bounds = sorted(draw(st.sets(finite, max_size=6)))
    lo = draw(st.floats(-100, 100))
    return RangeScheme(tuple(bounds), lo, lo + draw(st.floats(0, 100)))


@settings(max_examples=20)
@given(
    scheme=ranges(),
    pairs=st.lists(st.tuples(finite, st.floats(0, 1)), min_size=1, max_size=20),
)
def test_range_meets_every_band_pair_exactly_once(
    scheme: RangeScheme, pairs: list[tuple[float, float]]
) -> None:
    placer = Placer(scheme)
    for v, t in pairs:
        w = v + scheme.lo + t * (scheme.hi - scheme.lo)
        if not scheme.lo <= w - v <= scheme.hi:
            continue  # rounding pushed the pair out of the band: the predicate rejects it too
        placer.check_pair(_row(0, value=v), _row(0, value=w))


@settings(max_examples=40)
@given(
    bounds=st.sets(st.integers(-20, 20), max_size=6).map(lambda b: tuple(map(float, sorted(b)))),
    lo=st.integers(-5, 5),
    span=st.integers(0, 5),
    v=st.integers(-30, 30),
    dw=st.integers(-10, 10),
)
def test_range_on_bound_values_and_exact_band_edges(
    bounds: tuple[float, ...], lo: int, span: int, v: int, dw: int
) -> None:
    """Values on the bounds and pairs on the band's edges (where rounding would bite)."""
    scheme = RangeScheme(bounds, float(lo), float(lo + span))
    w = v + dw
    if not lo <= w - v <= lo + span:
        return
    Placer(scheme).check_pair(_row(0, value=float(v)), _row(0, value=float(w)))


@given(bounds=st.lists(finite, max_size=12), x=finite)
def test_range_index_sql_agrees_with_bisect(bounds: list[float], x: float) -> None:
    b = tuple(sorted(set(bounds)))
    got = compile_expression(range_index_sql("a.v", b))({"a": {"v": x}})
    assert got == range_of(x, b)
    assert got == sum(1 for bound in b if x >= bound)


# --------------------------------------------------------------------------- balance


def _loads(placer: Placer, side: Side, rows: list[Row]) -> Counter[int]:
    return Counter(p for row in rows for p in placer.places(side, "store", row))


def _assert_even(counts: Counter[int], places: range, tolerance: float = 0.2) -> None:
    total = sum(counts[p] for p in places)
    mean = total / len(places)
    for p in places:
        assert abs(counts[p] - mean) <= tolerance * mean, (p, counts[p], mean)


@pytest.mark.parametrize(
    ("scheme", "left_places", "right_places"),
    [
        (MatrixScheme(4, 2), range(8), range(8)),
        (BicliqueScheme(3, 5), range(3), range(3, 8)),
        (ContRandScheme(5, 7, 2, 3), range(5), range(5, 12)),
        (ContRandScheme(6, 6, 1, 1), range(6), range(6, 12)),
        (HashScheme(6), range(6), range(6)),
    ],
)
def test_random_tags_and_keys_spread_evenly(
    scheme: Scheme, left_places: range, right_places: range
) -> None:
    rng = random.Random(7)
    rows: list[Row] = [_row(rng.getrandbits(63), rng.getrandbits(63)) for _ in range(3000)]
    placer = Placer(scheme)
    left, right = _loads(placer, "left", rows), _loads(placer, "right", rows)
    assert set(left) == set(left_places)
    assert set(right) == set(right_places)
    _assert_even(left, left_places)
    _assert_even(right, right_places)


def test_contrand_spreads_one_hot_key_over_its_subgroup() -> None:
    rng = random.Random(3)
    hot = 12345
    rows: list[Row] = [_row(rng.getrandbits(63), hot) for _ in range(2000)]
    placer = Placer(ContRandScheme(8, 8, 2, 2))
    left = _loads(placer, "left", rows)
    assert len(left) == 4  # the hot key's subgroup: 8 units / 2 subgroups
    _assert_even(left, range(min(left), max(left) + 1))
    hashed = _loads(Placer(HashScheme(8)), "left", rows)
    assert len(hashed) == 1  # the hash scheme puts it all on one unit


def test_matrix_rows_nest_dyadically_across_reshapes() -> None:
    """Under (2n, m/2) a left row's matrix row splits the one it had under (n, m)."""
    rng = random.Random(11)
    wide, tall = Placer(MatrixScheme(2, 8)), Placer(MatrixScheme(4, 4))
    for _ in range(200):
        row = _row(rng.getrandbits(63))
        i_wide = wide.places("left", "store", row)[0] // 8
        i_tall = tall.places("left", "store", row)[0] // 4
        assert i_tall % 2 == i_wide


# --------------------------------------------------------------------------- estimates


def _simulated_max_input(scheme: Scheme, st: Stats, hot: float, rng: random.Random) -> float:
    """Route concrete rows by the scheme's SQL and count the busiest unit's input."""
    placer = Placer(scheme)
    load: Counter[int] = Counter()

    def key() -> int:
        return 7 if rng.random() < hot else rng.getrandbits(63)

    sides: tuple[tuple[Side, int, int], ...] = (
        ("left", int(st.left_rows), int(st.left_delta)),
        ("right", int(st.right_rows), int(st.right_delta)),
    )
    for side, rows, delta in sides:
        for _ in range(rows):
            row = {"tag": rng.getrandbits(63), "k": key(), "v": 0.0}
            load.update(placer.places(side, "store", row))
        for _ in range(delta):
            row = {"tag": rng.getrandbits(63), "k": key(), "v": 0.0}
            store = placer.places(side, "store", row)
            probe = placer.places(side, "probe", row)
            load.update(set(store) | set(probe))
    return max(load.values())


@pytest.mark.parametrize(
    ("scheme", "hot"),
    [
        (HashScheme(8), 0.0),
        (HashScheme(8), 0.4),
        (MatrixScheme(2, 4), 0.4),
        (BicliqueScheme(3, 5), 0.4),
        (ContRandScheme(4, 4, 2, 2), 0.3),
    ],
)
def test_estimate_matches_routing_the_rows(scheme: Scheme, hot: float) -> None:
    st = Stats(1600.0, 1600.0, 200.0, 200.0, top_key_share=hot, units=8)
    simulated = _simulated_max_input(scheme, st, hot, random.Random(1))
    predicted = estimate(scheme, st).max_unit_input
    # The busiest unit of a random layout runs a little over the expectation.
    assert predicted * 0.9 <= simulated <= predicted * 1.25, (simulated, predicted)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: MatrixScheme(3, 4), "power of two, got 3"),
        (lambda: MatrixScheme(4, 6), "power of two, got 6"),
        (lambda: MatrixScheme(0, 4), "got 0"),
        (lambda: HashScheme(0), "hash units must be an integer >= 1, got 0"),
        (lambda: BicliqueScheme(2, 0), "right_units must be an integer >= 1, got 0"),
        (lambda: ContRandScheme(4, 4, 5, 1), "d (left subgroups) must be <= left_units=4, got 5"),
        (lambda: ContRandScheme(4, 3, 1, 4), "e (right subgroups) must be <= right_units=3, got 4"),
        (lambda: ContRandScheme(4, 3, 0, 1), "got 0"),
        (lambda: RangeScheme((2.0, 1.0), 0.0, 1.0), "strictly increasing, got 2.0 then 1.0"),
        (lambda: RangeScheme((float("nan"),), 0.0, 1.0), "finite, got nan"),
        (lambda: RangeScheme((), 1.0, 0.0), "lo=1.0 > hi=0.0"),
        (lambda: range_bounds([1.0, float("inf")], 2), "finite, got inf"),
        (lambda: range_bounds([1.0], 0), "got 0"),
    ],
)
def test_invalid_arguments_name_the_bad_value(make: Callable[[], object], needle: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        make()
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("scheme", "needle"),
    [
        (HashScheme(4), "equality key"),
        (ContRandScheme(4, 4, 2, 2), "equality key"),
        (RangeScheme((0.0,), -1.0, 1.0), "band value"),
    ],
)
def test_content_sensitive_schemes_need_their_column(scheme: Scheme, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        scheme.store("left", RowSql(tag="a.tag"))
    with pytest.raises(ValueError, match=needle):
        scheme.probe("right", RowSql(tag="b.tag"))


def test_range_bounds_are_equi_depth_quantiles() -> None:
    values = [float(x) for x in range(100)]
    assert range_bounds(values, 4) == (25.0, 50.0, 75.0)
    assert range_bounds(reversed(values), 4) == (25.0, 50.0, 75.0)
    assert range_bounds([], 4) == ()
    assert range_bounds(values, 1) == ()
    # A hot value fills one range; the other rows share the remaining ranges.
    assert range_bounds([1.0] * 60 + [2.0, 3.0, 4.0, 5.0] * 10, 4) == (2.0, 4.0, 5.0)
    # Each range of the result holds about a quarter of a fresh sample.
    rng = random.Random(5)
    sample = [rng.gauss(0, 1) for _ in range(4000)]
    bounds = range_bounds(sample, 4)
    counts = Counter(range_of(rng.gauss(0, 1), bounds) for _ in range(4000))
    _assert_even(counts, range(4), tolerance=0.15)


def test_describe_and_sizes() -> None:
    assert MatrixScheme(4, 2).describe() == "matrix 4×2 over 8 cells"
    assert MatrixScheme(4, 2).places() == 8
    assert MatrixScheme(4, 2).units("left") == 8
    assert BicliqueScheme(3, 5).places() == 8
    assert BicliqueScheme(3, 5).units("left") == 3
    assert BicliqueScheme(3, 5).units("right") == 5
    assert ContRandScheme(3, 5, 1, 2).units("right") == 5
    assert HashScheme(6).places() == 6
    assert RangeScheme((1.0, 2.0), 0.0, 1.0).places() == 3
    names = [s.name for s in (HashScheme(1), MatrixScheme(1, 1), BicliqueScheme(1, 1))]
    assert names == ["hash", "matrix", "biclique"]
    assert ContRandScheme(1, 1, 1, 1).name == "contrand"
    assert RangeScheme((), 0.0, 0.0).name == "range"
