"""The harness's exact check: an engine's output rows against DuckDB's answer, as multisets."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
import pytest

from benchmarks.harness_exact import exact_differences

pytest.importorskip("duckdb")


def _write(path: Path, rows: list[tuple[int, str]], name: str = "part-0.parquet") -> str:
    path.mkdir(parents=True, exist_ok=True)
    table = pa.table({"k": [k for k, _ in rows], "v": [v for _, v in rows]})
    pq.write_table(table, path / name)
    return str(path)


def test_rows_lacking_and_in_excess_are_counted(tmp_path: Path) -> None:
    rows = [(1, "a"), (2, "b"), (2, "b"), (3, "c")]
    streams = {"s": _write(tmp_path / "s", rows)}
    exact = "SELECT k, v FROM s WHERE k >= 2"
    # Spark's layout: a folder per batch, read without taking `batch` for a column.
    same = tmp_path / "same"
    _write(same / "batch=0", [(3, "c")])
    _write(same / "batch=1", [(2, "b"), (2, "b")])
    other = tmp_path / "other"
    _write(other / "batch=0", [(2, "b"), (3, "c"), (3, "c")])  # one (2, b) short, one (3, c) over
    size, diffs = exact_differences(
        exact, streams, {"same": str(same), "other": str(other), "none": str(tmp_path / "none")}
    )
    assert size == 3
    assert diffs == {"same": (0, 0), "other": (1, 1), "none": (3, 0)}


@pytest.mark.parametrize("kind", ["left-equi", "full-equi", "left-band", "full-band"])
def test_an_outer_shape_exact_answer_is_the_references_of_a_finished_input(
    tmp_path: Path, kind: str
) -> None:
    """`outer_exact` (an outer shape's DuckDB answer, a band's pairs by buckets) equals the
    reference executor's answer of the job over the same files, one batch each, its input
    declared finished: every row without a partner written, none late."""
    import duckdb

    from benchmarks.workloads import WORKLOADS
    from streamjoin.reference import run_reference
    from streamjoin.sql import parse_job

    [case] = [
        c for c in WORKLOADS["shapes"](str(tmp_path), "tiny") if c.name.endswith(kind + "-300s")
    ]
    assert case.final and case.exact is not None
    files = {n: sorted((Path(p)).glob("*.parquet")) for n, p in case.backlog.streams.items()}
    batches = [
        {n: pq.read_table(fs[i]).to_pylist() for n, fs in files.items()}
        for i in range(len(files["a"]))
    ]
    want = run_reference(
        parse_job(case.job.replace("{out}", "/dev/null"), kind), batches, final=True
    )
    assert not any(want.late.values())
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, path in case.backlog.streams.items():
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/*.parquet')")
    got = con.execute(case.exact).fetchall()
    alone = sum(1 for row in want.outputs["q1"] if None in row)
    assert alone > 0  # (some rows have no partner)
    assert Counter(got) == Counter(want.outputs["q1"])


@pytest.mark.parametrize("kind", ["band", "theta", "or", "bandkey", "equi"])
def test_expected_counts_without_a_nested_loop_equal_the_predicate_as_written(
    tmp_path: Path, kind: str
) -> None:
    import duckdb
    import sqlglot

    from benchmarks.harness_exact import expected_counts
    from benchmarks.workloads import two_stream_case

    # (A band as a range, an OR by inclusion and exclusion: each counted by joins DuckDB runs
    # without a nested loop; here against the predicate as written, in a nested loop.)
    case = two_stream_case(str(tmp_path), "tiny", kind, 10.0, kind)
    counts = expected_counts(case)
    assert counts is not None
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, path in case.backlog.streams.items():
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/*.parquet')")
    on = sqlglot.transpile(case.predicate, read="spark", write="duckdb")[0]
    row = con.execute(f"SELECT count(*) FROM a AS l, b AS r WHERE {on}").fetchone()
    assert row is not None and row[0] > 0
    assert counts == {"q1": row[0]}


def test_a_predicate_only_a_nested_loop_joins_has_no_expected_count(tmp_path: Path) -> None:
    import dataclasses

    from benchmarks.harness_exact import expected_counts
    from benchmarks.workloads import two_stream_case

    case = two_stream_case(str(tmp_path), "tiny", "theta", 10.0, "theta")
    job = case.job.replace(case.predicate, "l.x * r.x < 100.0")
    assert job != case.job
    assert expected_counts(dataclasses.replace(case, job=job)) is None


@pytest.mark.parametrize("width", [0.333, 1.667, 0.05, 12.346])
def test_a_band_counted_by_ranges_keeps_the_pairs_on_its_edge(width: float) -> None:
    import random

    import duckdb

    from benchmarks.harness_exact import _counted_without_a_nested_loop

    # Doubles to the thousandth, as the workloads' x: many pairs lie on the band's edge, where
    # a - c and a + c round otherwise than a - b does.
    draw = random.Random(7)
    con = duckdb.connect()
    for name in ("a", "b"):
        values = ", ".join(f"({draw.randrange(0, 50_000) / 1000})" for _ in range(800))
        con.execute(
            f"CREATE TABLE {name} AS SELECT CAST(x AS DOUBLE) AS x FROM (VALUES {values}) AS v(x)"
        )
    on = f"abs(l.x - r.x) <= {width}"
    row = con.execute(f"SELECT count(*) FROM a AS l, b AS r WHERE {on}").fetchone()
    assert row is not None and row[0] > 0
    assert _counted_without_a_nested_loop(con, "a AS l JOIN b AS r", on) == row[0]
