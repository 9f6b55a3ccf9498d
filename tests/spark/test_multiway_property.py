"""Property: a three- or four-way join (chain, star, cycle) equals the reference under any
sequence of probe orders, each changing at an epoch boundary, into base stores and MIRs alike
(CLASH's plans)."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import typing as t
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.adapt.probes import Reorderer
from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job

from .harness import SLICES, read_sink, run_batches, settings_set
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.adapt.reorder import Orders
    from streamjoin.plan.probeorder import Target


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
ALIASES = ("a", "b", "c", "d")
SHAPES: dict[int, dict[str, list[tuple[int, int]]]] = {
    3: {"chain": [(0, 1), (1, 2)], "cycle": [(0, 1), (1, 2), (0, 2)]},
    4: {
        "chain": [(0, 1), (1, 2), (2, 3)],
        "star": [(0, 1), (0, 2), (0, 3)],
        "cycle": [(0, 1), (1, 2), (2, 3), (0, 3)],
    },
}


Pair = tuple[tuple[int, int], tuple[str, int | None]]
"""Two joined inputs (i < j), the predicate joining them and its window (seconds, or None)."""


@st.composite
def _orders(draw: st.DrawFn, n: int, edges: list[tuple[int, int]]) -> dict[int, tuple[Target, ...]]:
    """Per start, the other inputs in any order, two neighbours in it possibly probed as one
    MIR when a conjunct joins them (the planner's MIRs join two streams, `plan.clash.MAX_MIR`)."""
    out: dict[int, tuple[Target, ...]] = {}
    for start in range(n):
        rest: list[int] = draw(st.permutations([i for i in range(n) if i != start]))
        order: list[Target] = list(rest)
        joined = [p for p in range(len(rest) - 1) if (*sorted(rest[p : p + 2]),) in edges]
        mir: bool = draw(st.booleans())
        if joined and mir:
            p: int = draw(st.sampled_from(joined))
            order[p : p + 2] = [(*sorted(rest[p : p + 2]),)]
        out[start] = tuple(order)
    return out


@st.composite
def _case(draw: st.DrawFn, n: int) -> tuple[list[Pair], list[Orders]]:
    """A shape of `n` inputs, a predicate per joined pair, and three plans: per query its
    orders."""
    shape: str = draw(st.sampled_from(sorted(SHAPES[n])))
    edges = SHAPES[n][shape]
    size = len(edges)
    pairs: list[tuple[str, int | None]] = draw(
        st.lists(st.tuples(PAIR, WINDOW), min_size=size, max_size=size)
    )
    plans: list[dict[int, tuple[Target, ...]]] = draw(
        st.lists(_orders(n, edges), min_size=3, max_size=3)
    )
    return list(zip(edges, pairs, strict=True)), [{"q1": p} for p in plans]


@pytest.mark.parametrize("slices", [False, True], ids=["operator", "slices"])
@pytest.mark.parametrize("n", [3, 4])
@settings(max_examples=2, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_any_probe_orders_changing_at_epochs_match_reference(
    spark: SparkSession, n: int, slices: bool, data: st.DataObject, seed: int
) -> None:
    """`n` inputs joined as a chain, star or cycle, by generated pair predicates. The ILP's
    answer at each epoch's end (epochs of one batch) is replaced by the next generated orders,
    in force two batches later: each query's chain of levels on the operator follows its first
    input's order, and a new chain's levels are built from the streams' units (their left
    sides, the MIRs, joined from them). On the cached slices (no jar) every input's term runs
    its order, an MIR's inputs probed one at a time."""
    joined, plans = data.draw(_case(n))
    on: dict[int, list[str]] = {j: [] for j in range(1, n)}
    for (i, j), (pred, window) in joined:
        on[j].append(pred.format(x=ALIASES[i], y=ALIASES[j]))
        if window is not None:
            on[j].append(_w(ALIASES[i], ALIASES[j], window))
    names = "ABCD"[:n]
    sql = "SELECT " + ", ".join(f"{ALIASES[i]}.id AS i{i + 1}" for i in range(n))
    sql += " FROM A a" + "".join(
        f" JOIN {names[j]} {ALIASES[j]} ON {' AND '.join(on[j])}" for j in range(1, n)
    )
    sql += " WITH (epoch = 1)"
    upcoming = itertools.cycle(plans)

    def replanned(self: Reorderer, rates: dict[str, float]) -> Orders:
        return next(upcoming)

    optimize = Reorderer._optimize
    Reorderer._optimize = replanned  # type: ignore[method-assign]
    tmp = Path(tempfile.mkdtemp(prefix="sj-mwprop-"))
    try:
        text = "\n".join(stream_ddl(s) for s in names)
        text += f"\nCREATE SINK o WITH (format = 'parquet', path = '{tmp / 'o'}');\n"
        text += f"INSERT INTO o {sql};"
        job = parse_job(text)
        # Four batches (the CI budget): the plans still change twice, at batches 2 and 3. Four
        # inputs: fewer rows.
        rows = 8 if n == 3 else 5
        batches = make_batches(seed, streams=tuple(names), n_batches=4, rows_per_batch=rows, keys=3)
        with settings_set(spark, SLICES if slices else {}):
            run_batches(spark, job, batches, tmp / "ckpt")
        got = read_sink(spark, job, "o", [f"i{i + 1}" for i in range(n)])
        assert normalize(got) == normalize(run_reference(job, batches).outputs["q1"]), sql
    finally:
        Reorderer._optimize = optimize  # type: ignore[method-assign]
        shutil.rmtree(tmp, ignore_errors=True)
