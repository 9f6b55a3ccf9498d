"""The CLI runs a job with several queries on the two-worker cluster, exactly as in local mode."""

from __future__ import annotations

import time
import typing as t

from tests.e2e.cli import streamjoin
from tests.e2e.files import write_batches
from tests.spark.streams import make_batches
from tests.spark.test_joins_vs_reference import QUERIES

from .jobs import app_ids, assert_exact, run_on, workers_of, write_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from streamjoin.cluster import LocalCluster

# One query per predicate class: equi, band, theta (windowed), and two full-history joins.
SUITE = ("equi_window", "band_abs", "inequality", "full_history_equi", "full_history_theta")


def test_every_predicate_class_on_the_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    job = write_job(tmp_path, {name: QUERIES[name] for name in SUITE})
    batches = make_batches(7, n_batches=3, rows_per_batch=10)
    write_batches(tmp_path / "in", batches)
    before = app_ids(cluster)

    run = run_on(cluster, "run", str(job), "--once", "--checkpoint", str(tmp_path / "ckpt"))
    assert run.returncode == 0, run.stderr[-3000:]
    assert "rows joined" in run.stdout
    assert_exact(job, batches)

    # It ran on the cluster, with an executor on each worker.
    deadline = time.monotonic() + 30
    while not (app_ids(cluster) - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    (app,) = app_ids(cluster) - before
    assert workers_of(cluster, app) == [0, 1]
    status = streamjoin("cluster", "status", "--dir", str(cluster.dir))
    assert status.stdout.strip() == f"{cluster.master_url}: 2 of 2 workers alive"
