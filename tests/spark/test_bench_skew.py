"""The partitioning benchmarks (`benchmarks.skew`) at their tiny size, on the shared session.

Each benchmark checks its own results as it runs (an exact count, and at tiny size the
reference executor's rows as a multiset) and raises on any difference; here they run in process
and their figures are checked for the properties the issue asks them to show.
"""

from __future__ import annotations

import typing as t

import pytest

from benchmarks import skew_fluctuating, skew_keys, skew_memory, skew_passing

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


def test_skew_tiny(spark: SparkSession, tmp_path: Path) -> None:
    result = skew_keys.run_skew(spark, "tiny", str(tmp_path))
    assert [c["z"] for c in result["cases"]] == list(skew_keys.SKEW_SIZES["tiny"].zipfs)
    for case in result["cases"]:
        assert case["results_agree"]
        # Same output in both modes, equal to the exact count and to the reference's rows.
        assert case["hash"]["out"] == case["auto"]["out"] == case["expected_out"]
        assert case["reference_out"] == case["expected_out"]
    flat, hot = result["cases"][0], result["cases"][-1]
    assert flat["auto"]["ended_on"] == "hash on 8 units", "uniform keys: auto stays on hash"
    assert hot["auto"]["switched_from_batch"] is not None, "z = 2: auto leaves plain hashing"
    assert hot["auto"]["ended_on"] != "hash on 8 units"
    assert hot["hash"]["skew_mean"] > 2.0
    assert hot["auto"]["skew_after_switch"] < 1.5


def test_passing_tiny(spark: SparkSession, tmp_path: Path) -> None:
    """A hot key for two batches, even keys for four: auto leaves hash and comes back, the
    output exact in both modes (the run checks it against the reference)."""
    result = skew_passing.run_passing(spark, "tiny", str(tmp_path))
    auto, hash_ = result["auto"], result["hash"]
    assert auto["out"] == hash_["out"] == result["expected_out"]
    assert hash_["changed_at"] == []
    assert auto["left_hash_at"] is not None and auto["left_hash_at"] <= 2, auto["routing"]
    assert auto["back_to_hash_at"] is not None and auto["back_to_hash_at"] > 2, auto["routing"]
    assert auto["routing"][-1] == "hash on 4 units"


def test_fluctuating_tiny(spark: SparkSession, tmp_path: Path) -> None:
    result = skew_fluctuating.run_fluctuating(spark, "tiny", str(tmp_path))
    assert result["results_agree"]
    assert result["out"] == result["expected_out"] == result["reference_out"]
    assert result["shape_changes"] >= 3
    assert result["worst_ilf_ratio_at_decisions"] <= 1.25
    assert result["worst_ilf_ratio_after_each_batch"] <= 1.25


def test_memory_tiny(spark: SparkSession, tmp_path: Path) -> None:
    result = skew_memory.run_memory(spark, "tiny", str(tmp_path))
    assert result["results_agree"]
    assert result["out"] == result["reference_out"]
    assert result["on_disk_equal"]
    assert result["schemes"]["biclique"]["scheme"].startswith("biclique 4+4")
    assert result["schemes"]["matrix"]["scheme"].startswith("matrix 2×4")
    assert len(result["schemes"]["biclique"]["state_rows_per_unit"]) == 8
    for scheme in result["schemes"].values():
        assert scheme["measured_over_formula"] == pytest.approx(1.0, abs=0.10)
    # Biclique stores each tuple once; the 2×4 matrix each left tuple 4×, each right one 2×.
    assert result["matrix_over_biclique_stored"] == pytest.approx(3.0, abs=0.05)
