"""Property: on random tiny instances the ILP finds the brute-force optimum, in both
formulations, and the decoded plan recomputed from its parts costs what the ILP says."""

from __future__ import annotations

import typing as t

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.optimizer import (
    JoinPredicate,
    Problem,
    Query,
    Relation,
    brute_force,
    build_ilp,
    decode,
    enumerate_candidates,
    recompute_load,
    solve_ilp,
)

NAMES = ("R", "S", "T", "U")
ATTRS = ("a", "b")


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    """2–4 relations with 1–2 attributes, 2–3 queries of 2–3 relations each (chains, stars,
    triangles; equality and theta predicates), random rates, selectivities, parallelism."""
    n_rel = draw(st.integers(2, 4))
    relations = tuple(
        Relation(
            NAMES[i],
            float(draw(st.integers(1, 500))),
            tuple(draw(st.lists(st.sampled_from(ATTRS), min_size=1, max_size=2, unique=True))),
        )
        for i in range(n_rel)
    )
    by_name = {r.name: r for r in relations}
    # One selectivity per distinct predicate, whichever query uses it.
    selectivity: dict[tuple[str, str, str, str, str], float] = {}

    def predicate(left: str, right: str) -> JoinPredicate:
        if draw(st.booleans()):
            la = draw(st.sampled_from(by_name[left].attributes))
            ra = draw(st.sampled_from(by_name[right].attributes))
            probe = JoinPredicate(left, right, la, ra, 1.0)
        else:
            probe = JoinPredicate(left, right, None, None, 1.0, draw(st.sampled_from("xy")))
        sel = selectivity.setdefault(
            probe.identity, draw(st.sampled_from((0.001, 0.01, 0.02, 0.05, 0.1, 0.5)))
        )
        return JoinPredicate(
            probe.left, probe.right, probe.left_attr, probe.right_attr, sel, probe.label
        )

    queries = []
    for q in range(draw(st.integers(2, 3))):
        size = draw(st.integers(2, min(3, n_rel)))
        names = draw(st.permutations([r.name for r in relations]))[:size]
        preds: dict[tuple[str, str, str, str, str], JoinPredicate] = {}
        for i in range(1, size):
            p = predicate(names[draw(st.integers(0, i - 1))], names[i])
            preds[p.identity] = p
        if size == 3 and draw(st.booleans()):
            p = predicate(names[0], names[2])
            preds[p.identity] = p
        queries.append(Query(f"q{q}", tuple(names), tuple(preds.values())))
    return Problem(relations, tuple(queries), draw(st.integers(1, 6)))


@given(problems())
def test_ilp_equals_brute_force(problem: Problem) -> None:
    candidates = enumerate_candidates(problem)
    brute = brute_force(candidates)
    forms: tuple[t.Literal["tight", "paper"], ...] = ("tight", "paper")
    for form in forms:
        chosen, report = solve_ilp(build_ilp(candidates, form), time_limit=30.0)
        assert report.optimal, report.status
        assert report.objective == pytest.approx(brute.load, rel=1e-6), form
        plan = decode(candidates, chosen, report)
        assert plan.load == pytest.approx(report.objective, rel=1e-6), form
        assert recompute_load(problem, plan) == pytest.approx(report.objective, rel=1e-6), form
