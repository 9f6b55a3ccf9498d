"""Indexes on a cluster's executors (`runtime.batch.placed`): an equi and a band join probe
partitions that the executors hold across batches; a worker SIGKILLed with some of them makes
the batch run again on indexes built again from the checkpoint's state, and the output stays
exact."""

from __future__ import annotations

import re
import typing as t

from streamjoin.runtime.metrics.history import read_history
from tests.e2e.files import write_batches
from tests.spark.streams import make_batches
from tests.spark.test_joins_vs_reference import QUERIES

from .jobs import assert_exact, run_on, write_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from streamjoin.cluster import LocalCluster

BATCHES = 6


def test_indexes_on_executors_survive_a_lost_worker(cluster: LocalCluster, tmp_path: Path) -> None:
    job = write_job(tmp_path, {name: QUERIES[name] for name in ("equi_window", "band_abs")})
    batches = make_batches(5, n_batches=BATCHES, rows_per_batch=12)
    write_batches(tmp_path / "in", batches)
    ckpt = tmp_path / "ckpt"
    killed: list[bool] = []

    def kill_after_batch_two() -> bool:
        # (Both indexes are built by then, each partition on the executor its task ran on.)
        if not killed and (ckpt / "manifests" / f"{2:012d}.json").exists():
            cluster.kill_worker(1)
            killed.append(True)
        return False

    args = ("run", str(job), "--once", "--checkpoint", str(ckpt))
    run = run_on(cluster, *args, kill_when=kill_after_batch_two)
    assert killed, "the run ended before the worker could be killed"
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"{BATCHES} batches in total" in run.stdout
    assert_exact(job, batches)

    events = [e for figures in read_history(str(ckpt / "metrics")) for e in figures.events]
    built = [e for e in events if "index built" in e]
    # (The job's queries are q1, equi_window's, and q2, band_abs's.)
    assert any(e.startswith("q1: index built in 4 partitions") for e in built), events
    assert any(e.startswith("q2: index built in 1 partitions") for e in built), events
    # The killed worker's executor took its partitions with it: the batch that missed them
    # ran again on indexes built again (nothing to lose if both builds ran on the other one).
    apps = sorted((cluster.dir / "work" / "worker-1").iterdir(), key=lambda p: p.stat().st_mtime)
    lost_ids = {d.name for d in apps[-1].iterdir() if d.is_dir()}
    held = {i for e in built[:2] for i in re.findall(r"'([^']+)'", e.split("executors")[1])}
    if held & lost_ids:
        assert any("lost with an executor" in e for e in events), events
        assert len(built) > 2, events
