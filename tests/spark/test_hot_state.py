"""The hot copy of the live state (`runtime.state.hot`): whatever units expire and whenever
slices merge, a relation holds exactly the rows of the live units it was asked for, a stream
keeps about 3·log4(units) slices, and the files take over after `clear`."""

from __future__ import annotations

import random
import threading
import typing as t

import pytest

from streamjoin.plan import plan_job
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.runtime.state.fs import FileStore
from streamjoin.runtime.state.hot import BATCH, FAN_IN, HotState
from streamjoin.runtime.state.manifest import Manifest, StateUnit
from streamjoin.sql import parse_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

JOB = (
    "CREATE STREAM a (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
    "WITH (format = 'parquet', path = '/in/a');"
    "CREATE STREAM b (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
    "WITH (format = 'parquet', path = '/in/b');"
    "CREATE SINK o WITH (format = 'parquet', path = '/out');"
    "INSERT INTO o SELECT a.id AS x, b.id AS y FROM a JOIN b ON a.id = b.id;"
)


def _write_unit(
    spark: SparkSession, store: Checkpoint, batch: int, rows: int, stream: str = "a"
) -> StateUnit:
    """A copied unit of `stream` for `batch`: ids batch*1000 .. batch*1000 + rows - 1."""
    unit = StateUnit(stream, batch, rows, batch * 1_000_000, batch * 1_000_000 + 999_999)
    s = "ab".index(stream)
    df = spark.range(batch * 1000, batch * 1000 + rows).selectExpr(
        f"id AS s{s}_id", f"timestamp_micros({batch * 1_000_000} + id % 1000) AS s{s}_ts"
    )
    df.write.mode("overwrite").parquet(store.path(unit.path))
    return unit


def _levels(units: int) -> int:
    """Sizes of slices a stream of `units` live units may hold: 1, 4, 16, … up to `units`."""
    levels = 1
    while FAN_IN**levels <= units:
        levels += 1
    return levels


def _rows(u: StateUnit) -> list[tuple[int, int]]:
    return [(i, u.batch) for i in range(u.batch * 1000, u.batch * 1000 + u.rows)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_relation_holds_the_live_units_rows_exactly_as_units_expire_and_slices_merge(
    spark: SparkSession, tmp_path: Path, seed: int
) -> None:
    sp = plan_job(parse_job(JOB)).stream("a")
    store = Checkpoint(FileStore(spark), str(tmp_path / "ckpt"))
    hot = HotState(store, parallelism=2)
    rng = random.Random(seed)
    live: list[StateUnit] = []
    built = 0
    try:
        for batch in range(24):
            live.append(_write_unit(spark, store, batch, rng.randint(1, 40)))
            # Units expire oldest first, a few at a time (a window), or out of order.
            live = [u for u in live if rng.random() > (0.3 if u.batch < batch - 4 else 0.05)]
            prev = Manifest(batch=batch, units=list(live))
            asked = [u for u in live if rng.random() < 0.8] or live[-1:]
            if not asked:
                continue
            relation = hot.relation(spark, sp, prev, asked)
            got = {
                (r[0], r[1]) for r in spark.sql(f"SELECT s0_id, {BATCH} FROM {relation}").collect()
            }
            # Every row of an asked unit, each once, with its batch; any other row is a live
            # unit's (the caller filters those by event time).
            want = {
                (i, u.batch) for u in asked for i in range(u.batch * 1000, u.batch * 1000 + u.rows)
            }
            others = {
                (i, u.batch) for u in live for i in range(u.batch * 1000, u.batch * 1000 + u.rows)
            }
            assert want <= got <= others, batch
            total = spark.sql(f"SELECT count(*) FROM {relation}").collect()[0][0]
            assert total == len(got)  # (no row twice)
            built += sum(s.df is not None for s in hot._slices["a"] if s.parents)
            hot.end_batch()
            if batch % 3 == 0:
                hot.wait()  # (else a batch reads built merges only when the thread is quick)
            slices = len(hot._slices["a"])
            assert slices <= (FAN_IN - 1) * _levels(len(live)) + 1, (batch, slices, len(live))
        assert built, "no batch read a built merge"
        hot.clear()
        assert not hot._slices
        prev = Manifest(batch=99, units=list(live))
        relation = hot.relation(spark, sp, prev, live)
        count = spark.sql(f"SELECT count(*) FROM {relation}").collect()[0][0]
        assert count == sum(u.rows for u in live)
    finally:
        hot.clear()


def test_a_failure_is_the_caches_only_when_a_file_is_missing_and_slices_are_held(
    spark: SparkSession, tmp_path: Path
) -> None:
    sp = plan_job(parse_job(JOB)).stream("a")
    store = Checkpoint(FileStore(spark), str(tmp_path / "ckpt"))
    hot = HotState(store, parallelism=2)
    missing = RuntimeError("[FAILED_READ_FILE.FILE_NOT_EXIST] File does not exist: x.parquet")
    assert not hot.failed(missing)  # (nothing cached: the error is the batch's own)
    unit = _write_unit(spark, store, 0, 5)
    try:
        hot.relation(spark, sp, Manifest(batch=0, units=[unit]), [unit])
        assert hot.failed(missing)
        lost = RuntimeError(
            "[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_7_0 not found"
        )
        assert hot.failed(lost)
        assert not hot.failed(RuntimeError("division by zero"))
    finally:
        hot.clear()


def _count(spark: SparkSession, relation: str) -> int:
    return int(spark.sql(f"SELECT count(*) FROM {relation}").collect()[0][0])


def test_a_merge_is_built_after_the_batch_and_read_through_its_parents_until_then(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A merge is built by the builder thread once a batch ends; a batch before then reads
    its parents, and the parents go only once it is built (Spark would otherwise build it
    from their files anew, outside its cache manager)."""
    sp = plan_job(parse_job(JOB)).stream("a")
    store = Checkpoint(FileStore(spark), str(tmp_path / "ckpt"))
    hot = HotState(store, parallelism=2)
    units = [_write_unit(spark, store, b, 5) for b in range(FAN_IN)]
    prev = Manifest(batch=FAN_IN - 1, units=units)
    try:
        relation = hot.relation(spark, sp, prev, units)
        (merged,) = hot._slices["a"]  # (units of equal rows merge)
        parents = list(merged.parents)
        assert len(parents) == FAN_IN and merged.df is None
        assert all(p.view in relation for p in parents)
        assert _count(spark, relation) == 5 * FAN_IN
        hot.end_batch()
        hot.wait()
        assert merged.built() and not any(p.released for p in parents)
        relation = hot.relation(spark, sp, prev, units)
        assert merged.view in relation and not any(p.view in relation for p in parents)
        assert _count(spark, relation) == 5 * FAN_IN
        hot.end_batch()
        assert all(p.released for p in parents) and not merged.released
    finally:
        hot.clear()


def test_a_merge_built_during_a_batch_keeps_its_parents_until_the_batch_ends(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's SQL may name a merge's parents (read before it was built) while another
    stream's relation is taken: the parents stay until the batch ends."""
    plan = plan_job(parse_job(JOB))
    store = Checkpoint(FileStore(spark), str(tmp_path / "ckpt"))
    hot = HotState(store, parallelism=2)
    gate = threading.Event()
    build = hot._build

    def held(merged: t.Any) -> None:
        gate.wait()
        build(merged)

    monkeypatch.setattr(hot, "_build", held)
    a_units = [_write_unit(spark, store, b, 5) for b in range(FAN_IN)]
    b_unit = _write_unit(spark, store, FAN_IN, 3, stream="b")
    try:
        hot.relation(spark, plan.stream("a"), Manifest(batch=FAN_IN - 1, units=a_units), a_units)
        hot.end_batch()  # (the merge waits at the gate)
        prev = Manifest(batch=FAN_IN, units=[*a_units, b_unit])
        a_relation = hot.relation(spark, plan.stream("a"), prev, a_units)
        gate.set()
        hot.wait()
        b_relation = hot.relation(spark, plan.stream("b"), prev, [b_unit])
        assert _count(spark, a_relation) == 5 * FAN_IN
        assert _count(spark, b_relation) == 3
        hot.end_batch()
        (merged,) = hot._slices["a"]
        assert merged.built() and merged.parents == []
    finally:
        gate.set()
        hot.clear()


def test_a_merge_whose_build_fails_gives_its_place_back_to_its_parents(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sp = plan_job(parse_job(JOB)).stream("a")
    store = Checkpoint(FileStore(spark), str(tmp_path / "ckpt"))
    hot = HotState(store, parallelism=2)

    def fail(merged: object) -> None:
        raise RuntimeError("lost")

    monkeypatch.setattr(hot, "_build", fail)
    units = [_write_unit(spark, store, b, 5) for b in range(FAN_IN)]
    try:
        hot.relation(spark, sp, Manifest(batch=FAN_IN - 1, units=units), units)
        (merged,) = hot._slices["a"]
        hot.end_batch()
        hot.wait()
        assert merged.failed
        monkeypatch.undo()
        units.append(_write_unit(spark, store, FAN_IN, 1))
        relation = hot.relation(spark, sp, Manifest(batch=FAN_IN, units=units), units)
        assert merged not in hot._slices["a"] and not any(p.released for p in merged.parents)
        assert _count(spark, relation) == 5 * FAN_IN + 1
    finally:
        hot.clear()


def test_a_built_merge_plans_as_its_own_rows_not_its_parents(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A merge built from its parents' cached rows keeps nothing of theirs: a plan that held
    them would hold theirs in turn, merge after merge, and grow with the run (the soak
    benchmark found a driver running out of memory that way)."""
    sp = plan_job(parse_job(JOB)).stream("a")
    store = Checkpoint(FileStore(spark), str(tmp_path / "ckpt"))
    hot = HotState(store, parallelism=2)
    try:
        units: list[StateUnit] = []
        largest = 0
        for batch in range(2 * FAN_IN * FAN_IN):
            units.append(_write_unit(spark, store, batch, 10))
            prev = Manifest(batch=batch, units=list(units))
            hot.relation(spark, sp, prev, units)
            hot.end_batch()
            hot.wait()
            for s in hot._slices["a"]:
                if s.df is None or len(s.held) == 1:
                    continue
                largest = max(largest, len(s.held))
                plan = s.df._jdf.queryExecution().executedPlan().toString()
                assert "InMemoryTableScan" not in plan and "InMemoryRelation" not in plan, plan
                rows = {r[0] for r in spark.sql(f"SELECT s0_id FROM {s.view}").collect()}
                assert rows == {i for b in s.held for i in range(b * 1000, b * 1000 + 10)}
        assert largest > FAN_IN, "no merge of merges was built"
    finally:
        hot.clear()
