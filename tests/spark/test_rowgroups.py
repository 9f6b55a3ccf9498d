"""Groups per row of a keyed input, bounded by a column (Nexmark q4's and q9's shape): stream A
declares ``PRIMARY KEY (id)`` and each row an end ``e``; B's rows pair with an A row while
``b.ts BETWEEN a.ts AND a.e``. A GROUP BY or top-N by A's key is written when the watermark
passes the row's ``e``, in the batch the reference says, across a replay, a restart and a
final run; the join's index lets an A row go once the watermark passes its ``e``."""

from __future__ import annotations

import random
import typing as t
from datetime import timedelta

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from streamjoin.runtime.batch.indexed import index_class
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.runtime.state.fs import FileStore
from streamjoin.sql import parse_job

from .harness import replay_and_check, run_batches
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from streamjoin.model import Job
    from tests.spark.harness import Batches

KEYED = """
CREATE STREAM A (id BIGINT, k BIGINT, x DOUBLE, s STRING, ts TIMESTAMP, e TIMESTAMP,
                 WATERMARK FOR ts AS ts - INTERVAL '2' SECOND, PRIMARY KEY (id) NOT ENFORCED)
  WITH (format = 'json', path = '/unused');
"""

QUERIES = {
    "grouped": (
        "INSERT INTO g SELECT a.id AS i, a.k AS k, count(*) AS n, max(b.x) AS hx "
        "FROM A a JOIN B b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.e GROUP BY a.id, a.k;",
        ["i", "k", "n", "hx"],
    ),
    "grouped-offset": (
        "INSERT INTO g SELECT a.id AS i, count(*) AS n, min(b.ts) AS first "
        "FROM A a, B b WHERE a.k = b.k AND b.ts >= a.ts - INTERVAL '1' SECOND "
        "AND b.ts <= a.e + INTERVAL '1' SECOND GROUP BY a.id;",
        ["i", "n", "first"],
    ),
    # (Nexmark q4's shape: the groups per row rolled up, an updating result.)
    "rolled": (
        "INSERT INTO g SELECT q.k AS key, count(*) AS rows, avg(q.hx) AS mean FROM "
        "(SELECT max(b.x) AS hx, a.k AS k FROM A a, B b WHERE a.k = b.k "
        "AND b.ts BETWEEN a.ts AND a.e GROUP BY a.id, a.k) q GROUP BY q.k;",
        ["key", "rows", "mean"],
    ),
    "top": (
        "INSERT INTO g SELECT i, j, bx FROM (SELECT a.id AS i, b.id AS j, b.x AS bx, "
        "ROW_NUMBER() OVER (PARTITION BY a.id ORDER BY b.x DESC, b.id) AS rn "
        "FROM A a JOIN B b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.e) WHERE rn <= 2;",
        ["i", "j", "bx"],
    ),
}


NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


def _job(tmp_path: Path, insert: str) -> Job:
    sink = f"CREATE SINK g WITH (format = 'parquet', path = '{tmp_path / 'g'}');"
    return parse_job("\n".join([KEYED, stream_ddl("B"), sink, insert]))


def _batches(seed: int, n_batches: int) -> Batches:
    """Generated batches whose A rows end 0-6 s after their event time; some end before it
    (no pair) and some have no end."""
    rng = random.Random(seed)
    batches = make_batches(seed, n_batches=n_batches, rows_per_batch=10, keys=3)
    for batch in batches:
        for row in batch["A"]:
            ts = t.cast("t.Any", row["ts"])
            roll = rng.random()
            end = (
                None
                if roll < 0.05
                else ts + timedelta(seconds=rng.uniform(-1 if roll < 0.15 else 0, 6))
            )
            row["e"] = end
    return batches


@settings(max_examples=1, deadline=None, phases=NO_SHRINK)
@given(
    seed=st.integers(0, 10_000),
    shape=st.sampled_from(sorted(QUERIES)),
    final=st.booleans(),
)
def test_groups_per_keyed_row_close_when_the_watermark_passes_its_end(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    shape: str,
    final: bool,
) -> None:
    tmp_path = tmp_path_factory.mktemp("rowgroups")
    insert, columns = QUERIES[shape]
    job = _job(tmp_path, insert)
    # (A restart replays batch 2; groups are written before the end, the watermark having
    # passed their rows' ends: the check's count.)
    written = replay_and_check(
        spark, job, _batches(seed, 6), tmp_path / "ckpt", columns, final=final
    )
    assert written > 0


def test_the_stream_lets_a_unit_go_once_the_watermark_passes_its_rows_ends(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A's rows leave its state by ``e`` (`StreamPlan.expiry`): a unit goes once the watermark
    passes every row's ``e``; the output across a replay and a restart stays the reference's."""
    job = _job(tmp_path, QUERIES["grouped"][0])
    batches = _batches(7, 14)
    columns = QUERIES["grouped"][1]
    assert replay_and_check(spark, job, batches, tmp_path / "ckpt", columns) > 0
    manifest = Checkpoint(FileStore(spark), str(tmp_path / "ckpt")).latest()
    live = manifest.live("A")
    # (Ends are 0-6 s after event times that advance 2 s a batch: a few batches' units live.)
    assert live and all(u.bound is not None for u in live)
    assert len(live) <= 6 < len(batches), [u.batch for u in live]
    assert manifest.expired["A"] > 0


def test_the_index_lets_a_row_go_once_the_watermark_passes_its_end(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A's rows have no event-time bound (b.ts only from a.ts on), so the stream keeps them;
    the join's index drops each once the watermark passes its ``e``."""
    job = _job(tmp_path, QUERIES["grouped"][0])
    batches = _batches(5, 20)
    processor = Engine(spark).processor(job, str(tmp_path / "ckpt"))
    try:
        run_batches(spark, job, batches, tmp_path / "ckpt", processor=processor)
        (key,) = processor.indexed.builds
        cls = index_class(spark)
        assert cls is not None
        held = int(cls.rows(f"{processor.indexed._prefix}/{key}"))
    finally:
        processor.close()
    fed = sum(len(b["A"]) for b in batches)
    # (Live at the end: A's rows ending within ~8 s of the last event times, 4 batches' of
    # 20, and those behind them in arrival order; B's of the last batch. Kept, all of A's.)
    assert 0 < held < fed / 3, (held, fed)
