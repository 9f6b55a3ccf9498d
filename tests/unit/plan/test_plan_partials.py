"""Which GROUP BY buffers fold a batch's rows per pane and key (`plan.partials`), and the SQL
that folds and merges them. Their results against the reference: tests/spark/test_aggregate.py."""

from __future__ import annotations

import dataclasses

import pytest

from streamjoin.model import SelectItem
from streamjoin.plan import plan_job
from streamjoin.plan.aggregate import GroupBuffer
from streamjoin.plan.partials import FOLDED, PartialBuffer, partial_buffer
from streamjoin.sql import parse_job
from tests.unit.plan.test_plan_aggregate import STREAMS

JOIN = "FROM A a JOIN B b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '2' SECOND"


def _buffer(select: str, group: str, having: str = "") -> GroupBuffer:
    sql = f"{STREAMS}INSERT INTO s SELECT {select}\n{JOIN}\nGROUP BY {group} {having};"
    (agg,) = plan_job(parse_job(sql)).aggregates
    return agg


def _partial(select: str, group: str, having: str = "") -> PartialBuffer | None:
    return partial_buffer(_buffer(select, group, having))


def test_counts_sums_mins_maxes_and_avgs_fold_and_merge() -> None:
    partial = _partial(
        "window.start AS ws, a.k AS k, count(*) AS n, count(b.x) AS nx, sum(b.x - a.x) AS d, "
        "min(a.x) AS lo, max(b.id) + 1 AS hi, avg(b.x) AS ax",
        "window(b.ts, '10 seconds', '5 seconds'), a.k",
        "HAVING count(*) > 1",
    )
    assert partial is not None
    # (Columns: _g0 b.ts, _g1 a.k, _g2 b.x, _g3 a.x, _g4 b.id; count(*) folded once.)
    assert partial.keys == ("_g1",)
    assert partial.parts == (
        "count(1)",
        "count(_g2)",
        "sum(_g2 - _g3)",
        "min(_g3)",
        "max(_g4)",
        "sum(CAST(_g2 AS DOUBLE))",
    )
    assert partial.select == (
        "window.start",
        "_g1",
        "SUM(_sj_p0)",
        "SUM(_sj_p1)",
        "SUM(_sj_p2)",
        "MIN(_sj_p3)",
        "MAX(_sj_p4) + 1",
        "(SUM(_sj_p5) / NULLIF(SUM(_sj_p1), 0))",
    )
    assert partial.parts[5] == "sum(CAST(_g2 AS DOUBLE))"  # (an avg sums as a double)
    assert partial.having == "SUM(_sj_p0) > 1"
    assert partial.summed == (2,)
    fold = partial.fold_sql("v", "_b")
    assert fold.startswith("SELECT max(_g0) AS _g0, _g1, count(1) AS _sj_p0")
    assert fold.endswith(
        "FROM v GROUP BY (unix_micros(_g0) - pmod(unix_micros(_g0), 5000000)), _g1, _b"
    )
    assert FOLDED == "_sj_p0"


@pytest.mark.parametrize(
    ("select", "group"),
    [
        ("count(DISTINCT b.x) AS n", "window(b.ts, '10 seconds')"),
        ("count(*) AS n", "window(b.ts, '10 seconds', '3 seconds')"),  # (3 does not divide 10)
        ("count(*) AS n", "window(b.ts, '10 seconds'), a.k % 2"),  # (a key that is no column)
        ("a.k AS k, window.end AS e", "window(b.ts, '10 seconds'), a.k"),  # (no aggregate)
    ],
)
def test_what_does_not_merge_from_partials_is_buffered_as_rows(select: str, group: str) -> None:
    assert _partial(select, group) is None


@pytest.mark.parametrize(
    "item",
    [
        "collect_list(b.x)",
        "sum(b.x) FILTER (WHERE window.start IS NOT NULL)",
        "max(b.x + count(*))",
        "sum(count(*)) OVER (ORDER BY b.ts)",
        "max(window.end)",
        "my_udaf(b.x)",
    ],
)
def test_an_aggregate_the_job_file_refuses_does_not_fold_either(item: str) -> None:
    # (The job file takes count, sum, avg, min and max only: a buffer made otherwise.)
    buffer = dataclasses.replace(
        _buffer("count(*) AS n", "window(b.ts, '10 seconds')"),
        select=(SelectItem(item, "n"),),
        columns=(("b.ts", "_g0"), ("b.x", "_g1")),
    )
    assert partial_buffer(buffer) is None


def test_a_merged_decimal_sum_is_cast_to_the_sums_type() -> None:
    partial = _partial(
        "window.end AS we, sum(CAST(b.x AS DECIMAL(10, 2))) AS sd, avg(b.x) AS ax",
        "window(b.ts, '10 seconds')",
    )
    assert partial is not None
    types = {"_sj_p0": "decimal(20,2)", "_sj_p1": "double", "_sj_p2": "bigint"}
    held = partial.held_sql("h", types)
    assert "CAST(SUM(_sj_p0) AS decimal(20,2)) AS `sd`" in held
    assert "(SUM(_sj_p1) / NULLIF(SUM(_sj_p2), 0)) AS `ax`" in held
    grouped = partial.group_sql("h", 20_000_000, 40_000_000, types)
    # (The same bounds as a close of the rows: panes by their greatest event time.)
    assert "_g0 >= timestamp_micros(10000001) AND _g0 < timestamp_micros(40000000)" in grouped
    assert "unix_micros(_sj_window_end) > 20000000" in grouped


def test_a_key_that_is_the_windows_time_column_is_its_own_greatest() -> None:
    partial = _partial("b.ts AS t, count(*) AS n", "window(b.ts, '10 seconds'), b.ts")
    assert partial is not None
    assert partial.fold_sql("v") == (
        "SELECT max(_g0) AS _g0, count(1) AS _sj_p0 FROM v "
        "GROUP BY (unix_micros(_g0) - pmod(unix_micros(_g0), 10000000)), _g0"
    )
