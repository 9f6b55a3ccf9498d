"""GROUP BY window queries on Spark against the reference: each window's groups, emitted once,
in the batch the reference says, across replays, restarts and a final run."""

from __future__ import annotations

import typing as t

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.sql import parse_job

from .harness import read_sink, run_batches
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from streamjoin.model import Job
    from tests.spark.harness import Batches

ITEMS = (
    "window.start AS ws, window.end AS we, count(*) AS n, sum(b.x) AS sx, min(a.x) AS lo, "
    "max(b.x) AS hi, count(a.s) AS ns"
)
COLUMNS = ["ws", "we", "n", "sx", "lo", "hi", "ns"]
MORE_ITEMS = ", avg(a.x) AS ax, count(DISTINCT b.s) AS ds"
"""avg and count(DISTINCT), which a query draws apart from the others."""
MORE_COLUMNS = ["ax", "ds"]


@st.composite
def grouped_query(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A GROUP BY window query over A ⋈ B on k within a time window: its INSERT and columns."""
    lo, hi = draw(st.integers(-4, 2)), draw(st.integers(0, 4))
    time = draw(st.sampled_from(["a.ts", "b.ts"]))
    size = draw(st.sampled_from([2, 3, 5]))
    slide = draw(st.sampled_from([size, 1, 2]))  # (2 s: a slide that need not divide the size)
    key = draw(st.sampled_from([None, "a.k", "b.s", time]))  # (time: the window's own column)
    having = draw(st.sampled_from([None, "count(*) > 1", "max(a.x) > 3"]))
    items, columns = ITEMS, list(COLUMNS)
    if draw(st.booleans()):
        items += MORE_ITEMS
        columns += MORE_COLUMNS
    group = f"window({time}, '{size} seconds', '{slide} seconds')"
    if key is not None:
        items += f", {key} AS key"
        columns.append("key")
        group += f", {key}"
    sql = (
        f"INSERT INTO g SELECT {items} FROM A a JOIN B b ON a.k = b.k AND "
        f"b.ts BETWEEN a.ts + INTERVAL '{lo}' SECOND AND a.ts + INTERVAL '{max(lo, hi)}' SECOND "
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
    """The sink against the reference, each group with the batch that emitted it (a final
    run's last groups in its extra batch, ``len(batches)``)."""
    expected = run_reference(job, batches, final=final)
    want = [
        (*row, b) for row, b in zip(expected.outputs["q1"], expected.arrivals["q1"], strict=True)
    ]
    got = read_sink(spark, job, "g", [*columns, "batch"])
    assert normalize(got) == normalize(want)
    return len(want)


_BY_TIME = (
    f"INSERT INTO g SELECT {ITEMS}, b.ts AS key FROM A a JOIN B b ON a.k = b.k AND "
    "b.ts BETWEEN a.ts AND a.ts + INTERVAL '2' SECOND "
    "GROUP BY window(b.ts, '5 seconds', '2 seconds'), b.ts;"
)
"""Groups keyed by the event time itself, in 5 s windows every 2 s."""


@settings(max_examples=1)
@given(seed=st.integers(0, 10_000), query=grouped_query(), final=st.booleans())
@example(seed=5, query=(_BY_TIME, [*COLUMNS, "key"]), final=False)
def test_windows_match_the_reference_and_close_in_its_batch(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    query: tuple[str, list[str]],
    final: bool,
) -> None:
    tmp_path = tmp_path_factory.mktemp("groups")
    job = _job(tmp_path, query[0])
    batches = make_batches(seed, n_batches=5, rows_per_batch=10, keys=3)
    ckpt = tmp_path / "ckpt"
    # Batches 0-2, then a restart that replays batch 2 and runs on.
    run_batches(spark, job, batches[:3], ckpt)
    run_batches(spark, job, batches[2:], ckpt, first_batch=2)
    if final:
        processor = Engine(spark).processor(job, str(ckpt))
        assert processor.finish() == len(batches)
    _check(spark, job, batches, query[1], final)


def test_a_final_run_emits_every_open_window_and_ends_the_checkpoint(
    spark: SparkSession, tmp_path: Path
) -> None:
    from streamjoin.errors import StreamJoinError

    job = _job(
        tmp_path,
        f"INSERT INTO g SELECT {ITEMS}{MORE_ITEMS} FROM A a JOIN B b "
        "ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '2' SECOND "
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
    columns = [*COLUMNS, *MORE_COLUMNS]
    assert _check(spark, job, batches, columns, final=True) == len(after.outputs["q1"])
    assert processor.finish() is None  # (finished already: nothing more)
    with pytest.raises(StreamJoinError, match=r"declared finished \(--final\) at batch 5"):
        Engine(spark).processor(job, str(ckpt))


@st.composite
def top_query(draw: st.DrawFn) -> str:
    """A top-N over A ⋈ B: per window (or per row's instant) and key, the first N by an order
    whose last term is unique (ROW_NUMBER over ties would be arbitrary)."""
    lo, hi = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    part = draw(
        st.sampled_from(
            [
                "a.id, a.ts",
                "window(b.ts, '3 seconds')",
                "window(a.ts, '4 seconds', '2 seconds'), b.s",
            ]
        )
    )
    order = draw(st.sampled_from(["b.x DESC, b.id, a.id", "a.x, b.s DESC, a.id DESC, b.id"]))
    n = draw(st.integers(1, 3))
    return (
        f"INSERT INTO g SELECT i, j, bx FROM (SELECT a.id AS i, b.id AS j, b.x AS bx, "
        f"ROW_NUMBER() OVER (PARTITION BY {part} ORDER BY {order}) AS rn FROM A a JOIN B b "
        f"ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '{lo}' SECOND "
        f"AND a.ts + INTERVAL '{hi}' SECOND) WHERE rn <= {n};"
    )


@settings(max_examples=1)
@given(seed=st.integers(0, 10_000), insert=top_query())
def test_top_n_matches_the_reference(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, seed: int, insert: str
) -> None:
    tmp_path = tmp_path_factory.mktemp("top")
    job = _job(tmp_path, insert)
    batches = make_batches(seed, n_batches=5, rows_per_batch=10, keys=2)
    run_batches(spark, job, batches, tmp_path / "ckpt")
    assert Engine(spark).processor(job, str(tmp_path / "ckpt")).finish() == len(batches)
    _check(spark, job, batches, ["i", "j", "bx"], final=True)


BOUNDED = {
    "outer-join-counted": (
        "INSERT INTO g SELECT window.start AS ws, count(*) AS n, count(b.id) AS nb "
        "FROM A a LEFT JOIN B b ON a.k = b.k AND b.ts BETWEEN a.ts AND "
        "a.ts + INTERVAL '2' SECOND GROUP BY window(a.ts, '3 seconds');",
        ["ws", "n", "nb"],
    ),
    "two-streams-groups-joined": (
        "INSERT INTO g SELECT a.k AS ka, a.n AS na, b.n AS nb, a.w AS w FROM "
        "(SELECT k, count(*) AS n, window_start AS w FROM TABLE(TUMBLE(TABLE A, "
        "DESCRIPTOR(ts), INTERVAL '3' SECOND)) GROUP BY k, window_start, window_end) a JOIN "
        "(SELECT k, count(*) AS n, window_start AS w FROM TABLE(TUMBLE(TABLE B, "
        "DESCRIPTOR(ts), INTERVAL '3' SECOND)) GROUP BY k, window_start, window_end) b "
        "ON a.k = b.k AND a.w = b.w;",
        ["ka", "na", "nb", "w"],
    ),
    "left-band-outer-join": (
        "INSERT INTO g SELECT a.id AS i, b.id AS j, a.x - b.x AS dx FROM A a LEFT JOIN B b "
        "ON abs(a.x - b.x) <= 0.3 AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND "
        "a.ts + INTERVAL '2' SECOND;",
        ["i", "j", "dx"],
    ),
    "full-equi-outer-join": (
        "INSERT INTO g SELECT a.id AS i, b.id AS j FROM A a FULL OUTER JOIN B b ON a.k = b.k "
        "AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '2' SECOND;",
        ["i", "j"],
    ),
    "rolled-up": (
        "INSERT INTO g SELECT q.k AS key, count(*) AS groups, sum(q.n) AS pairs FROM "
        "(SELECT a.k AS k, count(*) AS n FROM A a JOIN B b ON a.k = b.k AND b.ts BETWEEN "
        "a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '2' SECOND "
        "GROUP BY window(a.ts, '2 seconds'), a.k) q GROUP BY q.k;",
        ["key", "groups", "pairs"],
    ),
}


@pytest.mark.parametrize("shape", sorted(BOUNDED))
def test_a_bounded_input_run_once_and_final_from_files(
    spark: SparkSession, tmp_path: Path, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a user runs: ``Engine.run(job, once=True, final=True)`` over a directory of files
    per stream, one file a batch, in Spark's loop (each batch in a session of its own, the final
    one in the engine's); every window and row without a partner ends up written. Each batch
    is more rows than one task reads (as a backlog's are), and no batch caches its new rows:
    the join's operator, the buffers and the streams' groups read no state slice."""
    from streamjoin.runtime.state.hot import HotState
    from tests.e2e.files import write_batches

    cached: list[str] = []
    cache = HotState.delta

    def cache_spy(self: HotState, spark: SparkSession, sp: t.Any, *args: t.Any) -> str:
        cached.append(sp.name)
        return cache(self, spark, sp, *args)

    monkeypatch.setattr(HotState, "delta", cache_spy)
    monkeypatch.setattr("streamjoin.runtime.batch.indexfit.LOCAL_ONE_TASK_ROWS", 0)
    monkeypatch.setattr("streamjoin.runtime.batch.indexfit.ONE_TASK_ROWS", 0)

    insert, columns = BOUNDED[shape]
    batches = make_batches(5, n_batches=4, rows_per_batch=10, late_per_batch=0)
    write_batches(tmp_path / "in", batches)
    streams = [
        stream_ddl(n, str(tmp_path / "in" / n)).replace(
            "WITH (", "WITH (maxFilesPerTrigger = '1', "
        )
        for n in ("A", "B")
    ]
    job = parse_job(
        "\n".join(
            [
                *streams,
                f"CREATE SINK g WITH (format = 'parquet', path = '{tmp_path / 'g'}');",
                insert,
            ]
        )
    )
    ckpt = str(tmp_path / "ckpt")
    summary = Engine(spark).run(job, checkpoint=ckpt, once=True, progress=False, final=True)
    assert summary.batches == len(batches) + 1
    assert _check(spark, job, batches, columns, final=True) > 0
    assert cached == []


def test_a_three_way_join_counted_per_window(spark: SparkSession, tmp_path: Path) -> None:
    """A multi-way join feeds a GROUP BY like a two-way one; its lag is the longest path of
    windows to the window's input (here c trails b by up to 2 s, b trails a by up to 1 s)."""
    job = parse_job(
        "\n".join(
            [
                stream_ddl("A"),
                stream_ddl("B"),
                stream_ddl("C"),
                f"CREATE SINK g WITH (format = 'parquet', path = '{tmp_path / 'g'}');",
                "INSERT INTO g SELECT window.start AS ws, b.k AS k, count(*) AS n, "
                "max(c.x) AS hi FROM A a JOIN B b ON a.k = b.k AND b.ts BETWEEN a.ts - "
                "INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND JOIN C c ON c.k = b.k AND "
                "c.ts BETWEEN b.ts - INTERVAL '2' SECOND AND b.ts "
                "GROUP BY window(c.ts, '4 seconds'), b.k;",
            ]
        )
    )
    batches = make_batches(3, ("A", "B", "C"), n_batches=4, rows_per_batch=8, keys=2)
    run_batches(spark, job, batches, tmp_path / "ckpt")
    assert _check(spark, job, batches, ["ws", "k", "n", "hi"], final=False) > 0


def test_closing_windows_read_held_rows_and_a_restart_reads_its_units_back_once(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's closing windows read the rows its batches held in memory, no unit from the
    checkpoint; a restart holds none, so its first close reads the live units back, in one read,
    and the groups still match the reference (sliding windows, a key, a replayed batch)."""
    from streamjoin.runtime.batch.heldgroups import HeldGroups

    read_back: list[int] = []
    original = HeldGroups._read_back

    def spy(
        self: HeldGroups, spark: SparkSession, buffer: t.Any, paths: t.Any, ckpt: t.Any
    ) -> None:
        read_back.append(len(paths))
        original(self, spark, buffer, paths, ckpt)

    monkeypatch.setattr(HeldGroups, "_read_back", spy)
    insert = (
        f"INSERT INTO g SELECT {ITEMS}, a.k AS key FROM A a JOIN B b ON a.k = b.k AND "
        "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '1' SECOND "
        "GROUP BY window(a.ts, '3 seconds', '1 seconds'), a.k;"
    )
    job = _job(tmp_path, insert)
    batches = make_batches(11, n_batches=8, rows_per_batch=12, keys=3)
    ckpt = tmp_path / "ckpt"
    first = run_batches(spark, job, batches[:5], ckpt)
    assert sum(r.out.get("q1", 0) for r in first) > 0  # (windows closed before the restart)
    assert read_back == []
    run_batches(spark, job, batches[4:], ckpt, first_batch=4)
    assert len(read_back) == 1 and read_back[0] > 1
    _check(spark, job, batches, [*COLUMNS, "key"], final=False)


@pytest.mark.parametrize("held", [True, False], ids=["jar", "no-jar"])
def test_a_buffer_folds_a_batchs_rows_per_pane_and_key_and_folds_unfolded_units_read_back(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    """Where every aggregate merges from partials (`plan.partials`), a batch's buffer unit holds
    one row per pane and key, not its joined rows; units written unfolded (a version before
    folding: here the first run, with folding off) are folded as a restart reads them back,
    beside the folded ones; a decimal sum keeps its type, an avg of large longs sums them as
    doubles (as Spark's avg does); the groups match the reference. With
    the jar, the fold is ``PaneFold``'s, in the rows' tasks; without it (no rows held: every
    close reads the units), Spark plans it each batch."""
    from pyspark.sql.types import DecimalType

    from streamjoin.runtime.batch import heldgroups, panefolds
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.fs import FileStore

    if not held:
        monkeypatch.setattr(heldgroups.HeldGroups, "_groups", lambda self, spark: None)

    insert = (
        "INSERT INTO g SELECT window.start AS ws, a.k AS key, count(*) AS n, "
        "sum(CAST(b.x AS DECIMAL(10, 2))) AS sd, sum(CAST(a.x AS DECIMAL(6, 1))) AS sd6, "
        "min(a.x) AS lo, max(b.x) AS hi, avg(b.x) AS ax, avg(a.id * 1000000000000) AS ai "
        "FROM A a JOIN B b ON a.k = b.k AND "
        "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '1' SECOND "
        "GROUP BY window(a.ts, '4 seconds', '2 seconds'), a.k;"
    )
    job = _job(tmp_path, insert)
    batches = make_batches(17, n_batches=9, rows_per_batch=14, keys=2)
    ckpt = tmp_path / "ckpt"
    with monkeypatch.context() as unfolded:
        unfolded.setattr(panefolds, "partial_buffer", lambda buffer: None)
        run_batches(spark, job, batches[:5], ckpt)
    raw = Checkpoint(FileStore(spark), str(ckpt)).latest().groups["q1"].units
    assert raw, "no unit left open across the restart"
    run_batches(spark, job, batches[4:], ckpt, first_batch=4)
    columns = ["ws", "key", "n", "sd", "sd6", "lo", "hi", "ax", "ai"]
    _check(spark, job, batches, columns, final=False)
    # (Spark's types of the groups of the rows: a sum of small decimals, which Spark's
    # optimiser sums as unscaled longs, too.)
    written = spark.read.parquet(str(tmp_path / "g")).schema
    assert written["sd"].dataType == DecimalType(20, 2)
    assert written["sd6"].dataType == DecimalType(16, 1)

    units = Checkpoint(FileStore(spark), str(ckpt)).latest().groups["q1"].units
    folded = [u for u in units if u.batch >= 5]
    assert folded, units
    for unit in folded:
        rows = spark.read.parquet(str(ckpt / unit.path))
        assert "_sj_p0" in rows.columns
        # (One row per pane of a.ts and key: their joined rows are more.)
        panes = rows.selectExpr("unix_micros(_g0) DIV 2000000 AS pane", "_g1").distinct()
        assert rows.count() == panes.count() == unit.rows
    assert sum(int(r["_sj_p0"]) for u in folded for r in _unit(spark, ckpt, u)) > sum(
        u.rows for u in folded
    )


def _unit(spark: SparkSession, ckpt: Path, unit: t.Any) -> list[t.Any]:
    return spark.read.parquet(str(ckpt / unit.path)).collect()
