"""MIR stores (CLASH) of the cached slices, which run multi-way joins in a run without the join
operator (``STREAMJOIN_LOCAL=off``) and for queries that shed probes: two queries sharing a
pair join probe one materialized store of it, which is filled from the stores' history when the
plan first picks it and again at a restart, and expires with its streams; results equal the
brute-force reference throughout. (On the operator, an MIR is a level's left side:
`runtime.multiway.chain`.)"""

from __future__ import annotations

import typing as t

from streamjoin.plan import plan_job
from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job

from .harness import SLICES, read_sink, run_batches, settings_set
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


def _w(x: str, y: str, s: int) -> str:
    return f"{y}.ts BETWEEN {x}.ts - INTERVAL '{s}' SECOND AND {x}.ts + INTERVAL '{s}' SECOND"


BC = f"c.k = b.k AND {_w('b', 'c', 2)}"
QUERIES = {
    "o1": f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', 2)} JOIN C c ON {BC}",
    "o2": f"B b JOIN C c ON {BC} JOIN D d ON abs(d.x - c.x) <= 1.0 AND {_w('c', 'd', 2)}",
}


def _job(tmp_path: Path) -> str:
    text = "\n".join(stream_ddl(s) for s in "ABCD") + "\n"
    for name, joins in QUERIES.items():
        ids = ", ".join(f"{a}.id AS {a}" for a in ("abc" if name == "o1" else "bcd"))
        text += f"CREATE SINK {name} WITH (format = 'parquet', path = '{tmp_path / name}');\n"
        text += f"INSERT INTO {name} SELECT {ids} FROM {joins};\n"
    return text


def test_queries_share_an_mir_store_filled_from_history_refilled_at_restarts_and_expired(
    spark: SparkSession, tmp_path: Path
) -> None:
    job = parse_job(_job(tmp_path))
    plan = plan_job(job)
    probing = {
        (mp.query.name, o.start): s.mir.slots
        for mp in plan.multiway
        for o in mp.orders
        for s in o.steps
        if s.mir is not None
    }
    # Both queries' remaining input probes the store of b ⋈ c in one step.
    assert probing == {("q1", 0): ("b", "c"), ("q2", 2): ("b", "c")}, probing
    batches = make_batches(21, streams=tuple("ABCD"), n_batches=7, keys=3)
    # Batches 0-1 run without the ILP (greedy orders: no MIR store); batch 2 picks the store
    # up and fills it from the stored rows; batch 5 starts a new processor (a restart), which
    # fills it again (an edited job may keep its streams longer than its units did).
    with settings_set(spark, SLICES):
        with settings_set(spark, {"streamjoin.multiway.optimizer": "greedy"}):
            first = run_batches(spark, job, batches[:2], tmp_path / "ckpt")
        middle = run_batches(spark, job, batches[2:5], tmp_path / "ckpt", first_batch=2)
        last = run_batches(spark, job, batches[5:], tmp_path / "ckpt", first_batch=5)
    reports = first + middle + last
    assert all(not r.manifest.mirs for r in first)
    kept = [r.manifest.mirs for r in middle + last]
    assert all(len(m) == 1 for m in kept), kept
    (units,) = kept[0].values()
    assert [u.batch for u in units] == [2] and units[0].rows > 0
    (before,), (after,) = kept[2].values(), kept[3].values()
    assert [u.batch for u in after] == [5]
    assert {u.path for u in before} <= set(last[0].manifest.dropped)
    # Units leave with their streams' windows: never all batches' units at the end.
    (final,) = kept[-1].values()
    assert final and len(final) < len(reports) - 2
    assert all(u.batch >= 2 for u in final)
    expected = run_reference(job, batches)
    for i, name in enumerate(QUERIES):
        columns = list("abc" if name == "o1" else "bcd")
        got = read_sink(spark, job, name, columns)
        want = expected.outputs[f"q{i + 1}"]
        assert want, f"{name}: the input should produce some results"
        assert normalize(got) == normalize(want), f"{name}: {len(got)} rows vs {len(want)}"
