"""The driver dies (SIGKILL) in the middle of a batch on the cluster; a restart from the
checkpoint finishes the run and the output is exact."""

from __future__ import annotations

import typing as t

from tests.e2e.files import write_batches
from tests.spark.streams import make_batches
from tests.spark.test_joins_vs_reference import QUERIES

from .jobs import assert_exact, run_on, write_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from streamjoin.cluster import LocalCluster


def test_driver_killed_then_restarted(cluster: LocalCluster, tmp_path: Path) -> None:
    job = write_job(tmp_path, {name: QUERIES[name] for name in ("band_abs", "full_history_equi")})
    batches = make_batches(9, n_batches=3, rows_per_batch=10)
    write_batches(tmp_path / "in", batches)
    args = ("run", str(job), "--once", "--checkpoint", str(tmp_path / "ckpt"))

    # Killed after batch 1's sinks are written and before it commits: the restart replays it.
    crashed = run_on(cluster, *args, env={"STREAMJOIN_FAULT": "after-sink:1"})
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert not (tmp_path / "ckpt" / "manifests" / f"{1:012d}.json").exists()

    done = run_on(cluster, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "3 batches in total" in done.stdout
    assert_exact(job, batches)
