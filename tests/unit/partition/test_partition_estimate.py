"""The per-batch cost estimate and the ranking of candidate schemes."""

from __future__ import annotations

import random

import pytest

from streamjoin.partition import (
    BicliqueScheme,
    ContRandScheme,
    Estimate,
    HashScheme,
    MatrixScheme,
    RangeScheme,
    Stats,
    bandwidth_biclique,
    bandwidth_matrix,
    candidates,
    estimate,
    ilf,
    memory_matrix,
)
from streamjoin.partition.ranges import range_of

INSENSITIVE = (MatrixScheme, BicliqueScheme)


def _names(ests: list[Estimate]) -> list[str]:
    return [e.scheme.name for e in ests]


def _assert_ranked(ests: list[Estimate]) -> None:
    costs = [e.cost for e in ests]
    assert costs == sorted(costs)


# --------------------------------------------------------------------------- estimate


def test_hash_estimate_is_the_hot_bucket() -> None:
    st = Stats(1000.0, 3000.0, 100.0, 300.0, left_size=2.0, right_size=5.0, units=8)
    even = estimate(HashScheme(8), st)
    assert even.max_unit_input == pytest.approx(4400 / 8)
    assert even.stored_bytes == 2.0 * 1000 + 5.0 * 3000
    assert even.moved_bytes == 2.0 * 100 + 5.0 * 300
    skewed = estimate(HashScheme(8), Stats(1000.0, 3000.0, 100.0, 300.0, top_key_share=0.5))
    assert skewed.max_unit_input == pytest.approx(4400 * (0.5 + 0.5 / 8))


def test_matrix_estimate_is_ilf_and_replicated() -> None:
    st = Stats(1000.0, 3000.0, 100.0, 300.0, left_size=2.0, right_size=5.0, top_key_share=0.9)
    e = estimate(MatrixScheme(2, 4), st)
    assert e.max_unit_input == pytest.approx(ilf(1100, 3300, 2, 4))  # skew does not matter
    assert e.stored_bytes == pytest.approx(memory_matrix(1000, 3000, 2, 4, 2.0, 5.0))
    assert e.moved_bytes == pytest.approx(bandwidth_matrix(200.0, 1500.0, 2, 4))


def test_biclique_estimate_sees_the_whole_other_delta() -> None:
    st = Stats(1000.0, 3000.0, 100.0, 300.0, left_size=2.0, right_size=5.0)
    e = estimate(BicliqueScheme(2, 6), st)
    assert e.max_unit_input == pytest.approx(max(1100 / 2 + 300, 3300 / 6 + 100))
    assert e.stored_bytes == 2.0 * 1000 + 5.0 * 3000  # stored once
    assert e.moved_bytes == pytest.approx(bandwidth_biclique(200.0, 1500.0, 2, 6))


def test_contrand_estimate_between_hash_and_random() -> None:
    st = Stats(1000.0, 1000.0, 100.0, 100.0, top_key_share=0.2)
    random_ = estimate(ContRandScheme(4, 4, 1, 1), st)
    assert random_.max_unit_input == pytest.approx(
        estimate(BicliqueScheme(4, 4), st).max_unit_input
    )
    assert random_.moved_bytes == pytest.approx(bandwidth_biclique(100.0, 100.0, 4, 4))
    pure_hash = estimate(ContRandScheme(4, 4, 4, 4), st)
    assert pure_hash.max_unit_input == pytest.approx((0.2 + 0.8 / 4) * (1100 + 100))
    assert pure_hash.moved_bytes == pytest.approx(bandwidth_biclique(100.0, 100.0, 4, 4, 4, 4))
    half = estimate(ContRandScheme(4, 4, 2, 2), st)
    assert half.moved_bytes == pytest.approx(bandwidth_biclique(100.0, 100.0, 4, 4, 2, 2))


def test_range_estimate_uses_the_sample() -> None:
    rng = random.Random(2)
    sample = tuple(rng.uniform(0, 100) for _ in range(2000))
    scheme = RangeScheme((25.0, 50.0, 75.0), -1.0, 1.0)
    st = Stats(4000.0, 4000.0, 400.0, 400.0, value_sample=sample)
    e = estimate(scheme, st)
    # A quarter of the state (8000 rows), plus the deltas of its quarter and the ~2% of
    # rows within the band of each of an inner range's two bounds (sampling noise aside).
    assert e.max_unit_input == pytest.approx(2000 + 800 * 0.27, rel=0.05)
    # Copies per delta row: 1 range, or 2 for the rows within 1 of a bound (~3·2/100).
    assert 800 <= e.moved_bytes <= 800 * 1.1
    # A hot value lands in one range.
    hot = Stats(4000.0, 4000.0, 400.0, 400.0, value_sample=(10.0,) * 1000 + sample)
    assert estimate(scheme, hot).max_unit_input > 1.5 * e.max_unit_input
    # Without a sample: uniform spread assumed.
    blind = estimate(scheme, Stats(4000.0, 4000.0, 400.0, 400.0))
    assert blind.max_unit_input == pytest.approx(e.max_unit_input, rel=0.1)
    assert {range_of(v, scheme.bounds) for v in sample} == {0, 1, 2, 3}


def test_stats_validation_names_the_value() -> None:
    with pytest.raises(ValueError, match=r"top_key_share must be within \[0, 1\], got 1.5"):
        Stats(1.0, 1.0, 1.0, 1.0, top_key_share=1.5)
    with pytest.raises(ValueError, match="left_rows must be a finite number >= 0, got -1"):
        Stats(-1.0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="units must be an integer >= 1, got 0"):
        Stats(1.0, 1.0, 1.0, 1.0, units=0)
    with pytest.raises(ValueError, match="right_size must be a finite number > 0, got 0"):
        Stats(1.0, 1.0, 1.0, 1.0, right_size=0.0)


# --------------------------------------------------------------------------- candidates


@pytest.mark.parametrize("units", [2, 4, 8, 16, 64])
def test_uniform_keys_hash_wins(units: int) -> None:
    st = Stats(1e6, 2e6, 1e4, 2e4, units=units)
    ests = candidates(True, None, st)
    _assert_ranked(ests)
    assert ests[0].scheme == HashScheme(units)
    assert {"hash", "matrix", "biclique"} <= set(_names(ests))


@pytest.mark.parametrize("units", [2, 4, 8, 16, 64])
@pytest.mark.parametrize("share", [0.3, 0.5, 0.9])
def test_a_hot_key_makes_a_content_insensitive_scheme_win(units: int, share: float) -> None:
    st = Stats(1e6, 1e6, 1e4, 1e4, top_key_share=share, units=units)
    ests = candidates(True, None, st)
    _assert_ranked(ests)
    assert isinstance(ests[0].scheme, INSENSITIVE), ests[0]
    hash_est = next(e for e in ests if e.scheme.name == "hash")
    assert hash_est.max_unit_input > ests[0].max_unit_input


def test_theta_joins_get_only_content_insensitive_schemes() -> None:
    ests = candidates(False, None, Stats(1e6, 1e6, 1e4, 1e4, units=8))
    assert sorted(_names(ests)) == ["biclique", "matrix"]
    _assert_ranked(ests)
    # Large state, small batches: the biclique stores each tuple once and wins.
    assert ests[0].scheme == BicliqueScheme(4, 4)


def test_matrix_wins_when_the_batch_dwarfs_the_state() -> None:
    """Early in a stream a unit's input is mostly probes, which the matrix splits and the
    biclique does not."""
    ests = candidates(False, None, Stats(0.0, 0.0, 1e4, 1e4, units=16))
    assert ests[0].scheme == MatrixScheme(4, 4)
    _assert_ranked(ests)


def test_matrix_shape_is_ilf_optimal_over_a_power_of_two() -> None:
    ests = candidates(False, None, Stats(1e3, 64e3, 0.0, 0.0, units=100))
    matrix = next(e.scheme for e in ests if isinstance(e.scheme, MatrixScheme))
    assert matrix == MatrixScheme(1, 64)  # 100 units → 64 cells, the small side replicated


def test_biclique_split_follows_the_state() -> None:
    ests = candidates(False, None, Stats(3e6, 1e6, 1e3, 1e3, units=8))
    biclique = next(e.scheme for e in ests if isinstance(e.scheme, BicliqueScheme))
    assert biclique == BicliqueScheme(6, 2)


def test_contrand_is_offered_when_a_hybrid_fits() -> None:
    # Moderate skew, large deltas: subgroups cut the probe fan-out without a hot bucket.
    st = Stats(1e5, 1e5, 5e4, 5e4, top_key_share=0.05, units=16)
    ests = candidates(True, None, st)
    contrand = next(e for e in ests if isinstance(e.scheme, ContRandScheme))
    assert isinstance(contrand.scheme, ContRandScheme)
    assert (contrand.scheme.d, contrand.scheme.e) != (1, 1)
    biclique = next(e for e in ests if isinstance(e.scheme, BicliqueScheme))
    assert contrand.max_unit_input < biclique.max_unit_input
    _assert_ranked(ests)
    # Too few units for a hybrid: none offered.
    assert "contrand" not in _names(candidates(True, None, Stats(1.0, 1.0, 1.0, 1.0, units=2)))


def test_band_joins_offer_range_with_a_sample() -> None:
    rng = random.Random(4)
    sample = tuple(rng.uniform(0, 1000) for _ in range(1000))
    st = Stats(1e6, 1e6, 1e4, 1e4, units=8, value_sample=sample)
    ests = candidates(False, (-0.5, 0.5), st)
    assert ests[0].scheme.name == "range"
    range_scheme = ests[0].scheme
    assert isinstance(range_scheme, RangeScheme)
    assert range_scheme.places() == 8
    assert (range_scheme.lo, range_scheme.hi) == (-0.5, 0.5)
    _assert_ranked(ests)
    # A hot value defeats range partitioning.
    hot = Stats(1e6, 1e6, 1e4, 1e4, units=8, value_sample=(3.0,) * 900 + sample[:100])
    hot_ests = candidates(False, (-0.5, 0.5), hot)
    assert "range" in _names(hot_ests)
    assert isinstance(hot_ests[0].scheme, INSENSITIVE)
    # No sample, no bounds: range is not offered.
    assert "range" not in _names(candidates(False, (-0.5, 0.5), Stats(1.0, 1.0, 1.0, 1.0)))


def test_single_unit_offers_only_one_place_schemes() -> None:
    ests = candidates(True, (0.0, 1.0), Stats(10.0, 10.0, 1.0, 1.0, value_sample=(1.0, 2.0)))
    assert ests[0].scheme == HashScheme(1)
    assert all(e.scheme.places() == 1 for e in ests)
    assert {type(e.scheme) for e in ests} == {HashScheme, MatrixScheme, RangeScheme}
