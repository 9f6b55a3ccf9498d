"""The adhoc benchmark's targets and its RESULTS.md rows (`benchmarks.adhoc`, `report`)."""

from __future__ import annotations

import typing as t

from benchmarks.adhoc_jobs import query
from benchmarks.adhoc_targets import targets
from benchmarks.report_adhoc import adhoc_lines, adhoc_targets


def _run(wall: float, **more: t.Any) -> dict[str, t.Any]:
    return {"wall_s": wall, "rows_in": 48_000, "state_bytes": 2**20, "joins_per_batch": 2, **more}


REPORT: dict[str, t.Any] = {
    "size": "quick",
    "spec": {"files": 12, "rows": 2_000},
    "commit": "abc1234",
    "checks": {"10": "equal", "100": "equal"},
    "runs": {
        "shared-10": _run(10.0),
        "apart-10": _run(20.0),
        "spark-10": _run(40.0, finished=True),
        "shared-100": _run(
            12.0,
            churn={
                "adds": [{"query": "s100", "batches_to_first": 1, "seconds_to_first": 1.5}],
                "batch_ms_p50": 800.0,
                "batch_ms_p99": 1500.0,
            },
        ),
        "apart-100": _run(60.0),
        "spark-100": {
            "wall_s": 900.0,
            "finished": False,
            "rows_read_per_query": 6_000,
            "state_bytes": 2**20,
            "joins_per_batch": 100,
        },
    },
    "ratios": {
        "10": {"vs_apart": 2.0, "vs_spark": 4.0},
        "100": {"vs_apart": 5.0, "vs_spark": ">75.00"},
    },
}


def test_targets_read_a_stopped_peer_as_a_lower_bound() -> None:
    met = targets(REPORT["runs"], REPORT["ratios"], [10, 100])
    assert met == {
        "at_100_vs_spark_ge_10": True,
        "at_100_vs_apart_ge_3": True,
        "gap_vs_spark_widens": True,
        "gap_vs_apart_widens": True,
        "first_results_within_2_batches": True,
    }


def test_results_rows() -> None:
    rows = adhoc_targets({"adhoc-quick.json": REPORT})
    assert [met for _, _, met in rows] == [True, True, True]
    # Spark stopped at its limit is rated on the rows it had read: 48,000 rows × 100 queries in
    # 12 s against 6,000 × 100 in 900 s.
    assert rows[0][1] == "×4.0 at 10, ×600.0 (at its limit) at 100"
    text = "\n".join(adhoc_lines({"adhoc-quick.json": REPORT}))
    assert "| 100 | spark | 900.0 (stopped) | 6.66667 | 100 |" in text
    assert "s100 1 (1.5 s)" in text


def test_queries_alternate_templates() -> None:
    (even, cond0), (odd, cond1) = query(0, "/o"), query(1, "/o")
    assert "a.k = b.k AND a.x > 0" in cond0 and "a.g = b.g AND b.x < 37" in cond1
    assert even.startswith("CREATE SINK s0") and "INSERT INTO s1" in odd


def test_a_gap_widens_only_where_the_numbers_prove_it() -> None:
    from benchmarks.adhoc_targets import _widens

    assert _widens([1.96, 10.89, ">12.47"]) is True  # (at least 12.47, above 10.89)
    assert _widens([2.0, 1.5]) is False
    # A peer stopped at its limit gives a lower bound: a smaller bound later decides nothing.
    assert _widens([2.27, ">29.81", ">11.73"]) is None
    assert _widens([">3", 5.0]) is None


def test_a_stopped_peer_is_rated_on_what_it_read() -> None:
    from benchmarks.adhoc_targets import _ratios

    runs = {
        "shared-500": {"wall_s": 50.0, "rows_in": 48_000},
        "apart-500": {"wall_s": 600.0, "finished": False, "rows_in": 24_000},
        "spark-500": {"wall_s": 600.0, "finished": False, "rows_read_per_query": 0},
    }
    got = _ratios(runs, [500], 48_000)["500"]
    assert got["vs_apart"] == 24.0 and got["apart_at_limit"] is True
    # (No row read at all: only the time gives a bound.)
    assert got["vs_spark"] == ">12.00"
    # A report from before rows read were recorded: the time ratio, a bound.
    del runs["spark-500"]["rows_read_per_query"]
    assert _ratios(runs, [500], 48_000)["500"]["vs_spark"] == ">12.00"
