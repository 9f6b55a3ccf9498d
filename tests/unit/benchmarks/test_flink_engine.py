"""The ``flink`` engine on a tiny case: a two-way equi join within a time window, its rows
equal to the exact answer (in PyFlink's own venv; skipped, saying how to make it, without:
tests never make it). And its runner, which runs in that venv, imports PyFlink alone."""

from __future__ import annotations

import ast
import os
import sys
import typing as t

import pytest

from benchmarks.engines_flink import FLINK, LIVE_RUNNER, RUNNER
from benchmarks.flink_env import MAKE_COMMAND, flink_env_ready
from benchmarks.harness_exact import exact_differences
from benchmarks.harness_process import run_engine_process
from benchmarks.rate import run_rate
from benchmarks.workloads import LONG_SHAPES, WORKLOADS, two_stream_case

if t.TYPE_CHECKING:
    from pathlib import Path

# The job's own predicate over the Parquet backlog, in DuckDB: every pair of keys equal
# within 10 s (the backlog has no late rows, so the stream's answer is the batch join's).
EXACT = (
    "SELECT l.id AS lid, r.id AS rid, l.k AS k, r.x - l.x AS dx FROM a AS l JOIN b AS r "
    "ON l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL 10 SECOND AND l.ts + INTERVAL 10 SECOND"
)


@pytest.mark.parametrize("runner", [RUNNER, LIVE_RUNNER])
def test_the_runner_imports_the_standard_library_and_pyflink_alone(runner: str) -> None:
    with open(runner, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    tops = {name.split(".")[0] for name in names}
    assert tops - set(sys.stdlib_module_names) == {"pyflink", "py4j"}


@pytest.mark.skipif(
    not flink_env_ready(), reason=f"needs PyFlink's own venv, made by: {MAKE_COMMAND}"
)
def test_a_windowed_equi_join_equals_the_exact_answer(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    # `long`'s tiny shape: 600 rows a stream over 15 s, in 3 files.
    case = two_stream_case(
        str(tmp_path / "data"), "tiny", "equi", 10.0, "equi", LONG_SHAPES["tiny"]
    )
    workdir = str(tmp_path / "work")
    [run] = run_engine_process(FLINK, [(case.job, workdir)], time_limit=50.0)
    assert run["error"] is None, run["error"]
    assert not run["stopped_early"]
    size, diffs = exact_differences(
        EXACT, case.backlog.streams, {FLINK: os.path.join(workdir, "out")}
    )
    assert size > 100
    assert diffs[FLINK] == (0, 0)  # (rows missing, rows in excess)
    assert run["out"] == {"q1": size}
    assert run["rows_in"] == case.backlog.total_rows
    assert run["batch_ms"] == []  # (no micro-batches: no batch times)
    assert run["cpu_seconds"] is not None and run["startup_seconds"] > 0
    assert any("interval join" in edit for edit in run["sql_edits"])


@pytest.mark.skipif(
    not flink_env_ready(), reason=f"needs PyFlink's own venv, made by: {MAKE_COMMAND}"
)
def test_nexmark_q9_as_published_equals_the_exact_answer(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    # A top-1 over a join, an updating result: timed into a blackhole, then collected by its
    # key (the auction) and written as its final rows.
    [case] = [
        c for c in WORKLOADS["nexmark"](str(tmp_path / "data"), "tiny") if c.name == "nexmark-q9"
    ]
    workdir = str(tmp_path / "work")
    [run] = run_engine_process(FLINK, [(case.job, workdir)], time_limit=120.0, final=[True])
    assert run["error"] is None, run["error"]
    assert case.exact is not None
    size, diffs = exact_differences(
        case.exact, case.backlog.streams, {FLINK: os.path.join(workdir, "out")}
    )
    assert size > 100
    assert diffs[FLINK] == (0, 0)
    assert any("back-quoted" in edit for edit in run["sql_edits"])


@pytest.mark.skipif(
    not flink_env_ready(), reason=f"needs PyFlink's own venv, made by: {MAKE_COMMAND}"
)
def test_a_live_feed_is_read_as_it_comes_and_each_file_timed_by_its_results() -> None:
    pytest.importorskip("duckdb")
    # `equi`'s tiny case fed at 400 rows/s a stream for 6 s: 12 files a stream, read as they
    # land (no Spark engine: Flink has its own JVM), after a warm-up over the first files.
    report = run_rate("equi", 400, "tiny", duration=6, engines=[FLINK], in_process=True)
    (case,) = report["cases"]
    run = case["engines"][FLINK]
    assert not run.get("error"), run.get("error")
    assert case["results_agree"] is True, (case["expected"], run["out"])
    assert run["drained"] and run["files_fed"] == 2 * 12
    # Every file was read in full (Flink's own count of each file's rows) and is timed by the
    # results it completes, or by its read where it completes none: from its write, within the
    # listing's interval and a little more.
    assert run["rows_processed"] == run["rows_fed"]
    assert 0 < run["latency_p50_s"] <= run["latency_p99_s"] < 5
    assert run["batches"] == 0
