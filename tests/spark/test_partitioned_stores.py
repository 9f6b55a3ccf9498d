"""Multi-way stores partitioned as CLASH's plan says: each store's units cached hash-partitioned
on its attribute, a probe that carries the attribute shuffled to the one partition it needs
(the store stays where it is), any other probe broadcast to all of them."""

from __future__ import annotations

import shutil
import tempfile
import typing as t
from pathlib import Path

import pytest

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch import sinks
from streamjoin.sql import parse_job

from .harness import SLICES, read_sink, run_batches, settings_set
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, SparkSession

QUERY = (
    "SELECT a.id AS i1, b.id AS i2, c.id AS i3 FROM A a "
    "JOIN B b ON a.k = b.k "
    "AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND "
    "JOIN C c ON b.s = c.s AND c.x < b.x + 5"
)


def _nodes(plan: t.Any) -> Iterator[t.Any]:
    """Every node of a JVM physical plan, whole-stage wrappers left out."""
    if plan.nodeName() not in ("InputAdapter",) and not plan.nodeName().startswith("WholeStage"):
        yield plan
    kids = plan.children()
    for i in range(kids.size()):
        yield from _nodes(kids.apply(i))


def _unwrapped(node: t.Any) -> t.Any:
    while node.nodeName() == "InputAdapter" or node.nodeName().startswith("WholeStage"):
        node = node.children().apply(0)
    return node


@pytest.mark.parametrize(
    ("partitioned", "route_rows"), [("true", "1"), ("true", None), ("false", "1")]
)
def test_a_probe_carrying_the_attribute_moves_alone(
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
    partitioned: str,
    route_rows: str | None,
) -> None:
    """Routed (tiny deltas routed on request): the probes that carry their store's attribute
    are shuffled to the store's cached, partitioned units, the others broadcast. By default
    deltas this small are all broadcast, and with the feature off stores are read from their
    files."""
    plans: list[t.Any] = []
    write = sinks.write_sink

    def recording(sink: t.Any, df: DataFrame, batch_id: int) -> None:
        plans.append(df._jdf.queryExecution().executedPlan())
        write(sink, df, batch_id)

    monkeypatch.setattr(sinks, "write_sink", recording)
    settings = {
        **SLICES,  # (the cached slices' stores: on the operator a query's stores are its levels)
        "streamjoin.multiway.partitioned": partitioned,
        "streamjoin.multiway.routeRows": route_rows,
        # Base stores only: the order from C probes B on s while B's store is partitioned on k
        # (as the plan says from A's side), a step that does not carry the attribute.
        "streamjoin.multiway.mirs": "false",
    }
    cached_before = _persistent(spark)
    tmp = Path(tempfile.mkdtemp(prefix="sj-parts-"))
    given = {k: v for k, v in settings.items() if v is not None}
    with settings_set(spark, given):
        text = "\n".join(stream_ddl(s) for s in "ABC")
        text += f"\nCREATE SINK o WITH (format = 'parquet', path = '{tmp / 'o'}');\n"
        job = parse_job(text + f"INSERT INTO o {QUERY};")
        batches = make_batches(5, streams=("A", "B", "C"), n_batches=3, rows_per_batch=10, keys=3)
        reports = run_batches(spark, job, batches, tmp / "ckpt")
        got = read_sink(spark, job, "o", ["i1", "i2", "i3"])
        assert normalize(got) == normalize(run_reference(job, batches).outputs["q1"])
        # The plan partitions each store on an attribute its probes join on.
        chosen = reports[-1].manifest.multiway["partitionings"][0][1]
        assert chosen["A"] == "k" and chosen["C"] == "s" and chosen["B"] in ("k", "s"), chosen
        routed = partitioned == "true" and route_rows == "1"
        # Every batch after the first (whose stores are empty) probes stored units.
        assert len(plans) == len(batches), plans
        for plan in plans[1:]:
            nodes = [n.nodeName() for n in _nodes(plan)]
            joins = [n for n in _nodes(plan) if n.nodeName() == "ShuffledHashJoin"]
            assert bool(joins) == routed, nodes
            assert ("BroadcastHashJoin" in nodes) or not routed, nodes
            for join in joins:
                sides = [_unwrapped(join.children().apply(i)) for i in range(2)]
                # At most the rows so far are shuffled: not at all when they are partitioned
                # alike already (rows that probed B, partitioned on k, by broadcast stay on
                # B's partitions and meet A's on b.k = a.k). The store is its cached units as
                # they lie.
                moved = [s.nodeName() in ("Exchange", "ReusedExchange") for s in sides]
                assert sum(moved) <= 1, [s.nodeName() for s in sides]
                kept = [s.toString() for s, m in zip(sides, moved, strict=True) if not m]
                assert any("InMemoryTableScan" in k for k in kept), kept
            assert ("REPARTITION_BY_NUM" in plan.toString()) == routed, plan.toString()
    shutil.rmtree(tmp, ignore_errors=True)
    # The processor released its cached units when it was done. (An earlier test's cached
    # RDDs may go meanwhile, as Spark's cleaner collects them: only new ones count.)
    assert not _persistent(spark) - cached_before
    assert not [v for v in spark.catalog.listTables() if v.name.startswith("_sj_part_")]


def _persistent(spark: SparkSession) -> set[int]:
    """The ids of the RDDs the session's context holds cached."""
    rdds = spark.sparkContext._jsc.getPersistentRDDs()
    return {int(k) for k in rdds.keySet().toArray()}
