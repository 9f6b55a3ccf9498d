"""Every partitioning scheme, on every predicate class it fits, equals the brute-force reference."""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.adapt import schemes
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch import indexfit
from streamjoin.sql import parse_job

from .harness import SLICES, local_frame, read_sink, run_batches, settings_set
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from streamjoin.model import Job

W3 = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND"
# name -> (FROM clause, predicate, schemes that fit it)
ANY = ("matrix", "biclique")
QUERIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "equi_window": ("A a JOIN B b", f"a.k = b.k AND {W3}", ("hash", "contrand", *ANY)),
    "band_abs": ("A a JOIN B b", f"abs(a.x - b.x) <= 0.7 AND {W3}", ("range", *ANY)),
    "inequality": (
        "A a JOIN B b",
        "a.x < b.x AND b.x < a.x + 0.5 AND a.ts >= b.ts AND a.ts <= b.ts + INTERVAL 2 SECONDS",
        ("range", *ANY),
    ),
    "full_history_theta": ("A a JOIN B b", "a.x + b.x > 19.2", ANY),
    "null_safe_equi": ("A a JOIN B b", f"a.k <=> b.k AND a.x < b.x AND {W3}", ANY),
    "self_join": ("A a JOIN A b", f"a.k = b.k AND a.id < b.id AND {W3}", ("contrand", *ANY)),
}
SELECT = "a.id AS aid, b.id AS bid, a.x + b.x AS xs"
COLUMNS = ("aid", "bid", "xs")


def _job_text(tmp_path: Path, scheme: str, units: int) -> tuple[str, list[str]]:
    parts = [stream_ddl("A"), stream_ddl("B")]
    names = [name for name, (_, _, fits) in QUERIES.items() if scheme in fits]
    for name in names:
        from_, on, _ = QUERIES[name]
        parts.append(
            f"CREATE SINK {name} WITH (format = 'parquet', path = '{tmp_path / 'out' / name}');"
        )
        parts.append(
            f"INSERT INTO {name} SELECT {SELECT} FROM {from_} ON {on} "
            f"WITH (partitioning = '{scheme}', units = {units});"
        )
    return "\n".join(parts), names


@pytest.mark.parametrize(
    ("scheme", "units"),
    # (A 2×4 grid: a 2×2 one runs the same code.)
    [("matrix", 8), ("biclique", 5), ("contrand", 6), ("range", 4), ("hash", 3)],
)
def test_scheme_matches_reference(
    spark: SparkSession, tmp_path: Path, scheme: str, units: int
) -> None:
    text, names = _job_text(tmp_path, scheme, units)
    job = parse_job(text)
    batches = make_batches(units, n_batches=4, rows_per_batch=16, keys=3)
    reports = run_batches(spark, job, batches, tmp_path / "ckpt")
    expected = run_reference(job, batches)
    for i, name in enumerate(names):
        got = read_sink(spark, job, name, COLUMNS)
        want = expected.outputs[f"q{i + 1}"]
        assert normalize(got) == normalize(want), f"{scheme}/{name}: {len(got)} vs {len(want)}"
    # Every batch saw its rows per unit; the stored side holds each input row at least once.
    for report in reports:
        for name in (f"q{i + 1}" for i in range(len(names))):
            stats = report.units[name]
            assert len(stats.probe) == len(stats.store) >= 1
            assert sum(stats.probe) > 0
    if scheme == "range":  # (its bounds from a sample of the operator's rows: none at first)
        for name in (f"q{i + 1}" for i in range(len(names))):
            notes = [r.routing[name] for r in reports]
            assert notes[0].startswith("range 1 ranges"), notes
            assert f"-> range {units} ranges" in notes[0], notes
            assert notes[-1].startswith(f"range {units} ranges"), notes


def _one_query_job(tmp_path: Path, on_with: str, join: str = "JOIN") -> Job:
    """Streams A and B, sink o (parquet under tmp_path/out), and one query ``ON on_with``."""
    return parse_job(
        "\n".join(
            [
                stream_ddl("A"),
                stream_ddl("B"),
                f"CREATE SINK o WITH (format = 'parquet', path = '{tmp_path / 'out'}');",
                f"INSERT INTO o SELECT {SELECT} FROM A a {join} B b ON {on_with};",
            ]
        )
    )


RESHAPES: list[dict[str, object]] = [
    {"name": "matrix", "n": 1, "m": 4},
    {"name": "biclique", "left": 2, "right": 3},
    {"name": "contrand", "left": 3, "right": 2, "d": 2, "e": 1},
    {"name": "matrix", "n": 4, "m": 2},
    {"name": "hash"},
    {"name": "matrix", "n": 2, "m": 2},
]


def test_reshapes_between_batches_lose_and_repeat_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A different scheme at every batch: state written under one scheme is probed by deltas
    routed under the next, and every pair still appears exactly once."""
    from streamjoin.runtime.engine import Engine

    job = _one_query_job(
        tmp_path,
        "a.k = b.k AND a.x < b.x WITH (partitioning = 'matrix', units = 4, adapt = false)",
    )
    batches = make_batches(11, n_batches=len(RESHAPES) + 1, rows_per_batch=14, keys=3)
    engine = Engine(spark)
    processor = engine.processor(job, str(tmp_path / "ckpt"))
    seen = []
    for i, batch in enumerate(batches):
        frames = {name: local_frame(spark, job.stream(name), rows) for name, rows in batch.items()}
        report = processor.process(engine.unified(processor.plan, frames), i)
        seen.append(report.routing["q1"])
        if i < len(RESHAPES):
            processor.set_partitioning("q1", RESHAPES[i])
    expected = run_reference(job, batches).outputs["q1"]
    got = read_sink(spark, job, "o", COLUMNS)
    assert normalize(got) == normalize(expected)
    # Each batch ran under the scheme set after the one before it.
    assert seen[0].startswith("matrix 2×2")
    assert seen[1].startswith("matrix 1×4")
    assert seen[2].startswith("biclique")
    assert seen[5].startswith("hash")


def test_biclique_scales_out_when_units_fill(spark: SparkSession, tmp_path: Path) -> None:
    """BiStream's elasticity: units over T_h of their capacity for three batches in a row get
    company (Eq. 7), and the results stay exact across the step."""
    job = _one_query_job(
        tmp_path,
        "a.x < b.x AND a.k = b.k WITH (partitioning = 'biclique', units = 2, unit_rows = 8)",
    )
    batches = make_batches(5, n_batches=6, rows_per_batch=14, keys=3)
    reports = run_batches(spark, job, batches, tmp_path / "ckpt")
    expected = run_reference(job, batches).outputs["q1"]
    assert normalize(read_sink(spark, job, "o", COLUMNS)) == normalize(expected)
    places = [len(r.units["q1"].store) for r in reports]
    assert places[0] == 2
    assert places[-1] > 2, places  # full-history state outgrew 1+1 units of 8 rows
    assert any("->" in r.routing["q1"] for r in reports)


def test_time_buckets_match_reference_forced_and_once_auto_sees_a_hot_key(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window's time bucket joined to the keys: on the engine's path, under a matrix, and
    turned on by `auto` when one key carries the rows (keys=1: all rows on one hash unit)."""
    # The controller decides after 1,000 rows of a batch; these batches are smaller (the
    # reference executor is a nested loop).
    monkeypatch.setattr(schemes, "WARMUP", 100)
    # (Probes in several tasks, as a large batch's: one task's would keep hash, `next_scheme`.)
    monkeypatch.setattr(indexfit, "LOCAL_ONE_TASK_ROWS", 0)
    monkeypatch.setattr(indexfit, "ONE_TASK_ROWS", 0)
    on = f"a.k = b.k AND {W3}"
    queries = {
        "forced": "time_buckets = 'true'",
        "matrix": "partitioning = 'matrix', units = 4, adapt = false, time_buckets = 'true'",
        "auto": "units = 4",
    }
    parts = [stream_ddl("A"), stream_ddl("B")]
    for name, with_ in queries.items():
        parts.append(f"CREATE SINK {name} WITH (format = 'parquet', path = '{tmp_path / name}');")
        parts.append(
            f"INSERT INTO {name} SELECT {SELECT} FROM A a JOIN B b ON {on} WITH ({with_});"
        )
    job = parse_job("\n".join(parts))
    # (Batches 16 s of event time apart: the state spans more than two 6 s buckets, so that
    # buckets spare a row some of its key's stored rows and `auto` takes them.)
    batches = make_batches(11, n_batches=4, rows_per_batch=100, step_s=16.0, keys=1)
    reports = run_batches(spark, job, batches, tmp_path / "ckpt")
    expected = run_reference(job, batches)
    for i, name in enumerate(queries):
        got = read_sink(spark, job, name, COLUMNS)
        want = expected.outputs[f"q{i + 1}"]
        assert len(want) > 500
        assert normalize(got) == normalize(want), f"{name}: {len(got)} vs {len(want)}"
    notes = [r.routing.get("q3", "") for r in reports]
    # Batch 0 ran on plain hashing and saw the hot key, batch 1 ran bucketed. A batch here spans
    # about three buckets, so the key stays hot and a content-insensitive scheme takes over
    # (the bucket kept): the output above stays exact across both changes.
    assert notes[0].startswith("hash on 4 units -> hash on 4 units, keyed by event-time bucket")
    assert notes[1].startswith("hash on 4 units, keyed by event-time bucket too (6 s) -> "), notes
    assert notes[-1].endswith("keyed by event-time bucket too (6 s)"), notes
    assert "event-time bucket" in reports[-1].routing["q1"]


@pytest.mark.parametrize("index", ["true", "false"])
def test_a_query_moved_off_hash_by_a_hot_key_returns_once_the_keys_are_even(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: str
) -> None:
    """One key carries batches 0 and 1, then 256 keys share the rest: `auto` leaves hash after
    batch 0, and after two even batches (`adapt.hashskew.EVEN_CHECKS`) takes it again; the output
    stays exact across both changes, on the join operator and on the slices (the overflow
    path, where the scheme's routed views count its places)."""
    monkeypatch.setattr(schemes, "WARMUP", 100)
    monkeypatch.setattr(indexfit, "LOCAL_ONE_TASK_ROWS", 0)
    monkeypatch.setattr(indexfit, "ONE_TASK_ROWS", 0)
    on = f"a.k = b.k AND {W3}"
    with_ = "units = 4, time_buckets = 'false'"
    job = parse_job(
        f"{stream_ddl('A')}\n{stream_ddl('B')}\n"
        f"CREATE SINK o WITH (format = 'parquet', path = '{tmp_path / 'o'}');\n"
        f"INSERT INTO o SELECT {SELECT} FROM A a JOIN B b ON {on} WITH ({with_});"
    )
    batches = make_batches(5, n_batches=7, rows_per_batch=400, keys=256)
    for batch in batches[:2]:
        for rows in batch.values():
            for row in rows:
                row["k"] = 7 if row["k"] is not None else None
    with settings_set(spark, {} if index == "true" else SLICES):
        reports = run_batches(spark, job, batches, tmp_path / "ckpt")
    want = run_reference(job, batches).outputs["q1"]
    got = read_sink(spark, job, "o", COLUMNS)
    assert normalize(got) == normalize(want), f"{len(got)} vs {len(want)}"
    notes = [r.routing["q1"] for r in reports]
    assert notes[0].startswith("hash on 4 units -> "), notes
    assert notes[0].endswith(" from batch 1") and "hash" not in notes[1].split(" -> ")[0], notes
    assert notes[3].endswith(" -> hash on 4 units from batch 4"), notes
    assert notes[4:] == ["hash on 4 units"] * 3, notes


def _run_with_changes(
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
    job: Job,
    batches: t.Sequence[t.Mapping[str, t.Any]],
    changes: t.Mapping[int, dict[str, t.Any]],
    ckpt: Path,
) -> tuple[list[int], list[int]]:
    """`batches` through one processor, `q1`'s placement set to `changes[i]` after batch i; the
    output checked against the reference. Returns the batches whose index was loaded from the
    units, and the indexes draining after each batch."""
    from streamjoin.runtime.batch import indexed, indexinput
    from streamjoin.runtime.engine import Engine

    loads: list[int] = []
    load = indexinput.load_index

    def counted(ctx: t.Any, *args: t.Any) -> None:
        loads.append(ctx.batch_id)
        load(ctx, *args)

    monkeypatch.setattr(indexed, "load_index", counted)
    monkeypatch.setattr(indexfit, "LOCAL_ONE_TASK_ROWS", 0)
    monkeypatch.setattr(indexfit, "ONE_TASK_ROWS", 0)
    engine = Engine(spark)
    processor = engine.processor(job, str(ckpt))
    draining = []
    try:
        for i, batch in enumerate(batches):
            frames = {n: local_frame(spark, job.stream(n), rows) for n, rows in batch.items()}
            processor.process(engine.unified(processor.plan, frames), i)
            draining.append(len(processor.indexed.drains.names()))
            if i in changes:
                processor.set_partitioning("q1", changes[i])
    finally:
        processor.close()
    expected = run_reference(job, batches).outputs["q1"]
    got = read_sink(spark, job, "o", COLUMNS)
    assert normalize(got) == normalize(expected), f"{len(got)} vs {len(expected)}"
    return loads, draining


def test_a_placement_change_drains_the_old_operator_state_instead_of_building_it_again(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Squall's migration (`batch.drains`): after a change of placement the old index is
    probed, placed as it was, by the new rows, which go to a new, empty index; nothing is loaded
    from the stored units; the old index goes once the watermark has passed its newest row, and
    every pair is written once. A second change while one drains builds the index again. The
    probe tasks of both indexes write the pairs they find (``BatchWrite.rddOf`` of a union):
    none goes through Spark's writer."""
    from streamjoin.runtime.batch import sinks

    job = _one_query_job(
        tmp_path, f"a.k = b.k AND {W3} WITH (partitioning = 'matrix', units = 4, adapt = false)"
    )
    batches = make_batches(13, n_batches=12, rows_per_batch=14, keys=3)
    changes: dict[int, dict[str, t.Any]] = {2: {"name": "hash"}}
    changes[8] = {"name": "biclique", "left": 2, "right": 2}
    changes[9] = {"name": "matrix", "n": 2, "m": 2}  # (while the second drains)
    ckpt = tmp_path / "ckpt"
    by_spark: list[int] = []
    observed = sinks._write_observed

    def spark_writes(sink: t.Any, outputs: t.Any, batch_id: int, parallelism: int) -> t.Any:
        by_spark.append(batch_id)
        return observed(sink, outputs, batch_id, parallelism)

    monkeypatch.setattr(sinks, "_write_observed", spark_writes)
    loads, draining = _run_with_changes(spark, monkeypatch, job, batches, changes, ckpt)
    # Built at batch 0 (nothing stored yet) and again at the change during a drain (batch 10).
    assert loads == [0, 10], loads
    assert draining[3] == 1 and 0 in draining[4:9], draining  # (the first drain went)
    assert draining[9] == 1 and draining[10] == 0, draining
    assert by_spark == [], by_spark


def test_a_full_history_join_drains_beside_its_new_index_until_the_next_change(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full-history join's old index never empties: it is probed beside the new one, every
    pair written once, until a second change builds the index again."""
    with_ = "WITH (partitioning = 'matrix', units = 4, adapt = false)"
    job = _one_query_job(tmp_path, f"a.k = b.k AND a.s <> b.s {with_}")
    batches = make_batches(17, n_batches=8, rows_per_batch=10, keys=3)
    changes: dict[int, dict[str, t.Any]] = {1: {"name": "hash"}}
    changes[5] = {"name": "matrix", "n": 2, "m": 2}
    ckpt = tmp_path / "ckpt"
    loads, draining = _run_with_changes(spark, monkeypatch, job, batches, changes, ckpt)
    assert loads == [0, 6], loads  # (built at the start, and at the change during the drain)
    assert draining == [0, 0, 1, 1, 1, 1, 0, 0], draining


@pytest.mark.parametrize(
    ("join", "on"),
    [
        ("LEFT JOIN", f"a.k = b.k AND {W3}"),
        ("FULL JOIN", f"(a.k = b.k OR a.id = b.id) AND {W3}"),  # (an OR's tables: shared marks)
        ("RIGHT JOIN", f"abs(a.x - b.x) <= 0.2 AND {W3}"),
    ],
)
def test_an_outer_join_drains_its_marks_and_decides_both_indexes_rows(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, join: str, on: str
) -> None:
    """An outer join's index drains too: the drain's probe marks the old index's rows and the
    batch's rows in the new one, and the rows without a partner are both indexes', each
    written once, in the batch the reference writes it; nothing is built again."""
    with_ = "WITH (partitioning = 'matrix', units = 4, adapt = false)"
    job = _one_query_job(tmp_path, f"{on} {with_}", join)
    batches = make_batches(19, n_batches=9, rows_per_batch=12, keys=12, disorder_s=2.0)
    changes: dict[int, dict[str, t.Any]] = {1: {"name": "biclique", "left": 2, "right": 2}}
    changes[5] = {"name": "matrix", "n": 2, "m": 2}
    ckpt = tmp_path / "ckpt"
    loads, draining = _run_with_changes(spark, monkeypatch, job, batches, changes, ckpt)
    expected = run_reference(job, batches).outputs["q1"]
    assert any(None in row for row in expected), "no row without a partner"
    assert loads == [0], loads
    assert draining[2] == 1 and draining[6] == 1, draining
