"""Squall's migration on a cluster's executors (`runtime.batch.drains`, `placed.DrainsOnExecutors`):
when the skew check moves a query off hash and back, the index's partitions under the old
placement stay on their owners and drain there, probed by the new rows, while a new, empty index
takes the new placement; nothing is built again from the stored units after the first batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing as t
from pathlib import Path

from .jobs import quick_jvms

if t.TYPE_CHECKING:
    from streamjoin.cluster import LocalCluster

ROOT = Path(__file__).resolve().parents[2]


def test_a_hot_key_that_passes_moves_the_query_without_a_rebuild(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """``benchmarks.skew passing --tiny`` on the cluster: forced hash and auto over a hot key
    that passes, each checked against the reference executor's rows in the run."""
    out = tmp_path / "passing.json"
    env = {
        **os.environ,
        **quick_jvms(),
        "STREAMJOIN_BENCH_MASTER": cluster.master_url,
        "TMPDIR": str(tmp_path),  # (the benchmark's streams and sinks)
    }
    args = ("-m", "benchmarks.skew", "passing", "--tiny", "--cluster", "--out", str(out))
    run = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    auto, hash_ = result["auto"], result["hash"]
    assert auto["out"] == hash_["out"] == result["expected_out"]
    assert auto["left_hash_at"] is not None, auto["routing"]
    assert auto["back_to_hash_at"] is not None, auto["routing"]
    # Built once, at the first batch; both changes drained the old partitions instead.
    assert hash_["index_builds"] == [0] and hash_["index_drains"] == [], hash_
    assert auto["index_builds"] == [0], auto
    assert auto["index_drains"] == auto["changed_at"], auto


W3 = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND"


def test_an_outer_join_drains_on_the_executors_and_its_matches_veto_decisions(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """A FULL outer join of an OR (its rows in several tables, each copy marked apart) moved
    from a matrix to a biclique and back (`tests.cluster.changes`): each old index drains on
    its executors, the new rows it matches are sent back and veto their decisions in the new
    index, both indexes' rows without a partner are decided, and the output is exact; the
    index is built once."""
    with_ = "WITH (partitioning = 'matrix', units = 4, adapt = false)"
    on = f"(a.k = b.k OR a.id = b.id) AND {W3} {with_}"
    env = {**os.environ, **quick_jvms(), "TMPDIR": str(tmp_path)}
    args = ("-m", "tests.cluster.changes", cluster.master_url, str(tmp_path), "FULL JOIN", on)
    run = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["exact"] and got["alone"] > 0 and got["vetoes"] > 0, got
    assert got["draining"][2] == 1 and got["draining"][6] == 1, got
    built = [e for e in got["events"] if "q1: index built" in e]
    started = [e for e in got["events"] if "q1: index started empty" in e]
    assert [e.split(":")[0] for e in built] == ["0"], got["events"]
    assert [e.split(":")[0] for e in started] == ["2", "6"], got["events"]
