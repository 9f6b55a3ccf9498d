"""The engine's own micro-batch loop over file streams (`runtime.loop`): the reference's rows
and the same batches as Spark's loop, a batch that failed before its commit run again with the
files it logged, new files taken while the job runs, and Spark's loop where it must run."""

from __future__ import annotations

import threading
import time
import typing as t

import pytest

from streamjoin.errors import JobError, StreamJoinError
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.metrics.history import read_history
from streamjoin.runtime.state import batchlog
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches

from .harness import read_sink, sparks_metrics
from .streams import make_batches, window_join_job

if t.TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pyspark.sql import SparkSession

COLUMNS = ("aid", "bid")


@pytest.fixture
def loop_conf(spark: SparkSession) -> Iterator[None]:
    yield
    spark.conf.unset("streamjoin.loop")


def _run(spark: SparkSession, text: str, ckpt: Path, loop: str = "auto", **kw: t.Any) -> t.Any:
    spark.conf.set("streamjoin.loop", loop)
    kw.setdefault("once", True)
    group = spark.sparkContext.getLocalProperty("spark.jobGroup.id")
    try:
        job = parse_job(text, "<test>")
        return Engine(spark).run(job, checkpoint=str(ckpt), progress=False, **kw)
    finally:  # (the loop's jobs have a group of their own; the caller keeps its own)
        assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") == group


def _assert_reference(spark: SparkSession, text: str, batches: t.Any) -> None:
    job = parse_job(text, "<t>")
    expected = run_reference(job, batches).outputs["q1"]
    assert expected
    assert normalize(read_sink(spark, job, "w", COLUMNS)) == normalize(expected)


@pytest.mark.parametrize("parquet", [False, True], ids=["json", "parquet"])
def test_rows_and_batches_as_in_sparks_loop(
    spark: SparkSession, tmp_path: Path, loop_conf: None, parquet: bool
) -> None:
    batches = make_batches(5, n_batches=6, rows_per_batch=10)
    write_batches(tmp_path / "in", batches, parquet=parquet)
    fmt = "parquet" if parquet else "json"
    late = {}
    for loop in ("auto", "spark"):
        out, ckpt = tmp_path / f"out-{loop}", tmp_path / f"ckpt-{loop}"
        text = window_join_job(str(out), 3, str(tmp_path / "in"), fmt)
        job = parse_job(text, "<test>")
        summary = _run(spark, text, ckpt, loop)
        assert summary.batches == len(batches)  # (a file a batch, as Spark's file source)
        expected = normalize(run_reference(job, batches).outputs["q1"])
        assert expected
        assert normalize(read_sink(spark, job, "w", COLUMNS)) == expected
        assert (ckpt / "loop").exists() == (loop == "auto")
        assert (ckpt / "spark" / "offsets").exists() == (loop == "spark")
        late[loop] = summary.late
        # (The newest batch's figures in Spark's metrics system, in either loop.)
        last = read_history(str(ckpt / "metrics"))[-1]
        got = sparks_metrics(spark)
        assert got["batch"] == last.batch == len(batches) - 1
        assert got["rows_in"] == sum(last.rows_in.values()) > 0
        assert got["seconds"] == pytest.approx(last.seconds)  # (this run's, not the other's)
    # (Which rows are late follows from the batches: the same in both loops.)
    assert late["auto"] == late["spark"] == {"A": 4, "B": 4}


def test_a_batch_takes_the_rows_its_bound_allows_and_the_rest_wait(
    spark: SparkSession,
    tmp_path: Path,
    loop_conf: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    batches = make_batches(4, n_batches=6, rows_per_batch=10, late_per_batch=0)
    write_batches(tmp_path / "in", batches)

    def job(out: str) -> str:  # (no maxFilesPerTrigger: every file at once, unbounded)
        text = window_join_job(str(tmp_path / out), 3, str(tmp_path / "in"))
        return text.replace("maxFilesPerTrigger = '1', ", "")

    assert _run(spark, job("out-all"), tmp_path / "ckpt-all").batches == 1
    text = job("out")
    spark.conf.set("streamjoin.batch.maxRows", "25")
    try:
        summary = _run(spark, text, tmp_path / "ckpt")
    finally:
        spark.conf.unset("streamjoin.batch.maxRows")
    # The first batch, its rows unknown, takes each stream's oldest file; then the files of
    # 5 to 10 rows each that fit 25 rows (by each stream's bytes a row in its last batch,
    # which its rows' digits make vary a little).
    rows = [sum(f.rows_in.values()) for f in read_history(str(tmp_path / "ckpt" / "metrics"))]
    assert rows[0] == len(batches[0]["A"]) + len(batches[0]["B"])
    assert max(rows) <= 28 and sum(rows) == sum(len(r) for b in batches for r in b.values())
    assert summary.batches == len(rows) >= 5
    assert "a batch takes at most 25 input rows" in capsys.readouterr().err
    _assert_reference(spark, text, batches)


def test_a_batch_cut_short_runs_again_with_its_files(
    spark: SparkSession, tmp_path: Path, loop_conf: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batchlog, "COMPACT_EVERY", 2)
    batches = make_batches(9, n_batches=7, rows_per_batch=10)
    write_batches(tmp_path / "in", batches[:6])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    text = window_join_job(str(out), 3, str(tmp_path / "in"))

    commit = Checkpoint.commit

    def fail_at_4(self: Checkpoint, manifest: t.Any, prev: t.Any) -> None:
        if manifest.batch == 4:
            raise StreamJoinError("stopped before batch 4's commit")
        commit(self, manifest, prev)

    monkeypatch.setattr(Checkpoint, "commit", fail_at_4)
    with pytest.raises(StreamJoinError, match="batch 4"):
        _run(spark, text, ckpt)
    monkeypatch.setattr(Checkpoint, "commit", commit)
    names = sorted(p.name for p in (ckpt / "loop").iterdir())
    assert "3.read" in names and "4" in names and "0" not in names  # (compacted up to 3)
    # A file that arrives before the restart is not part of batch 4, which runs again first.
    write_batches(tmp_path / "in", batches[6:], first=6)
    summary = _run(spark, text, ckpt)
    assert summary.batches == 7
    _assert_reference(spark, text, batches)
    assert not _run(spark, text, ckpt).batches_this_run  # (nothing read twice)


# (A zero trigger, Spark's default: each batch as soon as the last ends; this loop still runs.)
@pytest.mark.parametrize("trigger", ["0.2 seconds", "0 seconds"])
def test_files_that_arrive_while_it_runs(
    spark: SparkSession, tmp_path: Path, loop_conf: None, trigger: str
) -> None:
    # (No late row and a wide window: the rows do not depend on how files fall into batches.)
    batches = make_batches(13, n_batches=5, rows_per_batch=8, late_per_batch=0)
    write_batches(tmp_path / "in", batches[:1])
    text = window_join_job(str(tmp_path / "out"), 1000, str(tmp_path / "in"))

    def feed() -> None:
        for i in range(1, len(batches)):
            time.sleep(0.6)
            # (Written aside, then moved in whole: a file is read as it is when listed.)
            write_batches(tmp_path / "aside", batches[i : i + 1], first=i)
            for name in ("A", "B"):
                done = tmp_path / "aside" / name / f"part-{i:05d}.json"
                done.rename(tmp_path / "in" / name / done.name)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        deadline = time.monotonic() + 120
        summary = None
        while time.monotonic() < deadline:
            summary = _run(spark, text, tmp_path / "ckpt", once=False, trigger=trigger, timeout=4)
            if not feeder.is_alive() and not summary.batches_this_run:
                break  # (every file was in by the run before, which read what was left)
    finally:
        feeder.join()
    # (How the files fall into batches depends on when each is listed: a stream's file may
    # come a batch before the other's. The rows do not.)
    assert summary is not None and not summary.batches_this_run and summary.batches >= 1
    assert (tmp_path / "ckpt" / "loop").exists()
    assert not (tmp_path / "ckpt" / "spark" / "offsets").exists()
    _assert_reference(spark, text, batches)


def test_sparks_loop_where_the_engines_cannot_run(
    spark: SparkSession, tmp_path: Path, loop_conf: None
) -> None:
    batches = make_batches(17, n_batches=5, rows_per_batch=8)
    write_batches(tmp_path / "in", batches[:3])
    text = window_join_job(str(tmp_path / "out"), 3, str(tmp_path / "in"))
    # An option of Spark's file source that the engine's loop does not implement.
    option = text.replace(
        "maxFilesPerTrigger = '1'", "maxFilesPerTrigger = '1', latestFirst = 'false'"
    )
    _run(spark, option, tmp_path / "ckpt-option")
    assert (tmp_path / "ckpt-option" / "spark" / "offsets").exists()
    assert not (tmp_path / "ckpt-option" / "loop").exists()
    # A checkpoint that Spark's loop started stays in it.
    ckpt = tmp_path / "ckpt"
    _run(spark, text, ckpt, "spark")
    write_batches(tmp_path / "in", batches[3:], first=3)
    summary = _run(spark, text, ckpt, "auto")
    assert summary.batches == len(batches)
    assert not (ckpt / "loop").exists()
    _assert_reference(spark, text, batches)


def test_a_directory_as_sparks_file_source_lists_it(
    spark: SparkSession, tmp_path: Path, loop_conf: None
) -> None:
    batches = make_batches(19, n_batches=4, rows_per_batch=8)
    write_batches(tmp_path / "in", batches)
    # A file in a subdirectory is read; one being copied (``._COPYING_``) or hidden is not.
    (tmp_path / "in" / "A" / "sub").mkdir()
    moved = tmp_path / "in" / "A" / "part-00002.json"
    moved.rename(tmp_path / "in" / "A" / "sub" / moved.name)
    (tmp_path / "in" / "B" / "part-00009.json._COPYING_").write_text("{not json\n")
    (tmp_path / "in" / "B" / ".part-00009.json").write_text("{not json\n")
    text = window_join_job(str(tmp_path / "out"), 3, str(tmp_path / "in"))
    ckpt = tmp_path / "ckpt"
    summary = _run(spark, text, ckpt)
    assert (ckpt / "loop").exists()
    assert summary.batches == len(batches) and not any(summary.malformed.values())
    _assert_reference(spark, text, batches)
    # Spark's loop cannot continue this checkpoint: it would read every file again.
    with pytest.raises(StreamJoinError, match="started by the engine's own micro-batch loop"):
        _run(spark, text, ckpt, "spark")
    # A directory that is not there stops the run at once, as Spark's file source does.
    missing = text.replace(str(tmp_path / "in" / "B"), str(tmp_path / "nowhere"))
    with pytest.raises(StreamJoinError, match="nowhere does not exist"):
        _run(spark, missing, tmp_path / "ckpt-missing")
    # A query Spark rejects stops the run before its first batch, its error before the
    # directory's.
    wrong = missing.replace("a.k = b.k", "no_such_function(a.k) = b.k")
    with pytest.raises(JobError, match="Spark rejects query q1"):
        _run(spark, wrong, tmp_path / "ckpt-wrong")
    wrong = text.replace("a.k = b.k", "no_such_function(a.k) = b.k")
    with pytest.raises(JobError, match="Spark rejects query q1"):
        _run(spark, wrong, tmp_path / "ckpt-wrong")
    assert not list((tmp_path / "ckpt-wrong").glob("loop/*"))
    # A column of the current time is the batch's in Spark's loop, not the run's start.
    now = text.replace(
        "maxFilesPerTrigger", "'column.s' = 'CAST(current_date() AS STRING)', maxFilesPerTrigger", 1
    )
    _run(spark, now, tmp_path / "ckpt-now")
    assert (tmp_path / "ckpt-now" / "spark" / "offsets").exists()
