"""Batches of sourced Parquet streams whose files' footers prove every row ok run no statistics
job (`runtime.state.footers`, `StateJob.from_footers`): their counts, watermarks and results are the
job's, Spark still reports their input rows, and the automatic hash path's rows per unit are
counted from the files' keys every `streamjoin.hash.skewCheckEvery`-th batch from batch 1, or,
for a query its executor-memory index serves, by the index's probe every batch."""

from __future__ import annotations

import typing as t
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from streamjoin.plan import plan_job
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch import committing, processor
from streamjoin.runtime.batch.context import BatchContext
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.routing import router, unitcounts
from streamjoin.runtime.routing.unitcounts import InputUnitCounts
from streamjoin.runtime.sources import prefixed
from streamjoin.runtime.state.statejob import StateJob
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches
from tests.spark.harness import SLICES, read_sink, run_counting_input
from tests.spark.streams import make_batches, window_join_job

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = ("aid", "bid")

SKEW_EVERY_CONF = "streamjoin.hash.skewCheckEvery"


def _state_jobs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The batches the statistics job runs for (`StateJob.run`), as they run."""
    ran: list[int] = []
    job_run = StateJob.run

    def counted(self: StateJob, classified: t.Any, batch_id: int, *args: t.Any) -> t.Any:
        ran.append(batch_id)
        return job_run(self, classified, batch_id, *args)

    monkeypatch.setattr(StateJob, "run", counted)
    return ran


@pytest.mark.parametrize("index", [False, True], ids=["files-keys", "index-probe"])
def test_batches_their_footers_prove_ok_run_no_statistics_job_and_lose_nothing(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: bool
) -> None:
    batches = make_batches(41, n_batches=7, rows_per_batch=14, late_per_batch=0)

    def time_of(row: dict[str, object]) -> datetime:
        return t.cast("datetime", row["ts"])

    # A row a millisecond behind the watermark batch 4 starts at, which batches 1-3 (two of
    # them, 2 and 3, without a job) set: a greatest event time taken wrong from a footer would
    # let it in.
    wm = min(max(time_of(r) for b in batches[:4] for r in b[s]) for s in "AB") - timedelta(
        seconds=2
    )
    late = {"id": 10**6, "k": 1, "x": 1.0, "s": "p", "ts": wm - timedelta(milliseconds=1)}
    batches[4]["A"].append(late)
    write_batches(tmp_path / "in", batches, parquet=True)
    job = parse_job(
        window_join_job(str(tmp_path / "out"), 10, str(tmp_path / "in"), "parquet"), "<test>"
    )

    ran = _state_jobs(monkeypatch)
    jobs: list[int] = []
    count_units = unitcounts.count_units

    def count_and_keep(ctx: BatchContext, *args: t.Any) -> t.Any:
        job = count_units(ctx, *args)
        if job is not None:  # (a batch that counts nothing starts no job)
            jobs.append(ctx.batch_id)
        return job

    units: list[tuple[int, dict[str, list[tuple[int, str]]], dict[str, list[int]]]] = []
    after_batch = router.after_batch
    plan = plan_job(job)

    def after_and_keep(*args: t.Any, **kwargs: t.Any) -> t.Any:
        _, routers, _, counts, batch_id, *_ = args
        if counts:  # (the counts the routers take, however they were counted)
            sides = InputUnitCounts()
            sides.choose(spark, plan, routers)
            units.append((batch_id, dict(sides.sides), dict(counts)))
        return after_batch(*args, **kwargs)

    monkeypatch.setattr(processor, "count_units", count_and_keep)
    monkeypatch.setattr(committing, "after_batch", after_and_keep)
    conf = {SKEW_EVERY_CONF: "4", **({} if index else SLICES)}
    summary, listener = run_counting_input(spark, job, str(tmp_path / "ckpt"), len(batches), conf)

    # The state job ran for the late row (batch 4) only, and counted its rows per unit; the
    # others took their statistics from the footers. Without the index, batches 1 and 5 counted
    # the rows per unit from their files' keys; the index's probe counts them every batch.
    assert sorted(ran) == [4]
    assert jobs == ([] if index else [1, 5])
    assert [b for b, _, _ in units] == (list(range(len(batches))) if index else [1, 4, 5])
    for b, sides, counts in units:
        assert list(counts) == ["q1"]
        per_unit = [0] * len(counts["q1"])
        for src, unit in sides["q1"]:
            sp = plan.streams[src]
            assert sp.index == src
            kind = next(c.type.ddl for c in sp.stream.columns if c.name == "k")
            keys = spark.createDataFrame(
                # (No count has a row with a NULL key: it meets nothing.)
                [(r["k"],) for r in batches[b][sp.name] if not (r is late or r["k"] is None)],
                f"`{prefixed(src, 'k')}` {kind}",
            )
            for row in keys.selectExpr(f"{unit} AS u").collect():
                if row.u is not None:
                    per_unit[row.u] += 1
        assert counts["q1"] == per_unit, b
        nulls = sum(r["k"] is None for s in "AB" for r in batches[b][s])
        assert sum(per_unit) == sum(len(batches[b][s]) for s in "AB") - (b == 4) - nulls
    expected = run_reference(job, batches)
    assert normalize(read_sink(spark, job, "w", COLUMNS)) == normalize(expected.outputs["q1"])
    assert expected.outputs["q1"]
    assert summary.late == {"A": 1, "B": 0}
    assert summary.rows_in == {s: sum(len(b[s]) for b in batches) for s in ("A", "B")}
    # Spark's own figures, whether a job read the rows (batch 4 twice: its statistics, then its
    # dead letters) or the footers told them.
    want = {
        i: (len(b["A"]) + len(b["B"]), [len(b["A"]), len(b["B"])]) for i, b in enumerate(batches)
    }
    assert listener.rows == want


def test_a_bad_skew_check_interval_is_named(spark: SparkSession, tmp_path: Path) -> None:
    write_batches(tmp_path / "in", make_batches(43, n_batches=1, late_per_batch=0), parquet=True)
    job = parse_job(
        window_join_job(str(tmp_path / "out"), 10, str(tmp_path / "in"), "parquet"), "<test>"
    )
    spark.conf.set(SKEW_EVERY_CONF, "0")
    try:
        with pytest.raises(ValueError, match=f"{SKEW_EVERY_CONF} must be a whole number"):
            Engine(spark).run(job, checkpoint=str(tmp_path / "ckpt"), once=True, progress=False)
    finally:
        spark.conf.unset(SKEW_EVERY_CONF)


def test_a_batch_of_one_streams_file_runs_no_statistics_job_and_probes_in_one_task(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the engine's loop a batch that takes a file of B and none of A (A's files ran out)
    knows A has no row: its statistics come from B's footer alone and its probe reads the
    batch's rows in one task, as a batch of both streams' files does."""
    from streamjoin.runtime.batch import indexed, indexinput

    batches = make_batches(43, n_batches=6, rows_per_batch=12, late_per_batch=0)
    fed = [b if i < 2 else {"B": b["B"]} for i, b in enumerate(batches)]
    write_batches(tmp_path / "in", fed, parquet=True)
    job = parse_job(
        window_join_job(str(tmp_path / "out"), 1000, str(tmp_path / "in"), "parquet"), "<t>"
    )
    ran = _state_jobs(monkeypatch)
    planned: list[int] = []
    index_input = indexinput.index_input

    def planning(ctx: BatchContext, *args: t.Any) -> t.Any:
        planned.append(ctx.batch_id)
        return index_input(ctx, *args)

    monkeypatch.setattr(indexed, "index_input", planning)
    summary = Engine(spark).run(job, checkpoint=str(tmp_path / "ckpt"), once=True, progress=False)
    assert summary.batches == len(fed)
    assert (tmp_path / "ckpt" / "loop").exists()
    assert ran == [] and planned == []
    expected = run_reference(job, fed).outputs["q1"]
    assert expected
    assert normalize(read_sink(spark, job, "w", COLUMNS)) == normalize(expected)
