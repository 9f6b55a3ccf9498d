"""The papers' worked numbers, reproduced by the cost formulas (Squall VLDB 2014, BiStream SIGMOD
2015), in our naming: an (n, m) matrix has n R-rows and m S-columns."""

from __future__ import annotations

import math

import pytest

from streamjoin.partition import (
    bandwidth_biclique,
    bandwidth_matrix,
    ilf,
    matrix_shapes,
    memory_biclique,
    memory_matrix,
    optimal_shape,
    sgr_biclique,
    sgr_matrix,
)

GB = 1.0


def test_squall_fig2_ilf_and_replicated_storage() -> None:
    """|R| = 1 GB, |S| = 64 GB, J = 64: (8,8) vs (1,64) (Squall §3.3, Fig. 2)."""
    r, s = 1 * GB, 64 * GB
    assert ilf(r, s, 8, 8) == pytest.approx(8.125)
    assert ilf(r, s, 1, 64) == pytest.approx(2.0)
    assert memory_matrix(r, s, 8, 8) == pytest.approx(520.0)
    assert memory_matrix(r, s, 1, 64) == pytest.approx(128.0)
    # J·ILF is the total replicated storage.
    for n, m in matrix_shapes(64):
        assert memory_matrix(r, s, n, m) == pytest.approx(64 * ilf(r, s, n, m))
    assert optimal_shape(r, s, 64) == (1, 64)


def test_squall_b_nci_weak_scaling() -> None:
    """B_NCI: 0.68M ⋈ 30M on 32 joiners, then 1.36M ⋈ 60M on 64 (Squall §5.4): +42% ILF."""
    assert optimal_shape(0.68e6, 30e6, 32) == (1, 32)
    small = ilf(0.68e6, 30e6, 1, 32)
    assert small == pytest.approx(1.6175e6)
    assert math.floor(small / 1e4) / 100 == 1.61  # the paper's "1.61M"
    assert optimal_shape(1.36e6, 60e6, 64) == (1, 64)
    large = ilf(1.36e6, 60e6, 1, 64)
    assert math.floor(large / 1e4) / 100 == 2.29  # the paper's "2.29M"
    assert large / small - 1 == pytest.approx(0.42, abs=0.005)


def test_optimal_shape_weighs_tuple_sizes() -> None:
    # Equal cardinalities, but left tuples 16× larger: replicate the small right tuples.
    assert optimal_shape(1e6, 1e6, 16) == (4, 4)
    assert optimal_shape(1e6, 1e6, 16, size_r=16.0, size_s=1.0) == (16, 1)


def test_bistream_bandwidth_table() -> None:
    """m = n = 4 partitions per relation (BiStream §4, Fig. 11 settings), Σ_R = Σ_S = 1."""
    sigma_r, sigma_s = 1.0, 3.0  # distinct, so the two coefficients are both checked

    def coeffs(total: float, a: float, b: float) -> None:
        assert total == pytest.approx(a * sigma_r + b * sigma_s)

    coeffs(bandwidth_matrix(sigma_r, sigma_s, 4, 4), 4, 4)  # JM16
    coeffs(bandwidth_biclique(sigma_r, sigma_s, 4, 4), 5, 5)  # JB8, random
    coeffs(bandwidth_biclique(sigma_r, sigma_s, 4, 4, d=2, e=2), 3, 3)  # JB8-CR2
    coeffs(bandwidth_biclique(sigma_r, sigma_s, 4, 4, d=4, e=4), 2, 2)  # JB8-CR4, pure hash
    # Random routing costs exactly Σ_R + Σ_S more than the same-partition matrix.
    extra = bandwidth_biclique(sigma_r, sigma_s, 4, 4) - bandwidth_matrix(sigma_r, sigma_s, 4, 4)
    assert extra == pytest.approx(sigma_r + sigma_s)


def test_bistream_naming_is_mapped_to_ours() -> None:
    """An R tuple goes to the m cells of its row (ours); BiStream calls that n."""
    assert bandwidth_matrix(1.0, 0.0, n=2, m=8) == 8
    assert bandwidth_matrix(0.0, 1.0, n=2, m=8) == 2
    assert memory_matrix(1.0, 0.0, n=2, m=8) == 8
    # A left tuple's probes go to the right units (right_units / e of them) plus its store copy.
    assert bandwidth_biclique(1.0, 0.0, left_units=3, right_units=6, d=1, e=2) == 4
    assert bandwidth_biclique(0.0, 1.0, left_units=3, right_units=6, d=1, e=2) == 4


@pytest.mark.parametrize(("cells", "ratio"), [(16, 4.0), (36, 6.0), (64, 8.0)])
def test_matrix_memory_is_sqrt_n_times_the_biclique(cells: int, ratio: float) -> None:
    """Square matrices replicate √N times (BiStream Eq. 1 vs Eq. 2; Table 4: JB16/JM16 ≈ 4)."""
    side = math.isqrt(cells)
    r, s = 3e6, 5e6
    w_mat = memory_matrix(r, s, side, side, size_r=40.0, size_s=40.0)
    assert w_mat / memory_biclique(r, s, 40.0, 40.0) == pytest.approx(ratio)


def test_biclique_memory_counts_buffered_probes() -> None:
    base = memory_biclique(100.0, 200.0, 2.0, 3.0)
    assert base == 2.0 * 100 + 3.0 * 200  # Eq. 1: independent of the unit counts
    with_delay = memory_biclique(
        100.0, 200.0, 2.0, 3.0, left_units=4, right_units=6, d=2, e=3, rate_r=10, rate_s=5, delay=1
    )
    # χ_R·(right_units/e)·φ_R·D + χ_S·(left_units/d)·φ_S·D = 2·2·10 + 3·2·5
    assert with_delay - base == pytest.approx(40.0 + 30.0)


def test_scaling_gain_ratio() -> None:
    """BiStream Eq. 3/4: a new row must first hold its column's S partition; SGR_bi = 1."""
    r, s, cap = 8.0, 40.0, 20.0
    # (n, m) = (2, 4): a new row copies |S|/m = 10 of 20 → half the capacity is usable.
    assert sgr_matrix(r, s, 2, 4, cap, "row") == pytest.approx(0.5)
    # A new column copies |R|/n = 4 → 80% usable.
    assert sgr_matrix(r, s, 2, 4, cap, "column") == pytest.approx(0.8)
    assert sgr_matrix(r, 400.0, 2, 4, cap, "row") == 0.0  # the copy alone overflows the unit
    assert sgr_biclique() == 1.0
    with pytest.raises(ValueError, match="'diagonal'"):
        sgr_matrix(r, s, 2, 4, cap, "diagonal")  # type: ignore[arg-type]
