"""Batches of sourced Parquet streams whose files' footers prove every row ok run no statistics
job (`runtime.footers`, `StateJob.from_footers`): their counts, watermarks and results are the
job's, Spark still reports their input rows, and the automatic hash path's rows per unit are
counted every `streamjoin.hash.skewCheckEvery`-th batch from batch 1."""

from __future__ import annotations

import time
import typing as t
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql.streaming.listener import StreamingQueryListener

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.statejob import SKEW_EVERY_CONF, StateJob
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches
from tests.spark.harness import read_sink
from tests.spark.streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = ("aid", "bid")


def _job(root: Path) -> str:
    streams = [
        stream_ddl(s, str(root / "in" / s)).replace(
            "WITH (format = 'json', ", "WITH (format = 'parquet', maxFilesPerTrigger = '1', "
        )
        for s in ("A", "B")
    ]
    return "\n".join(
        [
            *streams,
            f"CREATE SINK w WITH (format = 'parquet', path = '{root / 'out'}');",
            "INSERT INTO w SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON a.k = b.k "
            "AND b.ts BETWEEN a.ts - INTERVAL '10' SECOND AND a.ts + INTERVAL '10' SECOND;",
        ]
    )


class _Progress(StreamingQueryListener):
    """Spark's count of each batch's input rows, in all and per source."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[int, list[int]]] = {}

    def onQueryStarted(self, event: t.Any) -> None:  # (Spark's camel-case names)
        pass

    def onQueryProgress(self, event: t.Any) -> None:
        p = event.progress
        if p.numInputRows:
            self.rows[p.batchId] = (p.numInputRows, [s.numInputRows for s in p.sources])

    def onQueryIdle(self, event: t.Any) -> None:
        pass

    def onQueryTerminated(self, event: t.Any) -> None:
        pass


def test_batches_their_footers_prove_ok_run_no_statistics_job_and_lose_nothing(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    job = parse_job(_job(tmp_path), "<test>")

    ran: list[int] = []
    job_run = StateJob.run

    def counted(self: StateJob, classified: t.Any, batch_id: int, *args: t.Any) -> t.Any:
        ran.append(batch_id)
        return job_run(self, classified, batch_id, *args)

    monkeypatch.setattr(StateJob, "run", counted)
    listener = _Progress()
    spark.streams.addListener(listener)
    spark.conf.set(SKEW_EVERY_CONF, "4")
    try:
        summary = Engine(spark).run(job, checkpoint=str(tmp_path / "ckpt"), once=True)
        deadline = time.monotonic() + 30
        while len(listener.rows) < len(batches) and time.monotonic() < deadline:
            time.sleep(0.1)  # (Spark's listener bus delivers progress events later)
    finally:
        spark.conf.unset(SKEW_EVERY_CONF)
        spark.streams.removeListener(listener)

    # The job ran for the rows per unit (batches 1 and 5) and for the late row (batch 4);
    # batches 0, 2, 3 and 6 took their statistics from the footers.
    assert sorted(ran) == [1, 4, 5]
    expected = run_reference(job, batches)
    assert normalize(read_sink(spark, job, "w", COLUMNS)) == normalize(expected.outputs["q1"])
    assert expected.outputs["q1"]
    assert summary.late == {"A": 1, "B": 0}
    assert summary.rows_in == {s: sum(len(b[s]) for b in batches) for s in ("A", "B")}
    # Spark's own figures, whether a job read the rows or the footers told them. (Batch 4 is
    # left out: its dead letters are a second read of Spark's batch, which Spark counts twice.)
    want = {
        i: (len(b["A"]) + len(b["B"]), [len(b["A"]), len(b["B"])]) for i, b in enumerate(batches)
    }
    assert {i: n for i, n in listener.rows.items() if i != 4} == {
        i: n for i, n in want.items() if i != 4
    }


def test_a_bad_skew_check_interval_is_named(spark: SparkSession, tmp_path: Path) -> None:
    write_batches(tmp_path / "in", make_batches(43, n_batches=1, late_per_batch=0), parquet=True)
    job = parse_job(_job(tmp_path), "<test>")
    spark.conf.set(SKEW_EVERY_CONF, "0")
    try:
        with pytest.raises(ValueError, match=f"{SKEW_EVERY_CONF} must be a whole number"):
            Engine(spark).run(job, checkpoint=str(tmp_path / "ckpt"), once=True, progress=False)
    finally:
        spark.conf.unset(SKEW_EVERY_CONF)
