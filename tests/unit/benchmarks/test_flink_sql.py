"""A job's SQL in Flink's (`benchmarks.engines_flink_sql`), without Flink: Nexmark's queries
run as the job writes them, with the edits Flink's parser and time attributes need, and the
key an updating query's rows are collected by."""

from __future__ import annotations

import typing as t
from decimal import Decimal

import pytest

from benchmarks.engines_flink_runner import apply_changes
from benchmarks.engines_flink_sql import (
    FILE_COLUMN,
    TRACE_COLUMNS,
    quote_reserved,
    translate,
    upsert_key,
    written_query,
    written_select,
)
from benchmarks.nexmark_queries import QUERIES, nexmark_job
from streamjoin.sql import parse_job

if t.TYPE_CHECKING:
    from streamjoin.model import GroupQuery, Job, Query

PATHS = {"person": "/in/person", "auction": "/in/auction", "bid": "/in/bid"}


def _job(name: str) -> tuple[str, Job]:
    text = nexmark_job(name, PATHS, "/out")
    return text, parse_job(text, "<test>")


def _query(job: Job) -> Query | GroupQuery:
    every: list[Query | GroupQuery] = [*job.queries, *job.group_queries]
    [q] = every
    return q


def test_the_select_of_the_insert_on_a_line_is_taken_as_written() -> None:
    text = "CREATE SINK a WITH (x = 1);\n\nINSERT INTO a\nSELECT 1 AS one\nFROM t;\n"
    assert written_select(text, 3) == "SELECT 1 AS one\nFROM t"
    with pytest.raises(ValueError, match="line 4"):
        written_select(text, 4)


def test_a_reserved_column_is_quoted_where_bare_and_outside_literals() -> None:
    sql = "SELECT B.dateTime, `dateTime`, 'a dateTime' AS s, dateTimeX FROM bid B"
    assert quote_reserved(sql, ["dateTime", "price"]) == (
        "SELECT B.`dateTime`, `dateTime`, 'a dateTime' AS s, dateTimeX FROM bid B"
    )
    assert quote_reserved(sql, ["price"]) == sql


@pytest.mark.parametrize("name", ["q4", "q7", "q8", "q9"])
def test_nexmark_runs_as_published_with_flinks_edits_only(name: str) -> None:
    text, job = _job(name)
    select, edits = written_query(_query(job), job, text)
    # Undo the edits: what is left is the job's own text, the published query with its edits.
    undone = select.replace("`dateTime__rt`", "dateTime").replace("`dateTime`", "dateTime")
    assert " ".join(undone.split()) == " ".join(QUERIES[name].ours.split())
    assert "dateTime back-quoted (reserved in Flink's SQL)" in edits[0]
    windows = "DESCRIPTOR(`dateTime__rt`)" in select
    assert windows == (name in ("q7", "q8"))
    assert any("window functions" in e for e in edits) == windows


def test_updating_queries_are_keyed_by_their_output_columns() -> None:
    keys = {}
    for name in ("q3", "q4", "q7", "q8", "q9", "q20"):
        _, job = _job(name)
        keys[name] = upsert_key(_query(job))
    # q4: the rollup's group (category, written as id); q9: the top-1's partition (A.id) and
    # the event-time column it is partitioned by (A.expires).
    assert keys == {
        "q3": (),
        "q4": ("id",),
        "q7": (),
        "q8": (),
        "q9": ("id", "expires"),
        "q20": (),
    }


def test_a_join_of_two_streams_is_written_from_its_parts_and_the_rest_from_the_text() -> None:
    text, job = _job("q9")
    dirs = {s: f"/csv/{s}" for s in PATHS}
    flink = translate(job, dirs, "/sinks", text)
    assert flink.keys == {"q1": ("id", "expires")}
    assert "ROW_NUMBER() OVER" in flink.selects["q1"]
    with pytest.raises(ValueError, match="run from the job's text"):
        translate(job, dirs, "/sinks")
    text, job = _job("q3")
    flink = translate(job, dirs, "/sinks")
    assert flink.keys == {}
    assert "JOIN `person` AS P" in flink.selects["q1"]


def test_printed_changes_are_applied_by_key_or_as_retractions() -> None:
    m = "changes_7"
    names = ["id", "price"]
    keyed = [
        "a log line",
        f'{m}:1> +I[{{"id":1,"price":5}}]',
        f'{m}:2> +I[{{"id":2,"price":1.5}}]',
        f'{m}:1> +U[{{"id":1,"price":9}}]',  # (an upsert: no old row)
        f'{m}:2> -D[{{"id":2,"price":1.5}}]',
    ]
    assert apply_changes(keyed, m, names, ["id"]) == [(1, 9)]
    retracted = [
        f'{m}> +I[{{"id":1,"price":5}}]',
        f'{m}> -U[{{"id":1,"price":5}}]',
        f'{m}> +U[{{"id":1,"price":2.25}}]',
    ]
    assert apply_changes(retracted, m, names, []) == [(1, Decimal("2.25"))]
    with pytest.raises(ValueError, match="without a key"):
        apply_changes(keyed, m, names, [])
    with pytest.raises(ValueError, match="another shape"):
        apply_changes([f"{m}:1> +I{{no brackets}}"], m, names, [])


def test_a_live_run_lists_its_folders_and_times_each_join_result_by_its_rows_files() -> None:
    text, job = _job("q3")
    dirs = {s: f"/feed/{s}" for s in PATHS}
    flink = translate(job, dirs, "/sinks", text, monitor="1 seconds")
    for ddl in flink.sources:
        assert "'source.monitor-interval' = '1 seconds'" in ddl
        assert f"`{FILE_COLUMN}` STRING NOT NULL METADATA FROM 'file.name' VIRTUAL" in ddl
    lf, rf, at = TRACE_COLUMNS
    select = flink.selects["q1"]
    assert f"A.`{FILE_COLUMN}` AS `{lf}`, P.`{FILE_COLUMN}` AS `{rf}`" in select
    assert f"CURRENT_TIMESTAMP, 'yyyy-MM-dd HH:mm:ss.SSS') AS `{at}`" in select
    assert any("listed for new files every 1 seconds" in e for e in flink.edits)
    # (A backlog's run is as before: no listing, no trace.)
    backlog = translate(job, dirs, "/sinks", text)
    assert FILE_COLUMN not in " ".join(backlog.sources) + backlog.selects["q1"]
    text, job = _job("q9")
    with pytest.raises(ValueError, match="q1 is not a two-way join; a live run"):
        translate(job, dirs, "/sinks", text, monitor="1 seconds")


def test_a_table_whose_columns_begin_with_an_empty_chunk_is_written_as_its_rows() -> None:
    import io

    import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]

    from benchmarks.engines_flink import write_csv

    # (A live feed's tick across the end of a replay: an empty part, then the next replay's.)
    part = pa.table(
        {
            "k": pa.array(range(5000), pa.int64()),
            "ts": pa.array(range(5000), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        }
    )
    table = pa.concat_tables([part.slice(0, 0), part])
    assert table.column("k").num_chunks == 2
    out = io.BytesIO()
    write_csv(table, out)
    lines = out.getvalue().decode().splitlines()
    assert len(lines) == 5000
    assert lines[0] == '0,"1970-01-01 00:00:00.000000"'
    assert lines[-1] == '4999,"1970-01-01 00:00:00.004999"'
