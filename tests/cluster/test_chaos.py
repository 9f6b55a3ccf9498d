"""Chaos on the two-worker cluster: workers (with their executors) and the driver SIGKILLed at
random moments while input keeps arriving; the output stays exact.

CI runs one driver kill and two worker kills on a random seed (printed, and named by any
failure); ``STREAMJOIN_CHAOS_KILLS=20`` (or more) runs the long version (two driver kills and
six worker kills), ``STREAMJOIN_CHAOS_SEED=N`` a given seed.
"""

from __future__ import annotations

import math
import os
import random
import typing as t

from tests.e2e.chaos import ChaosConfig, Kill, chaos_seed, jvm_env, progress, run_chaos

if t.TYPE_CHECKING:
    from pathlib import Path

    from streamjoin.cluster import LocalCluster


class WorkerKills:
    """Kills a random worker every few seconds (drawn) while both are alive, and starts it again
    after a drawn pause; run r of the driver may only be killed once its share of the
    `target` worker kills has happened, so all of them happen before the last driver kill."""

    def __init__(
        self, cluster: LocalCluster, rng: random.Random, target: int, driver_kills: int
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.target = target
        self.driver_kills = driver_kills
        self.done = 0
        self.next_at: float | None = None
        self.run = -1
        self.down: dict[int, float] = {}

    def tick(self, now: float, run: int, ckpt: Path, busy: bool) -> Kill | None:
        """Restart a worker whose pause is over; kill one at the drawn moment, once the run
        is busy and both workers are up."""
        if run != self.run:
            self.run, self.next_at = run, None
        for i, back in list(self.down.items()):
            if now >= back:
                self.cluster.start_worker(i, wait=False)
                del self.down[i]
        if not busy or self.down or self.done >= self.target:
            return None
        if self.next_at is None:
            # A drawn moment after the run got busy, so that the kill hits batches under way.
            self.next_at = now + self.rng.uniform(0, 4)
        if now < self.next_at or self.cluster.alive_workers() < self.cluster.workers:
            return None
        i = self.rng.randrange(self.cluster.workers)
        started, committed = progress(ckpt)
        self.cluster.kill_worker(i)
        self.done += 1
        self.down[i] = now + self.rng.uniform(1, 5)
        self.next_at = now + self.rng.uniform(3, 10)
        return Kill(f"worker-{i}", run, round(now, 2), "busy", committed, started > committed)

    def ready(self, run: int) -> bool:
        """Whether run `run` has seen its share of the worker kills."""
        share = math.ceil(self.target * (run + 1) / self.driver_kills)
        return self.done >= min(share, self.target)


def test_workers_and_driver_killed_at_random(cluster: LocalCluster, tmp_path: Path) -> None:
    seed = chaos_seed()
    long = int(os.environ.get("STREAMJOIN_CHAOS_KILLS", "0")) >= 20
    drivers, workers = (2, 6) if long else (1, 2)
    rerun = (
        f"STREAMJOIN_CHAOS_SEED={seed}{' STREAMJOIN_CHAOS_KILLS=20' if long else ''} "
        "python3 -m pytest tests/cluster/test_chaos.py"
    )
    config = ChaosConfig(
        seed,
        drivers,
        batches=4 * (drivers + 1),
        master=cluster.master_url,
        env=jvm_env(executors=True),
        rerun=rerun,
    )
    print(f"chaos seed {seed}: {rerun}")
    more = WorkerKills(cluster, random.Random(seed + 1), workers, drivers)
    report = run_chaos(tmp_path, config, more=more)
    print(report.summary())
    targets = [k.target.split("-")[0] for k in report.kills]
    assert targets.count("driver") == drivers
    assert targets.count("worker") == workers
    assert report.batches == config.batches
