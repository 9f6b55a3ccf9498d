"""A job stopped, edited and restarted from the same checkpoint (`runtime.restart`).

New queries answer from the restart batch on, with the stored history: their results include
new rows joined with rows that arrived before the restart (the reference's results arriving
from the restart batch on, `ReferenceResult.since`). The old queries' output stays exact across
the restart. A new query that reaches further back than the state kept is warned about; a job
that reads other streams than the checkpoint's runs did fails at once, naming the stream.
"""

from __future__ import annotations

import typing as t
import warnings
from collections import Counter

import pytest

from streamjoin.errors import StreamJoinError, StreamJoinWarning
from streamjoin.plan import plan_job
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches

from .harness import read_sink, run_batches
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from streamjoin.model import Job

Queries = dict[str, tuple[str, str]]
"""sink name -> (FROM ... JOIN ... ON ..., SELECT list); the sink's query is ``q<position>``."""


def _w(x: str, y: str, lo: int, hi: int) -> str:
    return f"{y}.ts BETWEEN {x}.ts + INTERVAL '{lo}' SECOND AND {x}.ts + INTERVAL '{hi}' SECOND"


# Version 1: a two-way and a three-way query. They keep A's rows 6 s behind the watermark (the
# window path a-b-c), B's 3 s and C's 6 s.
V1: Queries = {
    "ab": (f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -3, 3)}", "a.id AS i1, b.id AS i2"),
    "abc": (
        f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -3, 3)} "
        f"JOIN C c ON abs(c.x - b.x) <= 1.0 AND {_w('b', 'c', -3, 3)}",
        "a.id AS i1, b.id AS i2, c.id AS i3",
    ),
}
# Version 2 adds a two-way band join whose window (5 s on A) is wider than any two-way query of
# version 1 but within what the state kept, and a three-way cycle.
ADDED: Queries = {
    "ac": (
        f"A a JOIN C c ON abs(a.x - c.x) <= 0.5 AND {_w('a', 'c', -5, 5)}",
        "a.id AS i1, c.id AS i2",
    ),
    "cycle": (
        f"C c JOIN B b ON c.k = b.k AND {_w('b', 'c', -2, 2)} "
        f"JOIN A a ON a.k = b.k AND {_w('a', 'b', -2, 2)} AND c.s = a.s",
        "a.id AS i1, b.id AS i2, c.id AS i3",
    ),
}


def _job(tmp_path: Path, queries: Queries, streams: str = "ABC", paths: bool = False) -> Job:
    parts = []
    for s in streams:
        ddl = stream_ddl(s, str(tmp_path / "in" / s))
        parts.append(ddl.replace("WITH (", "WITH (maxFilesPerTrigger = '1', ") if paths else ddl)
    for name in queries:
        parts.append(f"CREATE SINK {name} WITH (format = 'parquet', path = '{tmp_path / name}');")
    for name, (joins, select) in queries.items():
        parts.append(f"INSERT INTO {name} SELECT {select} FROM {joins};")
    return parse_job("\n".join(parts))


def _got(spark: SparkSession, job: Job, queries: Queries, sink: str) -> list[tuple[object, ...]]:
    columns = [item.rsplit(" AS ", 1)[1] for item in queries[sink][1].split(", ")]
    return normalize(read_sink(spark, job, sink, columns))


def _query(job: Job, sink: str) -> str:
    return next(q.name for q in job.queries if q.sink == sink)


def test_queries_added_at_a_restart_bootstrap_from_the_stored_history(
    spark: SparkSession, tmp_path: Path
) -> None:
    v1, v2 = _job(tmp_path, V1), _job(tmp_path, V1 | ADDED)
    # The added queries need no more history than version 1 kept.
    kept = {sp.name: sp.retain_us for sp in plan_job(v1).streams}
    assert {sp.name: sp.retain_us for sp in plan_job(v2).streams} == kept
    batches = make_batches(
        10, streams=("A", "B", "C"), n_batches=5, rows_per_batch=8, keys=3, step_s=5.0
    )
    restart = 3
    ckpt = tmp_path / "ckpt"
    before = run_batches(spark, v1, batches[:restart], ckpt)
    last = before[-1].manifest
    on_time = sum(len(b["A"]) for b in batches[:restart]) - last.totals.late["A"]
    assert last.state_rows()["A"] < on_time, "some of A's state has expired"
    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamJoinWarning)  # the history suffices: no warning
        run_batches(spark, v2, batches[restart:], ckpt, first_batch=restart)

    # Both versions read the same streams: the reference's watermarks and late rows are the
    # engine's in both.
    expected = run_reference(v2, batches)
    for sink in V1:
        want = expected.outputs[_query(v2, sink)]
        assert want and _got(spark, v2, V1, sink) == normalize(want), sink
    first_new = min(int(t.cast("int", r["id"])) for b in batches[restart:] for r in b["A"])
    for sink in ADDED:
        want = expected.since(_query(v2, sink), restart)
        # Some results join a row of this run with one that arrived before the restart.
        assert any(min(t.cast("tuple[int, ...]", row)) < first_new for row in want), sink
        assert _got(spark, v2, ADDED, sink) == normalize(want), sink


def test_a_new_query_reaching_past_the_kept_state_is_warned_about(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Version 1 keeps 2 s of A and B; the added query joins within 8 s. It gets every result
    but those with dropped rows, and a warning names it and the streams."""
    narrow: Queries = {"n": (f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -2, 2)}", "a.id AS i")}
    wide: Queries = {
        "w": (f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -8, 8)}", "a.id AS i, b.id AS j")
    }
    v1, v2 = _job(tmp_path, narrow, "AB"), _job(tmp_path, narrow | wide, "AB")
    batches = make_batches(4, n_batches=6, rows_per_batch=8, keys=3, step_s=3.0)
    restart = 4
    run_batches(spark, v1, batches[:restart], tmp_path / "ckpt")
    with pytest.warns(StreamJoinWarning) as caught:
        run_batches(spark, v2, batches[restart:], tmp_path / "ckpt", first_batch=restart)
    messages = sorted(str(w.message) for w in caught if w.category is StreamJoinWarning)
    assert [m[: len("query q2 joins A's rows from")] for m in messages] == [
        "query q2 joins A's rows from",
        "query q2 joins B's rows from",
    ], messages
    expected = run_reference(v2, batches)
    assert _got(spark, v2, narrow, "n") == normalize(expected.outputs["q1"])
    got, want = Counter(_got(spark, v2, wide, "w")), Counter(expected.since("q2", restart))
    assert got <= want and got.total() < want.total(), (got.total(), want.total())


def test_a_query_inserted_before_the_others_starts_afresh(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Queries are named by position: inserting one first gives it the name (q1) under which
    the old first query's partitioning was saved (hash keys of one type, where the new query
    has two). Saved state goes only to the query it was saved for."""
    old: Queries = {"o": (f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -3, 3)}", "a.id AS i")}
    new: Queries = {
        "n": (
            f"A a JOIN B b ON a.k = b.k AND a.s = b.s AND {_w('a', 'b', -3, 3)}",
            "a.id AS i, b.id AS j",
        )
    }
    v1, v2 = _job(tmp_path, old, "AB"), _job(tmp_path, new | old, "AB")
    batches = make_batches(5, n_batches=5, rows_per_batch=8, keys=3, step_s=3.0)
    restart = 3
    run_batches(spark, v1, batches[:restart], tmp_path / "ckpt")
    run_batches(spark, v2, batches[restart:], tmp_path / "ckpt", first_batch=restart)
    expected = run_reference(v2, batches)
    assert _got(spark, v2, old, "o") == normalize(expected.outputs["q2"])
    want = expected.since("q1", restart)
    assert want and _got(spark, v2, new, "n") == normalize(want)


def test_a_restart_that_reads_a_new_stream_fails_naming_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark's checkpoint cannot take a new source (it fails with an assertion on the number of
    sources); the engine says which stream and what to do before Spark starts."""
    batches = make_batches(6, streams=("A", "B", "C"), n_batches=2, rows_per_batch=4)
    write_batches(tmp_path / "in", batches)
    ab: Queries = {"ab": ("A a JOIN B b ON a.k = b.k", "a.id AS i")}
    ac: Queries = {"ac": ("A a JOIN C c ON a.k = c.k", "a.id AS i")}
    ckpt = str(tmp_path / "ckpt")
    engine = Engine(spark)
    engine.run(_job(tmp_path, ab, paths=True), checkpoint=ckpt, once=True, progress=False)
    with pytest.raises(StreamJoinError, match=r"stream C is read by query q2 .*new checkpoint"):
        engine.run(_job(tmp_path, ab | ac, paths=True), checkpoint=ckpt, once=True, progress=False)
