"""The CLI runs a job with several queries on the two-worker cluster, exactly as in local mode,
each index spilling its rows to the executors' disks; a query that sheds probes does it on the
executors that hold its index, and its counts of what it skipped come back from them."""

from __future__ import annotations

import re
import time
import typing as t
from collections import Counter

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.metrics.history import read_history
from streamjoin.sql import parse_job
from tests.e2e.cli import streamjoin
from tests.e2e.files import read_json_rows, write_batches
from tests.spark.streams import make_batches
from tests.spark.test_joins_vs_reference import QUERIES, W3

from .jobs import COLUMNS, app_ids, assert_exact, quick_jvms, run_on, workers_of, write_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from streamjoin.cluster import LocalCluster

# One query per predicate class: equi, band, theta (windowed), and two full-history joins.
SUITE = ("equi_window", "band_abs", "inequality", "full_history_equi", "full_history_theta")
SHED = (
    "A a JOIN B b",
    f"a.k = b.k AND {W3} WITH (overload = 'shed', budget = '4', shed_count = 'exact')",
)
"""A budget of 4 rows' work a batch: the batches after the first skip probes."""
OUTER = {
    "outer_runs": ("A a FULL JOIN B b", f"b.x BETWEEN a.x + 0.4 AND a.x + 0.6 AND {W3}"),
    "outer_matrix": ("A a LEFT JOIN B b", f"a.k = b.k AND {W3} WITH (partitioning = 'matrix')"),
    "outer_or": ("A a RIGHT JOIN B b", f"(a.k = b.k OR a.id = b.id) AND {W3}"),
}
"""Outer joins whose rows have copies on several executors, each copy marked apart: a row is
alone where no copy met a partner. A keyless band's runs of buckets (four buckets of 0.2 a run:
most pairs lie in two runs, met by a copy that only probes), join-matrix's 2×2 (a row stored in
two places, one of which decides it), an OR's tables."""
RANGE = ("A a JOIN B b", f"abs(a.x - b.x) <= 0.7 AND {W3} WITH (partitioning = 'range', units = 4)")
"""Range partitioning, its bounds from a sample of the rows its partitions hold on executors."""


def test_every_predicate_class_on_the_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    job = write_job(
        tmp_path, {**{name: QUERIES[name] for name in SUITE}, "shed": SHED, **OUTER, "range": RANGE}
    )
    batches = make_batches(7, n_batches=6, rows_per_batch=10, keys=2)
    write_batches(tmp_path / "in", batches)
    before = app_ids(cluster)

    # (A memory budget of a few bytes a partition: every index spills its rows on the executors,
    # and reads them back there.)
    env = quick_jvms(**{"spark.streamjoin.state.memory": "4k"})
    run = run_on(
        cluster, "run", str(job), "--once", "--checkpoint", str(tmp_path / "ckpt"), env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "rows joined" in run.stdout
    assert_exact(job, batches, but=("shed",))

    # The shedding query wrote true pairs, each once, and counted those its skipped probes
    # would have found (`shed_count = 'exact'`): together, the exact result.
    exact = Counter(normalize(run_reference(parse_job(job.read_text()), batches).outputs["q6"]))
    got = Counter(normalize(read_json_rows(tmp_path / "out" / "shed", COLUMNS)))
    assert not got - exact, "a pair not in the exact result, or one written twice"
    shed = re.search(
        r"q6 sheds probes under overload: (\d+) new rows .* missing (\d+) pairs", run.stdout
    )
    assert shed is not None, run.stdout[-3000:]
    assert int(shed[1]) > 0, run.stdout[-3000:]
    assert sum(got.values()) + int(shed[2]) == sum(exact.values()), run.stdout[-3000:]
    events = [e for f in read_history(str(tmp_path / "ckpt" / "metrics")) for e in f.events]
    for query in ("q6", "q7", "q8", "q9", "q10"):  # (shedding, outer joins, range: the operator)
        assert any(e.startswith(f"{query}: index built") for e in events), events
    for query in ("q1", "q6"):  # (those whose probes count their rows, and send the spills)
        assert any(e.startswith(f"{query}: index over streamjoin.state.memory") for e in events)
    assert re.search(r"q10: \d+  \[range 4 ranges", run.stdout), run.stdout[-3000:]

    # It ran on the cluster, with an executor on each worker.
    deadline = time.monotonic() + 30
    while not (app_ids(cluster) - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    (app,) = app_ids(cluster) - before
    assert workers_of(cluster, app) == [0, 1]
    status = streamjoin("cluster", "status", "--dir", str(cluster.dir))
    assert status.stdout.strip() == f"{cluster.master_url}: 2 of 2 workers alive"
