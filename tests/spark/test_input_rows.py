"""Spark's count of a batch's input rows (`numInputRows`, per source too) is each row once,
however many of the batch's jobs read Spark's DataFrame: the statistics job, the joins of a
stream whose state is copied, the dead letters of late and malformed rows
(`runtime.state.inputrows.settle_input_rows`); and Spark's progress carries each batch's
figures as the engine recorded them (`runtime.metrics.sparkprogress`), whether the batch's
jobs read Spark's DataFrame or not."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch.indexed import IndexedJoins
from streamjoin.runtime.metrics import read_history, sparkprogress
from streamjoin.runtime.metrics.sparkprogress import FIELDS, values
from streamjoin.runtime.state.statejob import StateJob
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches
from tests.spark.harness import read_sink, run_counting_input
from tests.spark.streams import make_batches, stream_ddl, window_join_job

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.parametrize(("sourced", "jar"), [("true", True), ("false", True), ("true", False)])
def test_spark_counts_each_input_row_once(
    spark: SparkSession, tmp_path: Path, sourced: str, jar: bool
) -> None:
    # Late rows from batch 2 on, and two malformed lines in batch 3: their dead letters read
    # Spark's batch again; with the state copied, so do the joins, every batch.
    batches = make_batches(43, n_batches=5, rows_per_batch=10, late_per_batch=1)
    extra = {(3, "A"): ["{not json", '{"id": "x", "ts": 7'], (3, "B"): ["]"]}
    write_batches(tmp_path / "in", batches, extra_lines=extra)
    job = parse_job(
        window_join_job(str(tmp_path / "out"), 10, str(tmp_path / "in"), "json"), "<test>"
    )

    with pytest.MonkeyPatch.context() as patch:
        if not jar:  # (a driver without streamjoin's jar: observed rows, figures set from Python)
            patch.setattr(sparkprogress, "JavaClass", type("NoClass", (), {}))
        conf = {"streamjoin.state.fromSource": sourced}
        summary, listener = run_counting_input(
            spark, job, str(tmp_path / "ckpt"), len(batches), conf
        )

    expected = run_reference(job, batches)
    assert normalize(read_sink(spark, job, "w", ("aid", "bid"))) == normalize(
        expected.outputs["q1"]
    )
    assert expected.outputs["q1"]
    assert sum(summary.late.values()) >= 3
    assert summary.malformed == {"A": 2, "B": 1}
    want = {}
    for i, b in enumerate(batches):
        a, bb = (len(b[s]) + len(extra.get((i, s), [])) for s in ("A", "B"))
        want[i] = (a + bb, [a, bb])
    assert listener.rows == want
    recorded = {f.batch: values(f) for f in read_history(str(tmp_path / "ckpt" / "metrics"))}
    assert sorted(recorded) == list(range(len(batches)))
    assert listener.observed == recorded
    assert all(list(row) == list(FIELDS) for row in listener.observed.values())
    assert [listener.observed[i]["rows_in"] for i in range(len(batches))] == [
        n for n, _ in want.values()
    ]


def test_spark_counts_each_row_once_where_two_chains_read_the_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Two three-way queries, each a chain that reads Spark's batch in one task (`ChainProbe`)
    # beside the footers' count of its rows.
    batches = make_batches(
        53, streams=("A", "B", "C"), n_batches=4, rows_per_batch=8, late_per_batch=0, keys=3
    )
    write_batches(tmp_path / "in", batches, parquet=True)
    streams = "\n".join(
        stream_ddl(s, str(tmp_path / "in" / s)).replace(
            "WITH (format = 'json', ", "WITH (format = 'parquet', maxFilesPerTrigger = '1', "
        )
        for s in "ABC"
    )
    window = "BETWEEN {0}.ts - INTERVAL '5' SECOND AND {0}.ts + INTERVAL '5' SECOND"
    joins = (
        f"FROM A a JOIN B b ON a.k = b.k AND b.ts {window.format('a')} "
        f"JOIN C c ON c.k = b.k AND c.ts {window.format('b')}"
    )
    text = streams
    for sink in ("o", "p"):
        text += f"\nCREATE SINK {sink} WITH (format = 'parquet', path = '{tmp_path / sink}');"
    text += f"\nINSERT INTO o SELECT a.id AS i1, b.id AS i2, c.id AS i3 {joins};"
    text += f"\nINSERT INTO p SELECT a.id AS i1, b.id AS i2, c.id AS i3 {joins} AND a.x > 0;"
    job = parse_job(text, "<test>")
    _, listener = run_counting_input(spark, job, str(tmp_path / "ckpt"), len(batches), {})
    expected = run_reference(job, batches)
    for sink, query in (("o", "q1"), ("p", "q2")):
        got = read_sink(spark, job, sink, ("i1", "i2", "i3"))
        assert normalize(got) == normalize(expected.outputs[query]), sink
    assert expected.outputs["q1"]
    sizes = [[len(b[s]) for s in "ABC"] for b in batches]
    assert listener.rows == {i: (sum(n), n) for i, n in enumerate(sizes)}


@pytest.mark.parametrize("queries", [1, 2])
def test_spark_counts_each_row_once_where_index_probes_read_the_batch(
    spark: SparkSession, tmp_path: Path, queries: int
) -> None:
    # Parquet files whose footers prove every row on time: each index probe reads Spark's
    # batch in its own job (`indexed.IndexedJoins.reads_rows`), the only read of it; with two
    # queries, two reads, which the count must not add up.
    batches = make_batches(47, n_batches=4, rows_per_batch=10, late_per_batch=0, disorder_s=0.0)
    write_batches(tmp_path / "in", batches, parquet=True)
    text = window_join_job(str(tmp_path / "out"), 10, str(tmp_path / "in"), "parquet")
    if queries == 2:
        text += (
            f"\nCREATE SINK v WITH (format = 'parquet', path = '{tmp_path / 'v'}');\n"
            "INSERT INTO v SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b "
            "ON abs(a.x - b.x) <= 0.5 AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '4' SECOND;"
        )
    job = parse_job(text, "<test>")
    probed: list[bool] = []
    reads_rows = IndexedJoins.reads_rows

    def recorded(self: IndexedJoins, ctx: t.Any) -> bool:
        probed.append(reads_rows(self, ctx))
        return probed[-1]

    state_jobs: list[int] = []
    run = StateJob.run

    def counted(self: StateJob, classified: t.Any, batch_id: int, *args: t.Any) -> t.Any:
        state_jobs.append(batch_id)
        return run(self, classified, batch_id, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(IndexedJoins, "reads_rows", recorded)
        patch.setattr(StateJob, "run", counted)
        _, listener = run_counting_input(spark, job, str(tmp_path / "ckpt"), len(batches), {})

    # (The footers told every batch's statistics: no job of ours but the probes read it.)
    assert probed and all(probed) and not state_jobs, (probed, state_jobs)
    expected = run_reference(job, batches)
    for sink, query in (("w", "q1"), ("v", "q2"))[:queries]:
        got = read_sink(spark, job, sink, ("aid", "bid"))
        assert normalize(got) == normalize(expected.outputs[query]), sink
    sizes = [(len(b["A"]), len(b["B"])) for b in batches]
    assert listener.rows == {i: (a + b, [a, b]) for i, (a, b) in enumerate(sizes)}
