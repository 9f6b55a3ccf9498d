"""Property: a three-way join equals the reference under any sequence of probe orders, each
changing at an epoch boundary, over base stores and MIR stores alike (CLASH's plans)."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import typing as t
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.multiway import Reorderer
from streamjoin.sql import parse_job

from .harness import read_sink, run_batches
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.adapt.reorder import Orders
    from streamjoin.plan.multiway import Target


def _w(x: str, y: str, s: int) -> str:
    return f"{y}.ts BETWEEN {x}.ts - INTERVAL '{s}' SECOND AND {x}.ts + INTERVAL '{s}' SECOND"


# The conjuncts a pair of inputs (x, y) may be joined by: equi, band, theta; with or without
# a window.
PAIR = st.sampled_from(
    [
        "{x}.k = {y}.k",
        "abs({x}.x - {y}.x) <= 1.5",
        "{x}.x < {y}.x",
        "{x}.k = {y}.k AND {x}.s = {y}.s",
    ]
)
WINDOW = st.sampled_from([None, 1, 3])
ALIASES = ("a", "b", "c")


@st.composite
def _orders(draw: st.DrawFn) -> dict[int, tuple[Target, ...]]:
    """Per start, the other two inputs one by one (either order) or as one MIR store."""
    out: dict[int, tuple[Target, ...]] = {}
    for start in range(3):
        x, y = (i for i in range(3) if i != start)
        choices: list[tuple[Target, ...]] = [(x, y), (y, x), ((x, y),)]
        out[start] = draw(st.sampled_from(choices))
    return out


@settings(max_examples=3, deadline=None)
@given(
    pairs=st.lists(st.tuples(PAIR, WINDOW), min_size=3, max_size=3),
    cycle=st.booleans(),
    plans=st.lists(_orders(), min_size=3, max_size=3),
    seed=st.integers(0, 2**16),
)
def test_any_probe_orders_changing_at_epochs_match_reference(
    spark: SparkSession,
    pairs: list[tuple[str, int | None]],
    cycle: bool,
    plans: list[dict[int, tuple[Target, ...]]],
    seed: int,
) -> None:
    """A chain a-b-c (or a cycle, with a-c joined too). The ILP's answer at each epoch's end
    (epochs of one batch) is replaced by the next generated orders, in force two batches
    later; MIR stores appear, are filled from history, and are dropped as orders change."""
    edges = [(0, 1), (1, 2), (0, 2)][: 3 if cycle else 2]
    on: dict[int, list[str]] = {1: [], 2: []}
    for (i, j), (pred, window) in zip(edges, pairs, strict=False):
        parts = [pred.format(x=ALIASES[i], y=ALIASES[j])]
        if window is not None:
            parts.append(_w(ALIASES[i], ALIASES[j], window))
        on[j] += parts
    sql = (
        f"SELECT a.id AS i1, b.id AS i2, c.id AS i3 FROM A a JOIN B b ON {' AND '.join(on[1])} "
        f"JOIN C c ON {' AND '.join(on[2])} WITH (epoch = 1)"
    )
    upcoming: itertools.cycle[Orders] = itertools.cycle({"q1": p} for p in plans)
    optimize = Reorderer._optimize
    Reorderer._optimize = lambda self, rates: next(upcoming)  # type: ignore[method-assign]
    tmp = Path(tempfile.mkdtemp(prefix="sj-mwprop-"))
    try:
        text = "\n".join(stream_ddl(s) for s in "ABC")
        text += f"\nCREATE SINK o WITH (format = 'parquet', path = '{tmp / 'o'}');\n"
        text += f"INSERT INTO o {sql};"
        job = parse_job(text)
        batches = make_batches(seed, streams=tuple("ABC"), n_batches=5, rows_per_batch=8, keys=3)
        reports = run_batches(spark, job, batches, tmp / "ckpt")
        got = read_sink(spark, job, "o", ["i1", "i2", "i3"])
        assert normalize(got) == normalize(run_reference(job, batches).outputs["q1"]), sql
        # Batch b >= 2 ran plans[b - 2]: it kept an MIR store exactly when that plan has one.
        for r in reports[2:]:
            wanted = any(not isinstance(x, int) for o in plans[r.batch - 2].values() for x in o)
            assert bool(r.manifest.mirs) == wanted, (r.batch, plans, r.manifest.mirs)
    finally:
        Reorderer._optimize = optimize  # type: ignore[method-assign]
        shutil.rmtree(tmp, ignore_errors=True)
