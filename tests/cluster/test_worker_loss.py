"""A worker SIGKILLed in the middle of a batch: Spark retries its tasks on the other worker and
the output stays exact (no row lost, none written twice by a retried task)."""

from __future__ import annotations

import time
import typing as t

from tests.e2e.files import write_batches
from tests.spark.streams import make_batches
from tests.spark.test_joins_vs_reference import QUERIES

from .jobs import app_ids, assert_exact, run_on, write_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from streamjoin.cluster import LocalCluster

BATCHES = 3


def test_worker_killed_mid_batch(cluster: LocalCluster, tmp_path: Path) -> None:
    job = write_job(
        tmp_path, {name: QUERIES[name] for name in ("equi_window", "full_history_theta")}
    )
    batches = make_batches(7, n_batches=BATCHES, rows_per_batch=10)
    write_batches(tmp_path / "in", batches)
    ckpt = tmp_path / "ckpt"
    killed: list[bool] = []

    def running(batch: int) -> bool:
        # A batch is under way once its files or offsets are logged (the engine's loop, or
        # Spark's) and until its manifest exists.
        started = (ckpt / "loop" / str(batch)).exists() or (
            ckpt / "spark" / "offsets" / str(batch)
        ).exists()
        return started and not (ckpt / "manifests" / f"{batch:012d}.json").exists()

    def kill_worker_mid_batch() -> bool:
        # From batch 1 on, when there is committed state for the retried tasks to read too.
        if not killed and any(running(b) for b in range(1, BATCHES)):
            cluster.kill_worker(1)
            killed.append(True)
        return False  # the driver runs on

    before = app_ids(cluster)
    args = ("run", str(job), "--once", "--checkpoint", str(ckpt))
    run = run_on(cluster, *args, kill_when=kill_worker_mid_batch)
    assert killed, "the run ended before the worker could be killed mid-batch"
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Lost executor" in run.stderr  # the driver saw it go while the run was on
    assert f"{BATCHES} batches in total" in run.stdout
    assert_exact(job, batches)
    # The run went on without the worker: the master saw it die and the app finish.
    states = {str(w["state"]) for w in cluster.status()["workers"]}
    assert "DEAD" in states
    deadline = time.monotonic() + 30
    while not (app_ids(cluster) - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert app_ids(cluster) - before
