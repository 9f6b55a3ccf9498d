"""The soak benchmark's flatness test (`benchmarks.soak_trend.trend`) and its RESULTS.md rows."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.report_soak import OURS, soak_targets
from benchmarks.soak_heap import parse_heap_info, parse_histogram
from benchmarks.soak_trend import SETTLE, TOLERANCE, trend


def _series(rise: float, noise: float, seed: int, n: int = 120) -> tuple[list[float], list[float]]:
    """`n` samples a minute apart around 100, rising by `rise` over the run, with uniform noise."""
    rng = random.Random(seed)
    times = [60.0 * i for i in range(n)]
    return times, [100 + rise * i / (n - 1) + rng.uniform(-noise, noise) for i in range(n)]


@pytest.mark.parametrize("noise", [2.0, 10.0, 20.0, 30.0])
def test_noise_about_a_level_is_rarely_taken_for_growth(noise: float) -> None:
    # A rise is growth only past both 10 % of the level and twice its standard error: pure
    # noise passes both by chance in a few runs of a hundred at most (a 2-sigma test, one-sided,
    # is 2.3 %), never at small noise. (A search over seeds finds one of those runs: it is a
    # rate to bound, not a property of every run.)
    flagged = sum(not trend(*_series(0.0, noise, seed))["flat"] for seed in range(400))
    assert flagged <= (0 if noise <= 10 else 0.025 * 400), flagged


@given(rise=st.floats(40, 400), seed=st.integers(0, 1000))
def test_a_steady_rise_beyond_the_tolerance_grows(rise: float, seed: int) -> None:
    found = trend(*_series(rise, 2.0, seed))
    assert found["flat"] is False
    # The rise is measured after the settling share, where the line rises (1 - SETTLE) of it.
    assert found["rise"] == pytest.approx(rise * (1 - SETTLE), rel=0.1)
    assert found["rise_share"] > TOLERANCE


def test_a_sawtooth_is_flat_and_warm_up_is_left_out() -> None:
    times = [60.0 * i for i in range(100)]
    # Fast growth in the first tenth (a heap growing to its size), then a sawtooth (garbage
    # collected every ten samples).
    values = [50 + 5 * i if i < 10 else 100 + (i % 10) * 3 for i in range(100)]
    assert trend(times, values)["flat"] is True
    assert trend(times[:3], values[:3]) == {"samples": 3, "flat": None}


def _report(**trends: dict[str, object]) -> dict[str, object]:
    flat = {"flat": True, "rise_share": 0.01}
    return {
        "duration_s": 3600,
        "rate_per_stream": 35000,
        "batch_p50_ms": 700.0,
        "latency_p50_s": 1.1,
        "latency_p99_s": 2.0,
        "latency_growth": 1.0,
        "backlog_at_end_s": 1.0,
        "trends": {name: flat for name in OURS} | trends,
    }


def test_the_target_holds_only_when_every_figure_is_flat_and_it_keeps_up() -> None:
    (row,) = soak_targets("soak.json", _report())
    assert row[2] is True
    (row,) = soak_targets("soak.json", _report(jvm_rss_mb={"flat": False, "rise_share": 0.4}))
    assert row[2] is False and "grows: jvm_rss_mb" in row[1]
    (row,) = soak_targets("soak.json", _report(heap_mb={"flat": None}))
    assert row[2] is False
    behind = _report() | {"backlog_at_end_s": 30.0}
    assert soak_targets("soak.json", behind)[0][2] is False


PARALLEL_HEAP_INFO = """28140:
 PSYoungGen      total 113152K, used 19472K [0x00000000d5580000, 0x00000000dd380000)
  eden space 97280K, 20% used [0x00000000d5580000,0x00000000d68843c8,0x00000000db480000)
  from space 15872K, 0% used [0x00000000dc400000,0x00000000dc400000,0x00000000dd380000)
 ParOldGen       total 258048K, used 0K [0x0000000080000000, 0x000000008fc00000)
  object space 258048K, 0% used [0x0000000080000000,0x0000000080000000,0x000000008fc00000)
 Metaspace       used 8968K, committed 9152K, reserved 1114112K
  class space    used 1062K, committed 1152K, reserved 1048576K
"""
G1_HEAP_INFO = """1234:
 garbage-first heap   total 262144K, used 20480K [0x0000000080000000, 0x0000000100000000)
  region size 1024K, 20 young (20480K), 0 survivors (0K)
 Metaspace       used 8968K, committed 9152K, reserved 1114112K
"""


def test_the_heap_size_sums_each_generations_total_and_leaves_metaspace_out() -> None:
    assert parse_heap_info(PARALLEL_HEAP_INFO) == (113152 + 258048) * 1024
    assert parse_heap_info(G1_HEAP_INFO) == 262144 * 1024
    jdk22 = G1_HEAP_INFO.replace("total 262144K", "total reserved 1048576K, committed 262144K")
    assert parse_heap_info(jdk22) == 262144 * 1024
    assert parse_heap_info("28140:\nNo such process\n") is None


def test_the_histogram_counts_the_jdks_own_classes_too() -> None:
    text = """28140:
 num     #instances         #bytes  class name (module)
-------------------------------------------------------
   1:        120000       96000000  [B (java.base@17.0.15)
   2:          4000         160000  streamjoin.JoinIndex$Entry
Total        124000       96160000
"""
    assert parse_histogram(text) == {
        "[B": 96_000_000,
        "streamjoin.JoinIndex$Entry": 160_000,
        "total": 96_160_000,
    }
