"""Every benchmark workload at its tiny size: every engine's result equals the reference's.

A benchmark may only compare engines that compute the same thing. Here each case of each
workload runs through our engine and its peer (in this process, on the shared session), and
each engine's output rows are compared, as a multiset, with the brute-force reference fed the
same micro-batches (file i of every stream is batch i).
"""

from __future__ import annotations

import os
import typing as t
from datetime import UTC

import pyarrow.parquet as pq
import pytest

from benchmarks.engines import run_engine
from benchmarks.harness_exact import exact_differences
from benchmarks.workloads import WORKLOADS
from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from streamjoin.model import GroupQuery, Job, Query

pytest.importorskip("duckdb")


def _batches(job: Job) -> list[dict[str, list[dict[str, object]]]]:
    """Micro-batch i: file i of every stream the job reads, as rows for the reference."""
    streams = {s.name: s.option("path") for s in job.streams}
    files = {name: sorted(os.listdir(str(path))) for name, path in streams.items()}
    count = len(next(iter(files.values())))
    batches = []
    for i in range(count):
        batch = {}
        for name, path in streams.items():
            rows = pq.read_table(os.path.join(str(path), files[name][i])).to_pylist()
            for row in rows:
                for key, value in row.items():
                    if hasattr(value, "tzinfo") and value.tzinfo is not None:
                        row[key] = value.astimezone(UTC).replace(tzinfo=None)
            batch[name] = rows
        batches.append(batch)
    return batches


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_every_engine_matches_reference(spark: SparkSession, tmp_path: Path, workload: str) -> None:
    cases = WORKLOADS[workload](str(tmp_path / "data"), "tiny")
    assert cases
    if workload == "long":
        # Its other cases differ from these only in their windows, which the two-stream
        # workloads cover: keep the suite's time for the full history and a theta case.
        cases = [c for c in cases if c.name in ("long-equi-full", "long-theta-300s")]
    if workload == "shapes":
        # (equi, band and theta over the same stream are `long`'s: the shapes it adds)
        added = ("bandkey", "-or-", "left-equi", "full-equi")
        cases = [
            c
            for c in cases
            if c.name == "shapes-product-10s"
            or (c.name.endswith("-300s") and any(k in c.name for k in added))
        ]
    if workload == "window-growth":
        # Likewise: the narrowest and the widest window, one of each predicate kind.
        cases = [c for c in cases if c.name in ("equi-1s", "band-100s")]
    for case in cases:
        job = parse_job(case.job.replace("{out}", "/unused"), case.name)
        expected = run_reference(job, _batches(job), final=case.final)
        assert not any(expected.late.values()), f"{case.name}: the backlog has late rows"
        for engine in ("streamjoin", *([case.peer] if case.peer else [])):
            if engine != "streamjoin" and case.final:
                # Spark's streaming has no end of input: the windows still open are not emitted.
                expected = run_reference(job, _batches(job))
            workdir = tmp_path / "work" / case.name / engine
            out = workdir / "out"
            text = case.job.replace("{out}", str(out))
            run = run_engine(engine, text, str(workdir), final=case.final)
            assert run.error is None, run.error
            query: Query | GroupQuery = (job.queries or job.group_queries)[0]
            columns = [item.alias for item in query.output]
            got = [tuple(r) for r in spark.read.parquet(str(out)).select(*columns).collect()]
            want = expected.outputs[query.name]
            assert want, f"{case.name}: the tiny size should produce some output"
            assert normalize(got) == normalize(want), (
                f"{case.name}/{engine}: {len(got)} rows, reference {len(want)}"
            )
            assert run.out == {query.name: len(want)}
            if case.exact is not None and (engine == "streamjoin" or not case.final):
                # The harness's check: DuckDB's answer to the published query, row for row.
                outs = {engine: str(out)}
                exact = exact_differences(case.exact, case.backlog.streams, outs, case.latest_by)
                assert exact[1] == {engine: (0, 0)}, case.name
                assert case.latest_by or exact[0] == len(want), case.name


def test_sparks_floor_reads_every_batch_and_writes_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    cases = WORKLOADS["long"](str(tmp_path / "data"), "tiny")
    [case] = [c for c in cases if c.name == "long-equi-full"]
    workdir = tmp_path / "work" / "floor"
    run = run_engine("spark-floor", case.job.replace("{out}", str(workdir / "out")), str(workdir))
    assert run.error is None, run.error
    assert len(run.batch_ms) == case.backlog.files  # (a batch a file, as the other engines)
    assert run.rows_in == case.backlog.total_rows  # (each batch's rows read, once)
    assert run.out == {"q1": 0}
