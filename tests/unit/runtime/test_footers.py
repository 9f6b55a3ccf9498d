"""What a sourced Parquet stream's files' footers tell of a batch (`runtime.state.footers`): the
least
and greatest event time over every row group and file, in microseconds, the rows and NULL event
times, whether every row is ok, and None wherever the footers cannot bound what Spark reads. No
JVM; that the least keeps every pair is `tests/spark/test_sourced_state`, that statistics taken
from them are the job's is `tests/spark/test_footer_stats`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.plan import StreamPlan, plan_job
from streamjoin.runtime.batch.intake import EVENT_TIME_RANGE
from streamjoin.runtime.state.footers import Footers, read_footers
from streamjoin.sql import parse_job

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

EPOCH_2026 = 1_767_225_600_000_000
"""2026-01-01T00:00:00Z in microseconds."""


def event_time_floor(sp: StreamPlan, files: Collection[str]) -> int | None:
    footers = read_footers(sp, files)
    return None if footers is None else footers.least


def _stream(path: Path, options: str = "") -> StreamPlan:
    job = parse_job(
        f"""
        CREATE STREAM A (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
          WITH (format = 'parquet', path = '{path}'{options});
        CREATE SINK w WITH (format = 'json', path = '/w');
        INSERT INTO w SELECT a.k AS k FROM A a JOIN A b ON a.k = b.k
          AND b.ts BETWEEN a.ts - INTERVAL '10' SECOND AND a.ts + INTERVAL '10' SECOND;
        """,
        "<test>",
    )
    return plan_job(job).stream("A")


def _write(
    path: Path, micros: Sequence[int | None], unit: str = "us", tz: str | None = "UTC"
) -> str:
    scale = {"ms": 1_000, "us": 1, "ns": 0}[unit]
    values = [None if m is None else (m // scale if scale else m * 1_000) for m in micros]
    table = pa.table(
        {
            "k": pa.array(range(len(micros)), pa.int64()),
            "ts": pa.array(values, pa.int64()).cast(pa.timestamp(unit, tz=tz)),
        }
    )
    pq.write_table(table, path, row_group_size=3)
    return f"file:{path}"


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(0, 10**12) | st.none(), min_size=1, max_size=8).filter(
            lambda xs: any(x is not None for x in xs)
        ),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from(["ms", "us", "ns"]),
)
def test_the_floor_is_the_least_event_time_of_every_file_and_row_group(
    tmp_path_factory: pytest.TempPathFactory, files: list[list[int | None]], unit: str
) -> None:
    root = tmp_path_factory.mktemp("floor")
    # Whole milliseconds: every unit holds them exactly.
    files = [[None if m is None else EPOCH_2026 + m * 1_000 for m in f] for f in files]
    paths = [_write(root / f"part-{i}.parquet", f, unit) for i, f in enumerate(files)]
    values = [m for f in files for m in f if m is not None]
    footers = read_footers(_stream(root), paths)
    assert footers is not None
    assert footers.least == min(values)
    # Nanoseconds: Spark reads them only as numbers, and the greatest of a batch would have to
    # be rounded; the footers then do not vouch for it.
    assert footers.greatest == (None if unit == "ns" else max(values))
    assert footers.nulls == sum(m is None for f in files for m in f)
    assert footers.rows == {p: len(f) for p, f in zip(paths, files, strict=True)}
    assert footers.total == sum(len(f) for f in files)


@pytest.mark.parametrize(
    ("footers", "watermark", "ok"),
    [
        (Footers({"f": 3}, 10, 20, 0), None, True),
        (Footers({"f": 3}, 10, 20, 0), 10, True),
        (Footers({"f": 3}, 10, 20, 0), 11, False),  # a row behind the watermark: late
        (Footers({"f": 3}, 10, 20, 1), None, False),  # a NULL event time: malformed
        (Footers({"f": 3}, 10, None, 0), None, False),  # the greatest not exact
        (Footers({"f": 0}, None, None, 0), 5, True),  # no rows
        # An event time outside 0001-01-01..9999-12-31: malformed.
        (Footers({"f": 3}, 10, EVENT_TIME_RANGE[1] + 1, 0), None, False),
        (Footers({"f": 3}, EVENT_TIME_RANGE[0] - 1, 10, 0), None, False),
        (Footers({"f": 3}, *EVENT_TIME_RANGE, 0), None, True),
    ],
)
def test_every_row_is_ok_only_with_no_null_and_none_behind_the_watermark(
    footers: Footers, watermark: int | None, ok: bool
) -> None:
    assert footers.all_ok(watermark) is ok


def test_no_floor_where_the_footers_cannot_bound_what_spark_reads(tmp_path: Path) -> None:
    sp = _stream(tmp_path)
    micros = [EPOCH_2026, EPOCH_2026 + 5]
    utc = _write(tmp_path / "utc.parquet", micros)
    assert event_time_floor(sp, [utc]) == EPOCH_2026
    # A local timestamp (not adjusted to UTC): Spark reads it in the session's time zone.
    assert event_time_floor(sp, [_write(tmp_path / "ntz.parquet", micros, tz=None)]) is None
    # A row group of NULL event times only (never ok rows) leaves the others' floor; a file
    # written without statistics has none.
    nulls = _write(tmp_path / "nulls.parquet", [EPOCH_2026 + 9, None, None, None, None, None])
    assert event_time_floor(sp, [nulls]) == EPOCH_2026 + 9
    bare = tmp_path / "bare.parquet"
    pq.write_table(pq.read_table(utc[len("file:") :]), bare, write_statistics=False)
    assert event_time_floor(sp, [utc, f"file:{bare}"]) is None
    # Not a local file, a file that is gone, no files at all.
    assert event_time_floor(sp, ["hdfs://nn/a/part-0.parquet"]) is None
    assert event_time_floor(sp, [f"file:{tmp_path / 'gone.parquet'}"]) is None
    assert event_time_floor(sp, []) is None
    # An event time computed from other columns, or stored under another type.
    computed = _stream(tmp_path, ", column.ts = 'k'")
    assert event_time_floor(computed, [utc]) is None
    text = tmp_path / "text.parquet"
    pq.write_table(pa.table({"k": [1], "ts": ["2026-01-01 00:00:00"]}), text)
    assert event_time_floor(sp, [f"file:{text}"]) is None


def test_a_file_is_read_by_the_name_spark_logged_decoded(tmp_path: Path) -> None:
    """Spark's logs name files decoded (``file:///a b%41#1.parquet`` for that very name): no
    second decoding, no URL fragment."""
    sp = _stream(tmp_path)
    odd = _write(tmp_path / "a b%41#1.parquet", [EPOCH_2026, EPOCH_2026 + 7])
    _write(tmp_path / "a bA#1.parquet", [EPOCH_2026 - 5])  # (what decoding twice would read)
    footers = read_footers(sp, [odd.replace("file:", "file://")])
    assert footers is not None
    assert (footers.least, footers.greatest, sum(footers.rows.values())) == (
        EPOCH_2026,
        EPOCH_2026 + 7,
        2,
    )


def test_a_stream_leaving_by_a_column_gets_its_greatest_from_the_footers(tmp_path: Path) -> None:
    """Rows that leave by ``e`` (`StreamPlan.expiry`): the footers give the unit's greatest
    ``e`` (`StateUnit.bound`), the least long when every one is NULL, and None where they cannot
    tell it (the state job then measures it)."""
    job = parse_job(
        f"""
        CREATE STREAM A (k BIGINT, ts TIMESTAMP, e TIMESTAMP,
                         WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
          WITH (format = 'parquet', path = '{tmp_path}');
        CREATE SINK w WITH (format = 'json', path = '/w');
        INSERT INTO w SELECT a.k AS k FROM A a JOIN A b ON a.k = b.k
          AND b.ts BETWEEN a.ts AND a.e;
        """,
        "<test>",
    )
    sp = plan_job(job).stream("A")
    assert sp.expiry is not None and sp.expiry.column == "e"

    def write(name: str, ends: list[int | None], unit: str = "us") -> str:
        table = pa.table(
            {
                "k": pa.array(range(len(ends)), pa.int64()),
                "ts": pa.array([EPOCH_2026] * len(ends), pa.int64()).cast(
                    pa.timestamp("us", tz="UTC")
                ),
                "e": pa.array(ends, pa.int64())
                .cast(pa.timestamp("us", tz="UTC"))
                .cast(pa.timestamp(unit, tz="UTC")),
            }
        )
        pq.write_table(table, tmp_path / name, row_group_size=2)
        return f"file:{tmp_path / name}"

    ends = [EPOCH_2026 + 5, None, EPOCH_2026 + 9, EPOCH_2026 + 1]
    footers = read_footers(sp, [write("a.parquet", ends), write("b.parquet", [None, None])])
    assert footers is not None and footers.bound == EPOCH_2026 + 9
    footers = read_footers(sp, [write("c.parquet", [None, None, None])])
    assert footers is not None and footers.bound == -(2**63)
    # (Nanoseconds: the greatest is not exact.)
    footers = read_footers(sp, [write("d.parquet", [EPOCH_2026], "ns")])
    assert footers is not None and footers.bound is None
    plain = read_footers(_stream(tmp_path), [write("e.parquet", [EPOCH_2026])])
    assert plain is not None and plain.bound is None  # (a stream without one: not read)
