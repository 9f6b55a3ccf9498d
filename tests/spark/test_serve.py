"""A served job whose queries are added and dropped between batches (`runtime.serve`).

Every query's output is the reference's results that arrive while it ran (`ReferenceResult.
between`): from the batch it was added in, joining new rows with the history the state holds,
to the batch it was dropped in. The history kept (10 s) covers every window here, so the
bootstrap is exact. A refused query changes nothing; a crash in the middle of a change loses and
repeats nothing.
"""

from __future__ import annotations

import typing as t

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.errors import JobError, StreamJoinError
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch.processor import BatchProcessor
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.serve.queries import ServedQueries
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.runtime.state.fs import FileStore
from streamjoin.sql import parse_job, parse_query_file

from .harness import local_frame, read_sink
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from streamjoin.model import Job
    from tests.spark.harness import Batches, Row

HISTORY_US = 10_000_000
Lives = dict[str, list[tuple[int, int | None]]]
"""Per query (by sink): the batches it ran, [first, last + 1) (None: to the end)."""


def _w(x: str, y: str, s: int) -> str:
    return f"{y}.ts BETWEEN {x}.ts - INTERVAL '{s}' SECOND AND {x}.ts + INTERVAL '{s}' SECOND"


# name -> (FROM ... JOIN ... ON ..., SELECT list)
POOL: dict[str, tuple[str, str]] = {
    "ab": (f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', 3)}", "a.id AS i1, b.id AS i2"),
    "bc_band": (
        f"B b JOIN C c ON abs(b.x - c.x) <= 0.5 AND {_w('b', 'c', 4)}",
        "b.id AS i1, c.id AS i2",
    ),
    "ac_theta": (f"A a JOIN C c ON a.x < c.x - 8 AND {_w('a', 'c', 2)}", "a.id AS i1, c.id AS i2"),
    "ab_wide": (
        f"A a JOIN B b ON a.k = b.k AND a.s = b.s AND {_w('a', 'b', 6)}",
        "a.id AS i1, b.id AS i2",
    ),
    # Two more over A and B on the key k: with "ab" they may share one join (`plan.shared`).
    "ab_sel": (
        f"A x JOIN B y ON y.k = x.k AND x.x > 5 AND {_w('x', 'y', 2)}",
        "y.id AS i1, x.id AS i2",
    ),
    "ab_pair": (
        f"A a JOIN B b ON a.k = b.k AND a.x + b.x > 9 AND {_w('a', 'b', 4)}",
        "a.id AS i1, b.id AS i2, a.x + b.x AS xs",
    ),
    "abc": (
        f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', 3)} "
        f"JOIN C c ON c.k = b.k AND {_w('b', 'c', 3)}",
        "a.id AS i1, b.id AS i2, c.id AS i3",
    ),
    # With "abc" it may share one multi-way join (`plan.shared_multiway`).
    "abc_sel": (
        f"A x JOIN B y ON y.k = x.k AND x.x > 4 AND {_w('x', 'y', 5)} "
        f"JOIN C z ON z.k = y.k AND {_w('y', 'z', 2)}",
        "x.id AS i1, y.id AS i2, z.id AS i3",
    ),
}


def _sink_ddl(tmp_path: Path, name: str) -> str:
    return f"CREATE SINK {name} WITH (format = 'parquet', path = '{tmp_path / 'out' / name}');"


def _text(tmp_path: Path, name: str) -> str:
    joins, select = POOL[name]
    return f"{_sink_ddl(tmp_path, name)}\nINSERT INTO {name} SELECT {select} FROM {joins}"


def _base(tmp_path: Path, initial: tuple[str, ...] = (), files: bool = False) -> Job:
    """Streams A, B, C and the `initial` queries of the pool; with `files`, the streams read
    ``tmp_path/in/<stream>``, one file a batch."""
    parts = []
    for s in "ABC":
        ddl = stream_ddl(s, str(tmp_path / "in" / s))
        parts.append(ddl.replace("WITH (", "WITH (maxFilesPerTrigger = '1', ") if files else ddl)
    for name in initial:
        joins, select = POOL[name]
        parts.append(_sink_ddl(tmp_path, name))
        parts.append(f"INSERT INTO {name} SELECT {select} FROM {joins};")
    return parse_job("\n".join(parts))


def _everything(tmp_path: Path, base: Job) -> Job:
    """The base job with every query of the pool not in it, named after its sink."""
    job = base
    for name in POOL:
        if all(q.sink != name for q in job.queries):
            sink, query = parse_query_file(_text(tmp_path, name), job)
            job = job.with_query(query, sink)
    return job


class Served:
    """A served job driven batch by batch, as the stream would drive it."""

    def __init__(self, spark: SparkSession, base: Job, ckpt: Path) -> None:
        self.spark, self.engine = spark, Engine(spark)
        store = Checkpoint(FileStore(spark), str(ckpt))
        self.queries = ServedQueries(base, store, self.engine.check_query, HISTORY_US)
        current = self.queries.current
        plan = self.queries.plan(self.queries.job_of(current), current.groups)
        self.processor = BatchProcessor(spark, plan, store, served=self.queries)

    def batch(self, batch_id: int, rows: t.Mapping[str, t.Sequence[Row]]) -> None:
        frames = {}
        for name, data in rows.items():
            frames[name] = local_frame(self.spark, self.processor.plan.job.stream(name), data)
        self.processor.process(self.engine.unified(self.processor.plan, frames), batch_id)

    def close(self) -> None:
        self.processor.close()


def _sink(spark: SparkSession, job: Job, name: str) -> list[tuple[object, ...]]:
    columns = [item.rsplit(" AS ", 1)[1] for item in POOL[name][1].split(", ")]
    return normalize(read_sink(spark, job, name, columns))


def _check(
    spark: SparkSession, job: Job, batches: Batches, lives: Lives, *, some: bool = True
) -> None:
    """Each query's sink holds exactly the reference's results of its lifetimes; with `some`,
    at least one of them has results (a generated sequence may keep a query only over batches
    where the reference finds none of its rows)."""
    expected = run_reference(job, batches)
    total = 0
    for name, spans in lives.items():
        query = next(q.name for q in job.queries if q.sink == name)
        want = [row for lo, hi in spans for row in expected.between(query, lo, hi)]
        assert _sink(spark, job, name) == normalize(want), (name, spans)
        total += len(want)
    lived = any(lo != hi for spans in lives.values() for lo, hi in spans)
    assert total or not (some and lived)


def test_queries_added_and_dropped_between_batches(spark: SparkSession, tmp_path: Path) -> None:
    """Queries of three kinds and three-way ones come and go; "ab_sel" and "ab_pair" join the
    job's query (q1) in a shared join, which goes on without q1 once it is dropped; "abc_sel"
    shares a multi-way join with "abc" until "abc" is dropped."""
    base = _base(tmp_path, ("ab",))
    batches = make_batches(21, streams=("A", "B", "C"), n_batches=7, rows_per_batch=10, keys=3)
    served = Served(spark, base, tmp_path / "ckpt")
    plan: dict[int, list[tuple[str, str]]] = {
        1: [("add", "ab_sel")],
        2: [("add", "bc_band"), ("add", "abc"), ("add", "ab_pair")],
        3: [("add", "abc_sel")],
        4: [("drop", "q1"), ("add", "ac_theta")],
        5: [("add", "ab_wide"), ("drop", "abc")],
    }
    groups = []
    try:
        for i, rows in enumerate(batches):
            for kind, name in plan.get(i, []):
                if kind == "add":
                    served.queries.add(_text(tmp_path, name))
                else:
                    served.queries.drop(name)
            served.batch(i, rows)
            groups.append(served.queries.current.groups)
    finally:
        served.close()
    assert groups[0] == () and groups[1] == (("q1", "ab_sel"),)
    assert groups[2] == (("q1", "ab_sel", "ab_pair"),)
    assert groups[3] == (("q1", "ab_sel", "ab_pair"), ("abc", "abc_sel"))
    assert groups[4] == (("ab_sel", "ab_pair"), ("abc", "abc_sel"))
    assert groups[5] == (("ab_sel", "ab_pair"),)
    assert served.queries.current.since == (
        ("ab_sel", 1),
        ("bc_band", 2),
        ("ab_pair", 2),
        ("abc_sel", 3),
        ("ac_theta", 4),
        ("ab_wide", 5),
    )
    lives: Lives = {
        "ab": [(0, 4)],
        "ab_sel": [(1, None)],
        "ab_pair": [(2, None)],
        "bc_band": [(2, None)],
        "abc": [(2, 5)],
        "abc_sel": [(3, None)],
        "ac_theta": [(4, None)],
        "ab_wide": [(5, None)],
    }
    _check(spark, _everything(tmp_path, base), batches, lives)
    # A restart with sharing off runs the groups the checkpoint kept apart.
    store = Checkpoint(FileStore(spark), str(tmp_path / "ckpt"))
    for share, shared in ((True, 1), (False, 0)):
        again = ServedQueries(base, store, served.engine.check_query, HISTORY_US, share=share)
        current = again.current
        assert len(again.plan(again.job_of(current), current.groups).shared) == shared


def test_a_refused_query_changes_nothing(spark: SparkSession, tmp_path: Path) -> None:
    base = _base(tmp_path, ("ab",))
    batches = make_batches(22, streams=("A", "B", "C"), n_batches=4, rows_per_batch=8, keys=3)
    served = Served(spark, base, tmp_path / "ckpt")
    sink = f"{_sink_ddl(tmp_path, 'bad')}\nINSERT INTO bad SELECT "
    joins = "FROM A a JOIN B b ON"
    wrong = {
        "syntax": f"{sink}a.id AS i {joins} a.k = = b.k",
        "unknown column": f"{sink}a.nope AS i {joins} a.k = b.k",
        "types": f"{sink}a.id AS i {joins} a.ts = b.x",
        "spark": f"{sink}no_such_fn(a.id) AS i {joins} a.k = b.k",
    }
    try:
        served.batch(0, batches[0])
        for why, text in wrong.items():
            with pytest.raises(JobError) as caught:
                served.queries.add(text)
            assert caught.value.line == 2, (why, str(caught.value))
        with pytest.raises(StreamJoinError, match="no query called 'nope'"):
            served.queries.drop("nope")
        with pytest.raises(StreamJoinError, match="receives the results of query q1"):
            served.queries.add(f"INSERT INTO ab SELECT a.id AS i {joins} a.k = b.k")
        with pytest.raises(JobError, match="sink 'ab' is defined twice"):
            served.queries.add(f"{_text(tmp_path, 'ab')}")
        assert not served.queries.pending()
        for i in range(1, len(batches)):
            served.batch(i, batches[i])
    finally:
        served.close()
    assert [q.name for q in served.processor.plan.job.queries] == ["q1"]
    _check(spark, _everything(tmp_path, base), batches, {"ab": [(0, None)]})


@pytest.mark.parametrize("point", ["after-sink", "after-commit"])
def test_a_crash_while_a_change_applies_loses_and_repeats_nothing(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """The batch that applies an add and a drop fails after its sink writes (its manifest not
    committed) or after its commit (Spark would replay it); a new run from the checkpoint
    replays it and goes on, with the changes applied once, at that batch."""
    base = _base(tmp_path, ("ab",))
    batches = make_batches(23, streams=("A", "B", "C"), n_batches=5, rows_per_batch=8, keys=3)
    crash_at = 3

    class Crash(Exception):
        pass

    crashed: list[int] = []

    def crash(at: str, batch_id: int) -> None:
        if (at, batch_id) == (point, crash_at) and not crashed:
            crashed.append(batch_id)
            raise Crash

    monkeypatch.setattr("streamjoin.runtime.batch.processor.maybe_crash", crash)
    served = Served(spark, base, tmp_path / "ckpt")
    try:
        for i in range(crash_at):
            served.batch(i, batches[i])
        served.queries.add(_text(tmp_path, "bc_band"))
        served.queries.drop("q1")
        with pytest.raises(Crash):
            served.batch(crash_at, batches[crash_at])
    finally:
        served.close()
    again = Served(spark, base, tmp_path / "ckpt")  # a restart: the changes come from the files
    try:
        assert len(again.queries.pending()) == (2 if point == "after-sink" else 0)
        for i in range(crash_at, len(batches)):
            again.batch(i, batches[i])
    finally:
        again.close()
    assert again.queries.current.since == (("bc_band", crash_at),)
    lives: Lives = {"ab": [(0, crash_at)], "bc_band": [(crash_at, None)]}
    _check(spark, _everything(tmp_path, base), batches, lives)


def test_a_query_dropped_after_a_failed_attempt_keeps_nothing_of_it(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch 2 fails after its sinks wrote q1's rows; q1 is dropped before the batch runs
    again: the batch runs without q1, and q1's sink holds nothing of batch 2."""
    base = _base(tmp_path, ("ab",))
    batches = make_batches(24, streams=("A", "B", "C"), n_batches=4, rows_per_batch=8, keys=3)

    class Crash(Exception):
        pass

    crashed: list[int] = []

    def crash(at: str, batch_id: int) -> None:
        if (at, batch_id) == ("after-sink", 2) and not crashed:
            crashed.append(batch_id)
            raise Crash

    monkeypatch.setattr("streamjoin.runtime.batch.processor.maybe_crash", crash)
    served = Served(spark, base, tmp_path / "ckpt")
    try:
        for i in range(2):
            served.batch(i, batches[i])
        with pytest.raises(Crash):
            served.batch(2, batches[2])
        assert (tmp_path / "out" / "ab" / "batch=2").exists()
        served.queries.drop("q1")
        for i in range(2, len(batches)):
            served.batch(i, batches[i])
    finally:
        served.close()
    assert not (tmp_path / "out" / "ab" / "batch=2").exists()
    _check(spark, _everything(tmp_path, base), batches, {"ab": [(0, 2)]})


@settings(max_examples=2)
@given(
    seed=st.integers(0, 10_000),
    changes=st.lists(
        st.tuples(st.integers(0, 4), st.sampled_from(sorted(POOL))), min_size=1, max_size=5
    ),
)
def test_any_sequence_of_adds_and_drops_matches_the_reference(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    changes: list[tuple[int, str]],
) -> None:
    """At each listed batch, the named query is added if it is not running and dropped if it
    is; the job starts with none."""
    tmp_path = tmp_path_factory.mktemp("serve")
    base = _base(tmp_path)
    batches = make_batches(seed, streams=("A", "B", "C"), n_batches=5, rows_per_batch=6, keys=3)
    served = Served(spark, base, tmp_path / "ckpt")
    lives: Lives = {}
    running: dict[str, int] = {}
    try:
        for i, rows in enumerate(batches):
            for _, name in sorted((c for c in changes if c[0] == i), key=changes.index):
                if name in running:
                    served.queries.drop(name)
                    lives.setdefault(name, []).append((running.pop(name), i))
                else:
                    served.queries.add(_text(tmp_path, name))
                    running[name] = i
            served.batch(i, rows)
    finally:
        served.close()
    for name, start in running.items():
        lives.setdefault(name, []).append((start, None))
    _check(spark, _everything(tmp_path, base), batches, lives, some=False)


def test_a_checkpoint_spark_started_without_the_changes_stream_keeps_without_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A served job whose Spark checkpoint logged batches of its streams alone (started before
    change files were a stream: `ServedQueries.ticks`) goes on without that stream, which
    Spark would refuse as a new source; a new one, or one logged with it, reads it."""
    store = Checkpoint(FileStore(spark), str(tmp_path / "ckpt"))
    served = ServedQueries(_base(tmp_path), store, Engine(spark).check_query, HISTORY_US)
    assert served.ticks(spark, 3) is not None  # (nothing logged yet)
    offsets = tmp_path / "ckpt" / "spark" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "4").write_text('v1\n{"batchWatermarkMs":0}\n{"a":1}\n{"b":1}\n{"c":1}\n')
    assert served.ticks(spark, 3) is None
    (offsets / "5").write_text('v1\n{"batchWatermarkMs":0}\n{"a":1}\n{"b":1}\n{"c":1}\n{"t":1}\n')
    ticks = served.ticks(spark, 3)
    assert ticks is not None and ticks.isStreaming and ticks.columns == ["_sj_src"]
