"""Indexes on a cluster's executors (`runtime.batch.placed`): an equi, a band, a FULL outer
and a LEFT outer join probe partitions that the executors hold across batches (the outer joins'
rows without a partner decided there), and so do a multi-way query's levels
(`runtime.multiway.chain`); a worker SIGKILLed with some of them makes the batch run again on
indexes built again from the checkpoint's state (the levels' MIRs joined again from the units),
and the output stays exact. The two-way joins' probes read each batch's rows in one task
(``BatchInput.java``: no plan of a relation of them), and the equi join's Parquet sink is
written by its probe's tasks on the executors (``BatchWrite.java``), each writing the pairs it
found."""

from __future__ import annotations

import re
import typing as t

from streamjoin.runtime.metrics.history import read_history
from tests.e2e.files import write_batches
from tests.spark.streams import make_batches
from tests.spark.test_joins_vs_reference import QUERIES, W3

from .jobs import assert_exact, batch_call_sites, event_log, run_on, write_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from streamjoin.cluster import LocalCluster

BATCHES = 6
CHAIN = (
    f"A a JOIN B b ON a.k = b.k AND {W3} JOIN A c",
    "c.k = b.k AND c.id < a.id AND c.ts BETWEEN b.ts - INTERVAL '3' SECOND AND b.ts",
)
"""A multi-way query beside the two-way ones: its two levels are indexes on the executors too."""
OUTER = ("A a FULL JOIN B b", f"a.k = b.k AND abs(a.x - b.x) <= 1.5 AND {W3}")
"""An outer join with a band in its key's rows: its rows without a partner decided on the
executors that hold them (by the probe's tasks where the batch's watermark is known before
it, else after the probe)."""
LEFT = ("A a LEFT JOIN B b", f"a.k = b.k AND {W3}")
"""An outer equi join: each row in one partition, so the probe's task on its owner decides the
partition's rows without a partner once it has marked their pairs (no job after the probe),
where the batch's watermark is known before its probe (its files' footers)."""
MATRIX = ("A a LEFT JOIN B b", f"a.k = b.k AND {W3} WITH (partitioning = 'matrix')")
"""An outer join under join-matrix: a row lies in two partitions, each copy marked apart."""


def test_indexes_on_executors_survive_a_lost_worker(cluster: LocalCluster, tmp_path: Path) -> None:
    indexed = {name: QUERIES[name] for name in ("equi_window", "band_abs")}
    queries = {**indexed, "chain": CHAIN, "unmatched": OUTER, "left_equi": LEFT}
    sinks = ("equi_window", "unmatched")
    job = write_job(tmp_path, queries, parquet=sinks, parquet_input=True)
    batches = make_batches(5, n_batches=BATCHES, rows_per_batch=12)
    write_batches(tmp_path / "in", batches, parquet=True)
    ckpt = tmp_path / "ckpt"
    killed: list[int] = []

    def kill_the_band_index_owner() -> bool:
        # Once batch 1 is in the history, kill a worker whose executor holds partitions of the
        # band join (q2's, its runs of buckets): the next batch's probe finds them nowhere.
        done = read_history(str(ckpt / "metrics")) if (ckpt / "metrics").exists() else []
        if killed or not any(f.batch >= 1 for f in done):
            return False
        owners = {
            i for f in done for e in f.events if e.startswith("q2: index built") for i in _ids(e)
        }
        worker = next(i for i in range(cluster.workers) if _executors(cluster, i) & owners)
        cluster.kill_worker(worker)
        killed.append(worker)
        return False

    args = ("run", str(job), "--once", "--checkpoint", str(ckpt))
    logs = tmp_path / "events"
    run = run_on(cluster, *args, env=event_log(logs), kill_when=kill_the_band_index_owner)
    assert run.returncode == 0 or killed, run.stderr[-3000:]
    assert killed, f"the run ended before the worker could be killed: {run.stdout[-2000:]}"
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"{BATCHES} batches in total" in run.stdout
    assert_exact(job, batches)
    # (Spark's writer names its files part-<n>-<uuid>-c000; the probe's tasks -b<batch>.)
    for folder in (tmp_path / "out" / "equi_window").glob("batch=*"):
        batch = folder.name.split("=")[1]
        names = [p.name for p in folder.glob("part-*")]
        assert names, folder
        assert all(re.fullmatch(rf"part-\d{{5}}-b{batch}\..*parquet", n) for n in names), names

    # Every batch's rows were read by a task of a `BatchInput` (the probe's own input), for
    # each two-way join (the equi, the band, the FULL and the LEFT join).
    sites = batch_call_sites(logs)
    assert sorted(sites) == list(range(BATCHES)), sites
    read = {b: sum(n for c, n in s.items() if "BatchInput.java" in c) for b, s in sites.items()}
    assert all(n >= len(indexed) + 2 for n in read.values()), (read, sites)

    events = [e for figures in read_history(str(ckpt / "metrics")) for e in figures.events]
    built = [e for e in events if "index built" in e]
    # (The job's queries are q1, equi_window's, q2, band_abs's, q3, the multi-way one, q4,
    # the FULL join, and q5, the LEFT one.)
    assert sum(e.startswith("q3: index built in 4 partitions") for e in built) >= 2, events
    for query in ("q1", "q2", "q4", "q5"):
        assert any(e.startswith(f"{query}: index built in 4 partitions") for e in built), events
    # The batch after the kill missed the band index's partitions, ran again, and every index
    # was built again on the executor left. (A killed worker's executor may live on for a moment
    # and take partitions of a rebuild with it: then the batch runs once more.)
    lost = [i for i, e in enumerate(events) if "lost with an executor" in e]
    assert lost, events
    rebuilt = [e for e in events[lost[-1] :] if "index built" in e]
    assert [e.split(":")[0] for e in rebuilt] == ["q1", "q2", "q4", "q5", "q3", "q3"], events
    left = _executors(cluster, 1 - killed[0])
    assert all(set(_ids(e)) <= left for e in rebuilt), (events, left)


def _ids(event: str) -> list[str]:
    """The executor ids an "index built … on executors [...]" event names."""
    return re.findall(r"'([^']+)'", event.split("executors", 1)[1])


def _executors(cluster: LocalCluster, worker: int) -> set[str]:
    """The ids of the executors worker `worker` started for the newest application."""
    apps = sorted((cluster.dir / "work" / f"worker-{worker}").glob("app-*"))
    return {d.name for d in apps[-1].iterdir() if d.is_dir()} if apps else set()


def test_outer_joins_probe_tasks_decide_their_rows_without_a_partner(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Where the batch's watermark is known before its probe (Parquet footers, no late row), an
    outer join whose rows each lie in one partition (the FULL join with a band in its key's
    rows, the LEFT equi join) has its rows without a partner decided by its probe's tasks on
    their owners, in the probe's job; join-matrix's LEFT join, whose rows lie in two places,
    decides them after the probe (a task per partition). Exact against the reference."""
    queries = {"unmatched": OUTER, "left_equi": LEFT, "left_matrix": MATRIX}
    job = write_job(tmp_path, queries, parquet_input=True)
    batches = make_batches(9, n_batches=BATCHES, rows_per_batch=12, late_per_batch=0)
    write_batches(tmp_path / "in", batches, parquet=True)
    logs = tmp_path / "events"
    args = ("run", str(job), "--once", "--checkpoint", str(tmp_path / "ckpt"))
    run = run_on(cluster, *args, env=event_log(logs))
    assert run.returncode == 0, run.stderr[-3000:]
    assert_exact(job, batches)
    # (Each decision after a probe is an RDD of `PlacedIndex.decide`'s: the matrix join's one
    # preserved side in each batch whose watermark decides rows, none for the other two.)
    decides = {
        b: sum(n for c, n in s.items() if c.startswith("mapPartitions at PlacedIndex.java"))
        for b, s in batch_call_sites(logs, distinct=True).items()
    }
    assert set(decides.values()) <= {0, 1} and 1 in decides.values(), decides
