"""GROUP BY window queries on Spark against the reference: each window's groups, emitted once,
in the batch the reference says, across replays, restarts and a final run."""

from __future__ import annotations

import typing as t
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.sql import parse_job

from .harness import read_sink, run_batches
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    import pytest
    from pyspark.sql import SparkSession

    from streamjoin.model import Job
    from tests.spark.harness import Batches

ITEMS = (
    "window.start AS ws, window.end AS we, count(*) AS n, sum(b.x) AS sx, min(a.x) AS lo, "
    "max(b.x) AS hi, count(DISTINCT b.s) AS ds, avg(a.x) AS ax, count(a.s) AS ns"
)
COLUMNS = ["ws", "we", "n", "sx", "lo", "hi", "ds", "ax", "ns"]


@st.composite
def grouped_query(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A GROUP BY window query over A ⋈ B on k within a time window: its INSERT and columns."""
    lo, hi = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    time = draw(st.sampled_from(["a.ts", "b.ts"]))
    size = draw(st.sampled_from([2, 3, 5]))
    slide = draw(st.sampled_from([size, 1]))
    key = draw(st.sampled_from([None, "a.k", "b.s"]))
    having = draw(st.sampled_from([None, "count(*) > 1", "max(a.x) > 3"]))
    items, columns = ITEMS, list(COLUMNS)
    group = f"window({time}, '{size} seconds', '{slide} seconds')"
    if key is not None:
        items += f", {key} AS key"
        columns.append("key")
        group += f", {key}"
    sql = (
        f"INSERT INTO g SELECT {items} FROM A a JOIN B b ON a.k = b.k AND "
        f"b.ts BETWEEN a.ts - INTERVAL '{lo}' SECOND AND a.ts + INTERVAL '{hi}' SECOND "
        f"GROUP BY {group}" + (f" HAVING {having}" if having else "") + ";"
    )
    return sql, columns


def _job(tmp_path: Path, insert: str) -> Job:
    return parse_job(
        "\n".join(
            [
                stream_ddl("A"),
                stream_ddl("B"),
                f"CREATE SINK g WITH (format = 'parquet', path = '{tmp_path / 'g'}');",
                insert,
            ]
        )
    )


def _check(spark: SparkSession, job: Job, batches: Batches, columns: list[str], final: bool) -> int:
    """The sink against the reference, each group with the batch that emitted it: a final run
    emits the windows still open in a batch of its own, after the input's last."""
    closed = run_reference(job, batches)
    want = [
        (*row, batch)
        for row, batch in zip(closed.outputs["q1"], closed.arrivals["q1"], strict=True)
    ]
    if final:
        rest = Counter(run_reference(job, batches, final=True).outputs["q1"])
        rest.subtract(Counter(closed.outputs["q1"]))
        want += [(*row, len(batches)) for row in rest.elements()]
    got = read_sink(spark, job, "g", [*columns, "batch"])
    assert normalize(got) == normalize(want)
    return len(want)


@settings(max_examples=4)
@given(seed=st.integers(0, 10_000), query=grouped_query(), final=st.booleans())
def test_windows_match_the_reference_and_close_in_its_batch(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    query: tuple[str, list[str]],
    final: bool,
) -> None:
    tmp_path = tmp_path_factory.mktemp("groups")
    job = _job(tmp_path, query[0])
    batches = make_batches(seed, n_batches=6, rows_per_batch=10, keys=3)
    ckpt = tmp_path / "ckpt"
    # Batches 0-3, then a restart that replays batch 3 and runs on.
    run_batches(spark, job, batches[:4], ckpt)
    run_batches(spark, job, batches[3:], ckpt, first_batch=3)
    if final:
        processor = Engine(spark).processor(job, str(ckpt))
        assert processor.finish() == len(batches)
    _check(spark, job, batches, query[1], final)


def test_a_final_run_emits_every_open_window_and_ends_the_checkpoint(
    spark: SparkSession, tmp_path: Path
) -> None:
    import pytest

    from streamjoin.errors import StreamJoinError

    job = _job(
        tmp_path,
        f"INSERT INTO g SELECT {ITEMS} FROM A a JOIN B b ON a.k = b.k AND "
        "b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '2' SECOND "
        "GROUP BY window(b.ts, '4 seconds');",
    )
    batches = make_batches(7, n_batches=5, rows_per_batch=10, keys=2)
    ckpt = tmp_path / "ckpt"
    run_batches(spark, job, batches, ckpt)
    before = run_reference(job, batches)
    after = run_reference(job, batches, final=True)
    assert len(after.outputs["q1"]) > len(before.outputs["q1"]) > 0
    processor = Engine(spark).processor(job, str(ckpt))
    assert processor.finish() == 5
    assert _check(spark, job, batches, COLUMNS, final=True) == len(after.outputs["q1"])
    assert processor.finish() is None  # (finished already: nothing more)
    with pytest.raises(StreamJoinError, match=r"declared finished \(--final\) at batch 5"):
        Engine(spark).processor(job, str(ckpt))
