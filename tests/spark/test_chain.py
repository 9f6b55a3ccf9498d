"""Multi-way joins on the join operator (`runtime.multiway.chain`): a chain of two-way indexes,
each level's left side the MIR of the inputs before it. Its levels are built from the streams'
units when a run starts, so a restart mid-stream (a new processor, the levels built again with
their MIRs joined from the units) stays exact; a level without an equality is a nested loop
over its live rows; rows leave each level with their windows."""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job

from .harness import read_sink, run_batches
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


def _w(x: str, y: str, s: int) -> str:
    return f"{y}.ts BETWEEN {x}.ts - INTERVAL '{s}' SECOND AND {x}.ts + INTERVAL '{s}' SECOND"


JOINS = {
    # keys at both levels; a selection on one input; a condition of the last level naming the
    # first input (checked where c joins the MIR of a and b)
    "keys": (
        f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', 3)} "
        f"JOIN C c ON c.k = b.k AND c.s <> a.s AND {_w('b', 'c', 2)} WHERE b.x > 1.0"
    ),
    # no equality at the second level: every live row of the level under one key
    "theta": (
        f"A a JOIN B b ON a.s = b.s AND {_w('a', 'b', 2)} "
        f"JOIN C c ON c.x < b.x AND {_w('b', 'c', 2)}"
    ),
}


@pytest.mark.parametrize("shape", sorted(JOINS))
def test_a_chain_restarted_mid_stream_builds_its_levels_from_the_units_and_stays_exact(
    spark: SparkSession, tmp_path: Path, shape: str
) -> None:
    text = "\n".join(stream_ddl(s) for s in "ABC")
    text += f"\nCREATE SINK o WITH (format = 'parquet', path = '{tmp_path / 'o'}');\n"
    text += f"INSERT INTO o SELECT a.id AS i1, b.id AS i2, c.id AS i3 FROM {JOINS[shape]};"
    job = parse_job(text)
    batches = make_batches(17, streams=tuple("ABC"), n_batches=6, rows_per_batch=12, keys=3)
    ckpt = tmp_path / "ckpt"
    reports = run_batches(spark, job, batches[:2], ckpt)
    reports += run_batches(spark, job, batches[2:4], ckpt, first_batch=2)
    reports += run_batches(spark, job, batches[4:], ckpt, first_batch=4)
    expected = run_reference(job, batches).outputs["q1"]
    got = read_sink(spark, job, "o", ["i1", "i2", "i3"])
    assert expected, "the input should produce some results"
    assert normalize(got) == normalize(expected)
    assert sum(r.late for r in reports) == sum(
        len(v) for v in run_reference(job, batches).late.values()
    )
    # Every input is windowed: its live rows are fewer than all it received.
    live = reports[-1].manifest.state_rows()
    assert live["A"] < sum(len(b.get("A", ())) for b in batches)
