"""Measured selectivities: what a batch counts per pair join, how counts become the optimizer's
selectivities, and that CLASH's plan follows them (`plan.clash`,
`adapt.probes.Reorderer`)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from streamjoin.adapt.probes import Reorderer
from streamjoin.plan import JobPlan, plan_job
from streamjoin.plan.clash import (
    DEFAULT_SELECTIVITY,
    PairMeasure,
    measured_selectivities,
    optimizer_queries,
    pair_measures,
    plan_clash,
    selectivity_key,
)
from streamjoin.plan.multiway import pair_parts
from streamjoin.sql import parse_job
from tests.spark.streams import stream_ddl

WINDOW = "b.ts BETWEEN a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL '5' SECOND"
# A chain A -k- B -s- C: from B's new rows, the cheaper first step is the smaller pair join.
CHAIN = f"A a JOIN B b ON a.k = b.k AND {WINDOW} JOIN C c ON c.s = b.s"
BAND = "A a JOIN B b ON a.k = b.k JOIN C c ON abs(c.x - b.x) <= 1.0"


def _plan(*queries: str) -> JobPlan:
    text = "\n".join(stream_ddl(s) for s in "ABC")
    text += "\nCREATE SINK o WITH (format = 'json', path = '/out');\n"
    text += "\n".join(f"INSERT INTO o SELECT a.id AS i FROM {q} WITH (epoch = 2);" for q in queries)
    return plan_job(parse_job(text))


def _measures(plan: JobPlan) -> list[PairMeasure]:
    queries = [mp.query for mp in plan.multiway]
    return pair_measures(queries, {q.name: pair_parts(plan.job, q) for q in queries})


def test_each_distinct_pair_join_is_measured_once_under_the_optimizers_keys() -> None:
    plan = _plan(CHAIN, CHAIN, BAND)
    measures = _measures(plan)
    # CHAIN twice: its two pairs once. BAND: A-B on k alone (no window: another join than
    # CHAIN's), B-C a band.
    assert [(m.query, m.left, m.right) for m in measures] == [
        ("q1", 0, 1),
        ("q1", 1, 2),
        ("q3", 0, 1),
        ("q3", 1, 2),
    ]
    ab, bc, ab_bare, band = measures
    assert ab.equalities == ("a.k = b.k",) and ab.label_key is not None
    assert bc.equalities == ("b.s = c.s",) and bc.label_key is None
    assert ab_bare.equality_keys == ab.equality_keys and ab_bare.label_key is None
    assert band.equalities == () and band.label_key is not None and "band" in band.label_key
    # The keys are those of the predicates the optimizer is given.
    queries = [mp.query for mp in plan.multiway]
    pairs = {q.name: pair_parts(plan.job, q) for q in queries}
    measured = {k: 0.25 for m in measures for k in (*m.equality_keys, m.label_key) if k}
    planned, left_out = optimizer_queries(queries, pairs, measured)
    assert not left_out
    given_keys = {selectivity_key(p) for q in planned for p in q.predicates}
    assert set(measured) == given_keys
    assert {p.selectivity for q in planned for p in q.predicates} == {0.25}


@given(
    rows=st.tuples(st.integers(1, 10_000), st.integers(1, 10_000)),
    equal=st.integers(1, 10**6),
    share=st.floats(0.0, 1.0),
    equalities=st.integers(0, 2),
    label=st.booleans(),
)
def test_the_selectivities_multiply_back_to_the_measured_join(
    rows: tuple[int, int], equal: int, share: float, equalities: int, label: bool
) -> None:
    """rate x rate x the product of a pair's selectivities is its measured count of new
    joined pairs: the optimizer's estimate of the pair join is what the batch saw."""
    if not equalities and not label:
        return
    total = math.floor(equal * share) if equalities else equal
    keys = tuple(f"eq{i}" for i in range(equalities))
    m = PairMeasure("q", 0, 1, keys, keys, "rest" if label else None)
    got = measured_selectivities(m, equal if equalities else None, total, rows)
    assert set(got) == {*keys, *(["rest"] if label else [])}
    assert all(v > 0 for v in got.values())
    estimate = rows[0] * rows[1] * math.prod(got.values())
    want = max(total, 0.5) if label else equal
    assert math.isclose(estimate, want, rel_tol=1e-9), (estimate, want, got)


def test_a_pair_with_no_rows_on_one_side_measures_nothing() -> None:
    m = PairMeasure("q", 0, 1, ("a.k = b.k",), ("k",), None)
    assert measured_selectivities(m, 10, 10, (0, 50)) == {}


def test_the_ilps_first_step_follows_the_measured_selectivities() -> None:
    """From B's new rows, the chain's cheaper order visits the pair with the smaller join first;
    which one that is depends on the selectivities only (the rates are equal)."""
    plan = _plan(CHAIN)
    queries = [mp.query for mp in plan.multiway]
    pairs = {q.name: pair_parts(plan.job, q) for q in queries}
    ab, bc = _measures(plan)
    assert ab.label_key is not None
    (k,), (s,) = ab.equality_keys, bc.equality_keys
    from_b = []
    for ab_sel, bc_sel in ((1e-6, 0.5), (0.5, 1e-6)):
        measured = {k: ab_sel, ab.label_key: 1.0, s: bc_sel}
        clash = plan_clash(plan.job, queries, pairs, selectivities=measured)
        assert clash is not None
        from_b.append(clash.orders["q1"][1])
    assert from_b == [(0, 2), (2, 0)]


def test_the_reorderer_keeps_measured_selectivities_in_its_state_and_plans_with_them() -> None:
    plan = _plan(CHAIN)
    reorder = Reorderer(plan, 4)
    reorder.restore(None)
    assert not reorder.measuring(0) and reorder.measuring(1) and reorder.measuring(3)
    rows = {"A": 100, "B": 100, "C": 100}
    reorder.after_batch(0, rows)
    assert reorder.expected_rows(1) == {"A": 100.0, "B": 100.0, "C": 100.0}
    # The batch saw A-B join 10,000 pairs on k (8,000 in the window) and B-C 5 on s.
    notes = reorder.after_batch(1, rows, {0: (10_000.0, 8_000.0), 1: (5.0, 5.0)})
    ab, bc = reorder.measures
    assert ab.label_key is not None
    assert reorder.selectivities == {
        ab.equality_keys[0]: 1.0,
        ab.label_key: 0.8,
        bc.equality_keys[0]: 5 / 10_000,
    }
    # B's new rows go to C first now (far the smaller join), from epoch 2 (batch 4) on.
    assert "q1" in notes, notes
    assert [s.input for s in reorder.plans(4)[0].orders[1].steps] == [2, 0]
    saved = reorder.state()
    again = Reorderer(plan, 4)
    again.restore(saved)
    assert again.selectivities == reorder.selectivities
    assert DEFAULT_SELECTIVITY["equality"] not in again.selectivities.values()
