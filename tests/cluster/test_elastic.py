"""Elastic executors on the 2-worker cluster: a run starts with one executor, takes the second
while a backlog keeps its batches back to back, gives it back once input only trickles in,
its join operator's partitions moving without a rebuild, and its output is exact throughout."""

from __future__ import annotations

import ast
import json
import os
import re
import time
import typing as t

from streamjoin.runtime.metrics.history import read_history
from tests.e2e.files import write_batches
from tests.spark.streams import make_batches
from tests.spark.test_joins_vs_reference import QUERIES

from .jobs import assert_exact, quick_jvms, run_on, write_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from streamjoin.cluster import LocalCluster

BACKLOG, TRICKLE, MOST = 10, 4, 36
"""Batches of backlog (those in the stabilization period after the start do not count);
trickled batches at least, and at most while the second executor stays and one more (a
scale-in needs three quiet batches in a row after the period: on a machine loaded by the rest
of the suite the first two dozen trickled ones may not be quiet yet, and without batches no
decision comes)."""
SETTLE = 2
"""Seconds of the stabilization period after the start and after each change."""
PAUSE = 6.0
"""Seconds from a batch's commit to the next trickled batch's files at least: the cluster
idles. On a loaded machine a trickled batch can take seconds: the pause is then 4× the last
one's time from its files to its commit, so that its share of the interval stays below the
scale-in's 0.3."""


def _cores(cluster: LocalCluster) -> int | None:
    """The cores the master gives the running application (None: none runs)."""
    apps = cluster.status().get("activeapps", [])
    return int(apps[0]["cores"]) if apps else None


def test_executors_follow_the_load(cluster: LocalCluster, tmp_path: Path) -> None:
    job = write_job(tmp_path, {"equi_window": QUERIES["equi_window"]})
    batches = make_batches(11, n_batches=BACKLOG + MOST, rows_per_batch=20, late_per_batch=0)
    write_batches(tmp_path / "in", batches[:BACKLOG])
    staged = tmp_path / "staged"
    write_batches(staged, batches[BACKLOG:], first=BACKLOG)
    manifests = tmp_path / "ckpt" / "manifests"
    seen: list[int] = []
    fed: list[int] = []
    back_fed: list[int] = []  # (batches fed when the master first showed one core again)
    last: list[tuple[int, float]] = [(0, time.monotonic())]  # (batches committed, since when)
    took = [0.0]  # (seconds from the last trickled batch's files to its commit)
    fed_at: list[float] = []

    def committed() -> int:
        """Batches committed (a manifest per batch, named by its id)."""
        names = [p.stem for p in manifests.glob("*.json")] if manifests.exists() else []
        return max((int(n) for n in names if n.isdigit()), default=-1) + 1

    def watch() -> bool:
        cores = _cores(cluster)
        if cores is not None and (not seen or seen[-1] != cores):
            seen.append(cores)
        done = committed()
        if done != last[-1][0]:
            last.append((done, time.monotonic()))
            if fed and done >= BACKLOG + len(fed):
                took[0] = last[-1][1] - fed_at[-1]
        # The backlog done, each next batch's files PAUSE seconds after the batch before
        # committed (renamed in: never read half written). Spark may see one stream's file a
        # trigger before the other's, so a fed pair can take two batches.
        idle = time.monotonic() - last[-1][1] >= max(PAUSE, 4 * took[0])
        # (One core, two, one: a run may briefly hold two cores as it starts.)
        if seen[-3:] == [1, 2, 1] and not back_fed:
            back_fed.append(len(fed))
        # Until the executor went back, and one batch more after that to run on one core.
        after = bool(back_fed) and len(fed) > back_fed[0]
        wanted = len(fed) < MOST and (len(fed) < TRICKLE or not after)
        if done >= BACKLOG + len(fed) and wanted and idle:
            n = BACKLOG + len(fed)
            for stream in ("A", "B"):
                name = f"part-{n:05d}.json"
                os.rename(staged / stream / name, tmp_path / "in" / stream / name)
            fed.append(n)
            fed_at.append(time.monotonic())
        # Stop once every fed row is committed and a batch ran after the executor went back,
        # or (to fail on the asserts below, which say what did not happen) when all is fed.
        fed_all = len(fed) >= MOST and idle
        done_rows = processed() == recorded() == fed_rows()
        return ((len(fed) >= TRICKLE and after) or fed_all) and done_rows

    def processed() -> int:
        """Input rows the newest manifest counts (0 before the first)."""
        manifests = sorted((tmp_path / "ckpt" / "manifests").glob("*.json"))
        if not manifests:
            return 0
        totals = json.loads(manifests[-1].read_text(encoding="utf-8"))["totals"]["rows_in"]
        return int(sum(totals.values()))

    def recorded() -> int:
        """Input rows the metrics history's newest batch counts: it is written after the
        batch's manifest, so a run stopped between the two misses the last batch's figures."""
        try:
            figures = read_history(str(tmp_path / "ckpt" / "metrics"))
        except ValueError:  # (a line read while being written)
            return 0
        return int(sum(figures[-1].totals.get("rows_in", {}).values())) if figures else 0

    def fed_rows() -> int:
        return sum(len(rows) for b in batches[: BACKLOG + len(fed)] for rows in b.values())

    elastic = {"maxExecutors": 2, "stabilizationSeconds": SETTLE}
    env = quick_jvms(**{f"spark.streamjoin.elastic.{k}": v for k, v in elastic.items()})
    args = ("run", str(job), "--checkpoint", str(tmp_path / "ckpt"), "--trigger", "500ms")
    try:
        run = run_on(cluster, *args, env=env, kill_when=watch, timeout=480)
    except TimeoutError as e:
        state = (
            f"cores seen {seen}, batches fed {fed}, committed {last[-1][0]}, took {took[0]:.1f}s"
        )
        raise TimeoutError(f"{state}\n{e}") from None
    assert "executors: 1, elastic up to 2" in run.stderr, run.stderr[-3000:]
    assert "executors 1 -> 2" in run.stderr, run.stderr[-3000:]
    assert "executors 2 -> 1" in run.stderr, run.stderr[-3000:]
    # The master gave the run one core, then two, then one: executors really came and went.
    assert seen[-3:] == [1, 2, 1], seen
    assert len(fed) >= TRICKLE and processed() == fed_rows()
    # The joins' shuffles followed the cores: one task, two while there were two, then one.
    history = read_history(str(tmp_path / "ckpt" / "metrics"))
    tasks = [f.parallelism for f in history]
    assert tasks[0] == 1 and 2 in tasks and tasks[-1] == 1, tasks
    # No batch waited for state to move: the operator's new index started empty on both
    # executors beside the old one, which drained; the executor went back once its drain was
    # done, and no batch found partitions gone with it.
    events = [e for f in history for e in f.events]
    said = "\n".join(f"{f.batch}: {e}" for f in history for e in f.events)
    said += "\n" + "\n".join(line for line in run.stderr.splitlines() if "xecutors" in line)
    started = [e for e in events if "index started empty" in e]
    owners = [ast.literal_eval(re.findall(r"on executors (\[.*?\])", e)[0]) for e in started]
    assert owners and len(owners[0]) == 2 and owners[-1] == owners[0][:1], said
    assert re.search("given back after batch [0-9]+: their partitions drained", run.stderr), (
        run.stderr[-3000:]
    )
    assert not [e for e in events if "lost" in e], said
    assert_exact(job, batches[: BACKLOG + len(fed)])
