"""The live mode over Nexmark (`benchmarks.rate`): each query is fed only the streams it reads,
and a query that writes groups when its watermark closes them is not judged by its output
counts (a live feed has no end of input)."""

from __future__ import annotations

import typing as t

from benchmarks.harness_exact import expected_counts
from benchmarks.rate_feed import Feed, closes_windows
from benchmarks.workloads import WORKLOADS

if t.TYPE_CHECKING:
    from pathlib import Path


def test_each_nexmark_query_is_fed_its_own_streams(tmp_path: Path) -> None:
    cases = {c.name: c for c in WORKLOADS["nexmark"](str(tmp_path), "tiny")}
    fed = {name: sorted(Feed(case, 100.0).streams) for name, case in cases.items()}
    assert fed["nexmark-q3"] == ["auction", "person"]
    assert fed["nexmark-q7"] == ["bid"]
    assert fed["nexmark-q20"] == ["auction", "bid"]
    assert {n for n, c in cases.items() if closes_windows(c.job)} == {
        "nexmark-q4",
        "nexmark-q7",
        "nexmark-q8",
        "nexmark-q9",
    }
    # (DuckDB's count of a join's pairs is no group's count.)
    assert expected_counts(cases["nexmark-q4"]) is None
    assert expected_counts(cases["nexmark-q20"]) == {"q1": 314}  # (bids of category 10)
