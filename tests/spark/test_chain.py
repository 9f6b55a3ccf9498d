"""Multi-way joins on the join operator (`runtime.multiway.chain`): a chain of two-way indexes,
each level's left side the MIR of the inputs before it. Its levels are built from the streams'
units when a run starts, so a restart mid-stream (a new processor, the levels built again with
their MIRs joined from the units) stays exact; a level without an equality is a nested loop
over its live rows; rows leave each level with their windows. File streams in the engine's
loop keep their state in their own files, and a batch runs every level in one task of the
batch's own rows (``ChainProbe``)."""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.multiway.chain import ChainJoins
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.runtime.state.fs import FileStore
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches

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


@pytest.mark.parametrize("shape", sorted(JOINS))
def test_a_chain_over_file_streams_probes_every_level_in_one_task_and_stays_exact(
    spark: SparkSession, tmp_path: Path, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_file = "WITH (format = 'parquet', maxFilesPerTrigger = '1', "
    streams = [
        stream_ddl(s, str(tmp_path / "in" / s)).replace("WITH (format = 'json', ", one_file)
        for s in "ABC"
    ]
    text = "\n".join(streams)
    text += f"\nCREATE SINK o WITH (format = 'parquet', path = '{tmp_path / 'o'}');\n"
    text += f"INSERT INTO o SELECT a.id AS i1, b.id AS i2, c.id AS i3 FROM {JOINS[shape]};"
    job = parse_job(text)
    batches = make_batches(29, streams=tuple("ABC"), n_batches=6, rows_per_batch=12, keys=3)
    # A copy of an A row of batch 3 that has partners arrives in batch 5, behind the watermark:
    # late, it must meet none of the partners still in the levels.
    met = {i1 for i1, *_ in run_reference(job, batches[:5]).outputs["q1"]}
    row = next(r for r in batches[3]["A"] if r["id"] in met)
    batches[5]["A"].append({**row, "id": 10**6})
    assert 10**6 in [r["id"] for r in run_reference(job, batches).late["A"]]
    one_task: list[bool] = []
    planned = ChainJoins.batch_plans

    def spied(self: ChainJoins, *args: t.Any) -> t.Any:
        made = planned(self, *args)
        one_task.append(made is not None)
        return made

    monkeypatch.setattr(ChainJoins, "batch_plans", spied)
    ckpt = tmp_path / "ckpt"
    # (Parquet: its footers tell a batch's rows, few enough for one task.) A restart between
    # the runs builds the levels from the units, which are the streams' own files.
    write_batches(tmp_path / "in", batches[:3], parquet=True)
    Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)
    write_batches(tmp_path / "in", batches[3:], first=3, parquet=True)
    Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)
    expected = run_reference(job, batches).outputs["q1"]
    got = read_sink(spark, job, "o", ["i1", "i2", "i3"])
    assert expected, "the input should produce some results"
    assert normalize(got) == normalize(expected)
    assert one_task == [True] * len(batches)
    manifest = Checkpoint(FileStore(spark), str(ckpt)).latest()
    assert all(u.files for s in "ABC" for u in manifest.live(s))  # (nothing copied)
