"""Outer joins on Spark against the reference: every pair, and every row without a partner
once, in the batch the reference decides it, across a replay, a restart and a final run; and
an outer join feeding a GROUP BY window."""

from __future__ import annotations

import typing as t

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.sql import parse_job

from .harness import SLICES, read_sink, run_batches, settings_set
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from streamjoin.model import Job
    from tests.spark.harness import Batches

PREDICATES = [
    "a.k = b.k",
    "abs(a.x - b.x) <= 1",
    "a.k = b.k AND a.x < b.x",
    "a.s = b.s",
    "a.x < b.x",
]
"""Equality keys (a hash anti-join), a value band and a bare theta (bucketed anti-joins)."""


@st.composite
def outer_query(draw: st.DrawFn) -> str:
    """An outer join of A and B, any kind, an equi, band or theta condition, a time window (or
    a ttl)."""
    kind = draw(st.sampled_from(["LEFT", "RIGHT", "FULL OUTER"]))
    lo, hi = draw(st.integers(-4, 1)), draw(st.integers(0, 4))
    on = draw(st.sampled_from(PREDICATES))
    where = draw(st.sampled_from(["", " WHERE a.x > 2 OR b.x IS NULL", " WHERE b.id IS NULL"]))
    head = f"INSERT INTO o SELECT a.id AS i, b.id AS j, a.x + b.x AS xx FROM A a {kind} JOIN B b "
    if draw(st.booleans()):  # the window as a ttl: event times at most that far apart
        return f"{head}ON {on}{where} WITH (ttl = '{hi + 1} seconds');"
    return (
        f"{head}ON {on} AND b.ts BETWEEN a.ts + INTERVAL '{lo}' SECOND "
        f"AND a.ts + INTERVAL '{max(lo, hi)}' SECOND{where};"
    )


def _job(tmp_path: Path, insert: str) -> Job:
    sink = f"CREATE SINK o WITH (format = 'parquet', path = '{tmp_path / 'o'}');"
    return parse_job("\n".join([stream_ddl("A"), stream_ddl("B"), sink, insert]))


def _expected(job: Job, batches: Batches, final: bool) -> list[tuple[object, ...]]:
    """The reference's rows, each with the batch that emits it."""
    result = run_reference(job, batches, final=final)
    return [(*row, b) for row, b in zip(result.outputs["q1"], result.arrivals["q1"], strict=True)]


def _written(kind: str, on: str, lo: int, hi: int) -> str:
    return (
        f"INSERT INTO o SELECT a.id AS i, b.id AS j, a.x + b.x AS xx FROM A a {kind} JOIN B b "
        f"ON {on} AND b.ts BETWEEN a.ts + INTERVAL '{lo}' SECOND AND a.ts + INTERVAL '{hi}' SECOND;"
    )


@settings(max_examples=1)
@given(seed=st.integers(0, 10_000), insert=outer_query(), final=st.booleans())
# (Always a bare theta, whose partners are found by buckets; the drawn query varies the rest.)
@example(seed=29, insert=_written("FULL OUTER", "a.x < b.x", 0, 3), final=True)
def test_outer_joins_match_the_reference_batch_by_batch(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    insert: str,
    final: bool,
) -> None:
    tmp_path = tmp_path_factory.mktemp("outer")
    job = _job(tmp_path, insert)
    batches = make_batches(seed, n_batches=4, rows_per_batch=8, keys=3)
    ckpt = tmp_path / "ckpt"
    run_batches(spark, job, batches[:3], ckpt)
    run_batches(spark, job, batches[2:], ckpt, first_batch=2)  # (batch 2 replayed)
    if final:
        assert Engine(spark).processor(job, str(ckpt)).finish() == len(batches)
    got = read_sink(spark, job, "o", ["i", "j", "xx", "batch"])
    assert normalize(got) == normalize(_expected(job, batches, final))


@pytest.mark.parametrize(
    ("conf", "with_"),
    [({}, ""), (SLICES, ""), (SLICES, " WITH (partitioning = 'matrix', units = 4)")],
    ids=["operator", "slices", "slices-matrix"],
)
def test_an_outer_join_counted_per_window(
    spark: SparkSession, tmp_path: Path, conf: dict[str, str], with_: str
) -> None:
    # (On the slices, a GROUP BY buffer's writer runs the routed views as an RDD: their
    # observations never complete, and the router must not wait on them.)
    job = _job(
        tmp_path,
        "INSERT INTO o SELECT window.start AS ws, count(*) AS n, count(b.id) AS matched, "
        "sum(a.x) AS sx FROM A a LEFT JOIN B b ON a.k = b.k AND b.ts BETWEEN a.ts "
        f"AND a.ts + INTERVAL '2' SECOND GROUP BY window(a.ts, '4 seconds'){with_};",
    )
    batches = make_batches(11, n_batches=6, rows_per_batch=8, keys=4)
    with settings_set(spark, conf):
        run_batches(spark, job, batches, tmp_path / "ckpt")
        assert Engine(spark).processor(job, str(tmp_path / "ckpt")).finish() == len(batches)
    want = _expected(job, batches, final=True)
    assert any(row[1] != row[2] for row in want)  # (some rows had no partner)
    got = read_sink(spark, job, "o", ["ws", "n", "matched", "sx", "batch"])
    assert normalize(got) == normalize(want)
