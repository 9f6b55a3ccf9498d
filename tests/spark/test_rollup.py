"""Rollups (groups with no window over a GROUP BY query's rows, Nexmark q4's shape) on Spark
against the reference: each batch writes the new values of the groups its rows touched, across
a restart that replays a batch and a final run."""

from __future__ import annotations

import typing as t

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from streamjoin.sql import parse_job

from .harness import replay_and_check
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    import pytest
    from pyspark.sql import SparkSession

NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


@st.composite
def rollup_query(draw: st.DrawFn) -> tuple[str, list[str]]:
    """An outer GROUP BY (no window) over a windowed GROUP BY of A ⋈ B: INSERT and columns."""
    inner_group = draw(
        st.sampled_from(
            ["window(a.ts, '2 seconds'), a.k", "a.k, a.ts", "window(b.ts, '3 seconds')"]
        )
    )
    key = "q.k" if "a.k" in inner_group else "q.hi > 5"
    inner = (
        "SELECT "
        + ("a.k AS k, " if "a.k" in inner_group else "")
        + "count(*) AS n, max(b.x) AS hi, min(a.s) AS s FROM A a JOIN B b ON a.k = b.k "
        "AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '2' SECOND "
        f"GROUP BY {inner_group}"
    )
    sql = (
        f"INSERT INTO g SELECT {key} AS key, count(*) AS groups, sum(q.n) AS pairs, "
        f"avg(q.hi) AS mean, min(q.s) AS least, max(q.n) AS most, "
        # (A DECIMAL's sum is wider than it: the rollup's output keeps one type all the same.)
        f"sum(CAST(q.hi AS DECIMAL(10, 2))) AS total "
        f"FROM ({inner}) q GROUP BY {key};"
    )
    return sql, ["key", "groups", "pairs", "mean", "least", "most", "total"]


@settings(max_examples=1, deadline=None, phases=NO_SHRINK)
@given(seed=st.integers(0, 10_000), query=rollup_query(), final=st.booleans())
def test_rollups_match_the_reference(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    query: tuple[str, list[str]],
    final: bool,
) -> None:
    tmp = tmp_path_factory.mktemp("rollup")
    insert, columns = query
    sink = f"CREATE SINK g WITH (format = 'parquet', path = '{tmp / 'g'}');"
    job = parse_job("\n".join([stream_ddl("A"), stream_ddl("B"), sink, insert]))
    batches = make_batches(seed, n_batches=5, rows_per_batch=10, keys=3)
    replay_and_check(spark, job, batches, tmp / "ckpt", columns, final=final)
