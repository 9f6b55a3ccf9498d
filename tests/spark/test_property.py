"""Property: for generated streams and generated predicates, the engine equals the reference."""

from __future__ import annotations

import shutil
import tempfile
import typing as t
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job

from .harness import read_sink, run_batches
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

const = st.sampled_from(["0.5", "1", "2.5", "7"])
atoms = st.one_of(
    st.just("a.k = b.k"),
    st.just("a.k <=> b.k"),
    st.just("a.s = b.s"),
    st.just("a.x < b.x"),
    const.map(lambda c: f"abs(a.x - b.x) <= {c}"),
    st.tuples(const, const).map(lambda c: f"b.x BETWEEN a.x - {c[0]} AND a.x + {c[1]}"),
    const.map(lambda c: f"a.x + b.x > 2 * {c}"),
    const.map(lambda c: f"(a.k = b.k OR a.x > b.x + {c})"),
    st.just("NOT (a.s <=> b.s)"),
)
windows = st.one_of(
    st.none(),
    st.tuples(st.integers(0, 4), st.integers(0, 4)).map(
        lambda w: (
            f"b.ts BETWEEN a.ts - INTERVAL '{w[0]}' SECOND AND a.ts + INTERVAL '{w[1]}' SECOND"
        )
    ),
)


@settings(max_examples=6, deadline=None)
@given(
    conjuncts=st.lists(atoms, min_size=1, max_size=3),
    window=windows,
    seed=st.integers(0, 10_000),
    n_batches=st.integers(1, 4),
)
# A contradiction: Spark proves the join empty and prunes the plans observed for the unit counts.
@example(conjuncts=["a.s = b.s", "NOT (a.s <=> b.s)"], window=None, seed=1, n_batches=2)
def test_generated_predicates_match_reference(
    spark: SparkSession, conjuncts: list[str], window: str | None, seed: int, n_batches: int
) -> None:
    predicate = " AND ".join(conjuncts + ([window] if window else []))
    tmp = Path(tempfile.mkdtemp(prefix="sj-prop-"))
    try:
        text = "\n".join(
            [
                stream_ddl("A"),
                stream_ddl("B"),
                f"CREATE SINK o WITH (format = 'parquet', path = '{tmp / 'o'}');",
                f"INSERT INTO o SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON {predicate};",
            ]
        )
        job = parse_job(text)
        batches = make_batches(seed, n_batches=n_batches, rows_per_batch=8)
        run_batches(spark, job, batches, tmp / "ckpt")
        got = read_sink(spark, job, "o", ("aid", "bid"))
        assert normalize(got) == normalize(run_reference(job, batches).outputs["q1"]), predicate
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
