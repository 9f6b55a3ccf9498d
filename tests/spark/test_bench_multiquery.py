"""The multiquery benchmark at its tiny size: three queries over TPC-H streams, each alone and
under the global plan, run in this process; both modes' per-query output counts equal each
other's and DuckDB's exact batch join of the backlog. (The other mode, ``simple``, changes
settings that `test_conformance` checks against the reference, each on its own: simple
sharing's greedy orders and its queries unshared are ``greedy`` and ``unshared`` there.)"""

from __future__ import annotations

import typing as t

import pytest

from benchmarks.multiquery import run

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytest.importorskip("duckdb")


MODES = ("alone", "global")


def test_every_mode_gives_the_exact_counts(spark: SparkSession, tmp_path: Path) -> None:
    report = run("tiny", modes=MODES, root=str(tmp_path), in_process=True)
    [result] = report["runs"]
    assert result["queries"] == 3
    expected = result["expected"]
    assert len(expected) == 3
    assert all(n > 0 for n in expected.values()), "every tiny query should produce rows"
    for mode in MODES:
        figures = result["modes"][mode]
        assert figures.get("error") is None, f"{mode}: {figures.get('error')}"
        assert figures["out"] == expected, f"{mode}: {figures['out']} != exact {expected}"
    assert result["results_agree"] and result["exact"]
    # Each mode's settings are restored afterwards.
    assert spark.conf.get("streamjoin.share", None) is None
    # One shared store per stream against one per query that reads it.
    figures = result["modes"]
    assert figures["alone"]["rows_read"] > figures["global"]["rows_read"]
    assert figures["alone"]["jobs"] == 3 and figures["global"]["jobs"] == 1
