"""The harness's exact check: an engine's output rows against DuckDB's answer, as multisets."""

from __future__ import annotations

import typing as t

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
import pytest

from benchmarks.harness_exact import exact_differences

if t.TYPE_CHECKING:
    from pathlib import Path

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
