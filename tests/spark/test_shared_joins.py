"""Queries that run as one join with query-set bits (`plan.shared`, `plan.shared_multiway`):
each query's output is the reference's, whatever its selections, windows, other conditions and
aliases."""

from __future__ import annotations

import typing as t

from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.plan import plan_job
from streamjoin.plan.shared import candidate
from streamjoin.plan.shared_multiway import multiway_candidate
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch.processor import BatchProcessor
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.runtime.state.fs import FileStore
from streamjoin.sql import parse_job

from .harness import local_frame, read_sink, run_batches
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    import pytest
    from pyspark.sql import SparkSession

    from streamjoin.model import Job
    from streamjoin.optimizer.sharing import Candidate
    from streamjoin.plan import JobPlan
    from tests.spark.harness import Batches

LEFT = ["{l}.x > 5", "{l}.x > 3", "{l}.s = 'p'", "{l}.x BETWEEN 2 AND 6", "{l}.s IS NULL"]
RIGHT = ["{r}.x < 4", "{r}.x < 2", "{r}.s <> 'q'", "{r}.id % 2 = 0"]
PAIR = ["{l}.x + {r}.x > 9", "{l}.s = {r}.s", "abs({l}.x - {r}.x) <= 2", "{l}.id < {r}.id"]


@st.composite
def member(draw: st.DrawFn, n: int) -> str:
    """One query over A and B on the key k: its sink ``s<n>`` and INSERT."""
    la, ra = draw(st.sampled_from([("a", "b"), ("x", "y"), ("b", "a")]))
    conds = [draw(st.sampled_from([f"{la}.k = {ra}.k", f"{ra}.k = {la}.k"]))]
    lo, hi = draw(st.integers(-5, 2)), draw(st.integers(0, 5))
    if draw(st.booleans()):
        conds.append(
            f"{ra}.ts BETWEEN {la}.ts + INTERVAL '{lo}' SECOND "
            f"AND {la}.ts + INTERVAL '{max(lo, hi)}' SECOND"
        )
    for pool in (LEFT, RIGHT, PAIR):
        conds += [c.format(l=la, r=ra) for c in draw(st.sets(st.sampled_from(pool), max_size=2))]
    cols = draw(st.sampled_from([f"{la}.id AS i, {ra}.id AS j", f"{ra}.id AS i, {la}.id AS j"]))
    return f"INSERT INTO s{n} SELECT {cols} FROM A {la} JOIN B {ra} ON {' AND '.join(conds)};"


@st.composite
def three_way(draw: st.DrawFn, n: int) -> str:
    """One query over A, B and C, keyed A-B on k and B-C on k: its sink ``s<n>`` and INSERT."""
    a, b, c = draw(st.sampled_from([("a", "b", "c"), ("x", "y", "z")]))
    conds = [f"{a}.k = {b}.k", draw(st.sampled_from([f"{b}.k = {c}.k", f"{c}.k = {b}.k"]))]
    for left, right in ((a, b), (b, c)):
        lo, hi = draw(st.integers(-4, 1)), draw(st.integers(0, 4))
        conds.append(
            f"{right}.ts BETWEEN {left}.ts + INTERVAL '{lo}' SECOND "
            f"AND {left}.ts + INTERVAL '{max(lo, hi)}' SECOND"
        )
    conds += [x.format(l=a, r=b) for x in draw(st.sets(st.sampled_from(LEFT), max_size=2))]
    conds += [x.format(l=b, r=c) for x in draw(st.sets(st.sampled_from(RIGHT), max_size=1))]
    conds += [x.format(l=a, r=c) for x in draw(st.sets(st.sampled_from(PAIR), max_size=1))]
    return (
        f"INSERT INTO s{n} SELECT {a}.id AS i, {c}.id AS j FROM A {a} JOIN B {b} "
        f"ON {conds[0]} JOIN C {c} ON {' AND '.join(conds[1:])};"
    )


def _job(tmp_path: Path, inserts: list[str], streams: str = "AB") -> Job:
    sinks = [
        f"CREATE SINK s{n} WITH (format = 'parquet', path = '{tmp_path / f's{n}'}');"
        for n in range(len(inserts))
    ]
    return parse_job("\n".join([*map(stream_ddl, streams), *sinks, *inserts]))


def _run(spark: SparkSession, plan: JobPlan, batches: Batches, ckpt: Path) -> None:
    engine = Engine(spark)
    processor = BatchProcessor(spark, plan, Checkpoint(FileStore(spark), str(ckpt)))
    try:
        for i, batch in enumerate(batches):
            frames = {}
            for name, rows in batch.items():
                frames[name] = local_frame(spark, plan.job.stream(name), rows)
            processor.process(engine.unified(plan, frames), i)
    finally:
        processor.close()


def _forced(candidates: list[Candidate | None]) -> list[list[str]]:
    """Every query with a key and window class in common with another shares one join with
    it, whatever the cost model would say (`a.s = b.s` is a key too)."""
    by_key: dict[object, list[str]] = {}
    for c in candidates:
        if c is not None:
            by_key.setdefault((c.key, c.span_s is None), []).append(c.name)
    return [g for g in by_key.values() if len(g) > 1]


def _check(spark: SparkSession, job: Job, batches: Batches) -> int:
    expected = run_reference(job, batches)
    total = 0
    for q in job.queries:
        want = normalize(expected.outputs[q.name])
        assert normalize(read_sink(spark, job, q.sink, ["i", "j"])) == want, q.name
        total += len(want)
    return total


@settings(max_examples=3)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_any_queries_sharing_one_join_match_the_reference(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, seed: int, data: st.DataObject
) -> None:
    tmp_path = tmp_path_factory.mktemp("shared")
    n = data.draw(st.integers(2, 5))
    job = _job(tmp_path, [data.draw(member(i)) for i in range(n)])
    groups = _forced([candidate(qp) for qp in plan_job(job, groups=()).queries])
    plan = plan_job(job, groups=groups)
    assert sum(len(g.members) for g in plan.shared) == sum(map(len, groups))
    batches = make_batches(seed, n_batches=4, rows_per_batch=10, keys=3)
    _run(spark, plan, batches, tmp_path / "ckpt")
    _check(spark, job, batches)


def test_a_job_files_queries_share_by_the_cost_model(spark: SparkSession, tmp_path: Path) -> None:
    """Four queries over A and B on k: the three with windows of a few seconds share a join;
    the one of an hour, with its own selection, runs apart (AJoin: narrow next to wide)."""
    w = "b.ts BETWEEN a.ts - INTERVAL '{0}' {1} AND a.ts + INTERVAL '{0}' {1}"
    ab = "FROM A a JOIN B b ON"
    job = _job(
        tmp_path,
        [
            f"INSERT INTO s0 SELECT a.id AS i, b.id AS j {ab} a.k = b.k AND "
            f"{w.format(3, 'SECOND')};",
            f"INSERT INTO s1 SELECT a.id AS i, b.id AS j {ab} a.k = b.k AND a.x > 5 AND "
            f"{w.format(2, 'SECOND')};",
            f"INSERT INTO s2 SELECT b.id AS i, a.id AS j {ab} b.k = a.k AND a.x < b.x AND "
            f"{w.format(4, 'SECOND')};",
            f"INSERT INTO s3 SELECT a.id AS i, b.id AS j {ab} a.k = b.k AND b.x < 1 AND "
            f"{w.format(1, 'HOUR')};",
        ],
    )
    plan = plan_job(job)
    assert [[m.name for m in g.members] for g in plan.shared] == [["q1", "q2", "q3"]]
    assert sorted(qp.query.name for qp in plan.joins) == ["q4", plan.shared[0].name]
    batches = make_batches(51, n_batches=5, rows_per_batch=12, keys=3)
    run_batches(spark, job, batches, tmp_path / "ckpt")
    assert _check(spark, job, batches) > 0


@settings(max_examples=2)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_multiway_queries_sharing_one_join_match_the_reference(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, seed: int, data: st.DataObject
) -> None:
    tmp_path = tmp_path_factory.mktemp("shared3")
    n = data.draw(st.integers(2, 4))
    job = _job(tmp_path, [data.draw(three_way(i)) for i in range(n)], "ABC")
    groups = _forced([multiway_candidate(job, q) for q in job.queries])
    plan = plan_job(job, groups=groups)
    assert [[m.name for m in core.members] for core in plan.cores] == groups
    assert len(plan.multiway) == len(groups) + n - sum(map(len, groups)) and not plan.shared
    batches = make_batches(seed, ("A", "B", "C"), n_batches=3, rows_per_batch=8, keys=3)
    _run(spark, plan, batches, tmp_path / "ckpt")
    _check(spark, job, batches)
