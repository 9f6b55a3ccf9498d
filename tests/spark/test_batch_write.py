"""A probe's pairs written into a Parquet sink by the probe's own tasks (``BatchWrite.java``):
the same rows and files as Spark's writer, a batch run again replaces its files, and sinks the
direct write does not serve go through Spark's writer."""

from __future__ import annotations

import shutil
import typing as t
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch import indexed as indexed_module
from streamjoin.runtime.engine import Engine
from streamjoin.sql import parse_job

from .harness import read_sink, run_batches
from .streams import make_batches, stream_ddl
from .test_indexed import _as_planned, indexed  # noqa: F401 - the fixture, by name

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.model import Job

ON = "a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND"
SELECT = "a.id AS aid, b.id AS bid, a.x + b.x AS xs, a.s AS s"
COLUMNS = ("aid", "bid", "xs", "s")
SINKS = {
    "plain": "",
    "gzip": ", compression = 'gzip'",
    # (An option of Spark's writer, not of Parquet's: Spark writes this sink.)
    "capped": ", maxRecordsPerFile = '3'",
}


def _files(sink: Path, batch: int) -> list[str]:
    return sorted(p.name for p in (sink / f"batch={batch}").iterdir())


def _job(tmp_path: Path, sinks: t.Mapping[str, str], monkeypatch: pytest.MonkeyPatch) -> Job:
    """A query per sink (name → its options), each run with every batch's rows as foreachBatch
    hands them over, in one task: the probe makes the query's rows itself (`BatchInput`), the
    pairs the direct write takes."""
    monkeypatch.setattr(indexed_module, "two_way_one_task", lambda *_: True)
    monkeypatch.setattr(indexed_module, "one_task", lambda *_: True)
    _as_planned(monkeypatch)
    parts = [stream_ddl("A"), stream_ddl("B")]
    for name, options in sinks.items():
        path = tmp_path / name
        parts.append(f"CREATE SINK {name} WITH (format = 'parquet', path = '{path}'{options});")
        parts.append(f"INSERT INTO {name} SELECT {SELECT} FROM A a JOIN B b ON {ON};")
    return parse_job("\n".join(parts))


@pytest.mark.usefixtures("indexed")
def test_a_probe_writes_its_pairs_into_each_parquet_sink_and_a_batch_run_again_replaces_them(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _job(tmp_path, SINKS, monkeypatch)
    batches = make_batches(17, n_batches=5, rows_per_batch=12, keys=3)
    batches[0]["B"] = []  # (a batch without pairs: its file still carries the columns)
    # (Each query its own join: a join the three shared would split its rows among them.)
    spark.conf.set("streamjoin.share", "false")
    processor = Engine(spark).processor(job, str(tmp_path / "ckpt"))
    try:
        run_batches(spark, job, batches[:4], Path("/unused"), processor=processor)
        # Batch 3 again: its files are replaced, not added to, whatever the directory held.
        done = tmp_path / "plain" / "batch=3"
        shutil.copy(done / "part-00000-b3.snappy.parquet", done / "part-00007-stray.parquet")
        run_batches(spark, job, batches[3:4], Path("/unused"), first_batch=3, processor=processor)
        run_batches(spark, job, batches[4:], Path("/unused"), first_batch=4, processor=processor)
    finally:
        processor.close()
        spark.conf.unset("streamjoin.share")

    expected = run_reference(job, batches)
    for i, name in enumerate(SINKS, start=1):
        got = read_sink(spark, job, name, COLUMNS)
        want = expected.outputs[f"q{i}"]
        assert normalize(got) == normalize(want), f"{name}: {len(got)} rows, want {len(want)}"
    plain, gzip, capped = (tmp_path / name for name in SINKS)
    for batch in range(5):
        # One file of the probe's one task, under its final name, and Spark's marker.
        data = f"part-00000-b{batch}.snappy.parquet"
        assert _files(plain, batch) == sorted([data, f".{data}.crc", "_SUCCESS", "._SUCCESS.crc"])
        assert f"part-00000-b{batch}.gz.parquet" in _files(gzip, batch)
        assert not any(f"-b{batch}." in f for f in _files(capped, batch))
    empty = pq.read_table(plain / "batch=0" / "part-00000-b0.snappy.parquet")
    assert empty.num_rows == 0 and empty.column_names == list(COLUMNS)
    # The columns as Spark's writer leaves them (every one nullable), footer metadata aside.
    ours = pq.read_schema(plain / "batch=4" / "part-00000-b4.snappy.parquet")
    spark_file = next((capped / "batch=4").glob("part-*.parquet"))
    assert ours.remove_metadata() == pq.read_schema(spark_file).remove_metadata()


@pytest.mark.usefixtures("indexed")
def test_files_of_at_most_so_many_rows_are_left_to_sparks_writer(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _job(tmp_path, {"plain": ""}, monkeypatch)
    sink = tmp_path / "plain"
    batches = make_batches(19, n_batches=2, rows_per_batch=12, keys=2)
    spark.conf.set("spark.sql.files.maxRecordsPerFile", "2")
    try:
        run_batches(spark, job, batches, tmp_path / "ckpt")
    finally:
        spark.conf.unset("spark.sql.files.maxRecordsPerFile")
    want = run_reference(job, batches).outputs["q1"]
    assert normalize(read_sink(spark, job, "plain", COLUMNS)) == normalize(want)
    files = list(sink.glob("batch=1/part-*.parquet"))
    assert len(files) >= 2 and all(pq.read_metadata(f).num_rows <= 2 for f in files)
