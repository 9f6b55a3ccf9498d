"""The warm-up of a cold JVM (`runtime.local.warmup`): it joins samples of the job's own inputs (the
first file of each file stream, synthetic rows for other sources) in a scratch directory, never
in the job's sinks or checkpoint; it runs once per application and can be turned off; and a run
with it gives the reference result."""

from __future__ import annotations

import tempfile
import typing as t
from pathlib import Path

import pytest

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.local import warmup
from streamjoin.runtime.local.warmup import WARMUP_CONF, Warmup
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches
from tests.spark.harness import read_sink
from tests.spark.streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession


def _job(root: Path) -> str:
    streams = [
        stream_ddl(s, str(root / "in" / s)).replace("WITH (", "WITH (maxFilesPerTrigger = '1', ")
        for s in ("A", "B")
    ]
    return "\n".join(
        [
            *streams,
            f"CREATE SINK w WITH (format = 'parquet', path = '{root / 'out'}');",
            "INSERT INTO w SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON a.k = b.k "
            "AND b.ts BETWEEN a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL '5' SECOND;",
        ]
    )


@pytest.fixture
def cold(spark: SparkSession) -> Iterator[None]:
    """The shared session's application as if no warm-up had run in it."""
    app = spark.sparkContext.applicationId
    had = app in warmup._warmed
    warmup._warmed.discard(app)
    yield
    if had:
        warmup._warmed.add(app)


def _wait(w: Warmup) -> None:
    w._thread.join()


def test_the_warm_up_joins_the_first_files_in_a_scratch_directory_only(
    spark: SparkSession, tmp_path: Path, cold: None
) -> None:
    batches = make_batches(41, n_batches=3, rows_per_batch=20, keys=3)
    write_batches(tmp_path / "in", batches)
    job = parse_job(_job(tmp_path), "<test>")
    w = Warmup.start(spark, job, ["A", "B"])
    assert w is not None
    _wait(w)
    assert w.error is None
    # The first files' rows, joined by the query's own predicate: what the reference finds
    # for batch 0 alone (no watermark yet, every row of the first files is ok).
    first = run_reference(job, batches[:1]).outputs["q1"]
    assert w.rows == len(first) > 0
    scratch = Path(w.scratch)
    assert list(scratch.glob("q1/*.parquet"))
    assert not (tmp_path / "out").exists()
    w.stop()
    assert not scratch.exists()
    # Once per application: the JVM is warm now.
    assert Warmup.start(spark, job, ["A", "B"]) is None


def test_streams_the_engine_does_not_read_from_files_get_synthetic_rows(
    spark: SparkSession, tmp_path: Path, cold: None
) -> None:
    job = parse_job(_job(tmp_path), "<test>")  # (no input files at all)
    w = Warmup.start(spark, job, [])
    assert w is not None
    _wait(w)
    w.stop()
    assert w.error is None
    # Row i of both streams has k = i and ts = i seconds: each meets its twin.
    assert w.rows == warmup.SAMPLE_ROWS


def test_the_warm_up_is_off_with_the_conf(spark: SparkSession, tmp_path: Path, cold: None) -> None:
    job = parse_job(_job(tmp_path), "<test>")
    spark.conf.set(WARMUP_CONF, "false")
    try:
        assert Warmup.start(spark, job, ["A", "B"]) is None
    finally:
        spark.conf.unset(WARMUP_CONF)


def test_a_run_with_the_warm_up_gives_the_reference_result(
    spark: SparkSession, tmp_path: Path, cold: None
) -> None:
    batches = make_batches(43, n_batches=4, rows_per_batch=16)
    write_batches(tmp_path / "in", batches)
    job = parse_job(_job(tmp_path), "<test>")
    scratch = set(Path(tempfile.gettempdir()).glob("streamjoin-warmup-*"))
    Engine(spark).run(job, checkpoint=str(tmp_path / "ckpt"), once=True, progress=False)
    assert spark.sparkContext.applicationId in warmup._warmed
    got = read_sink(spark, job, "w", ("aid", "bid"))
    expected = run_reference(job, batches).outputs["q1"]
    assert expected
    assert normalize(got) == normalize(expected)
    assert set(Path(tempfile.gettempdir()).glob("streamjoin-warmup-*")) == scratch
