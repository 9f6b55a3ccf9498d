"""The probe-load model (CLASH Eq. 1) against numbers worked out by hand.

Worked example (the same instance as ``golden/chain3.json``): the chain R(a), S(a,b), T(b) with
rates |R| = 100, |S| = 50, |T| = 20, selectivities R.a=S.a 0.02 and S.b=T.b 0.05, parallelism 4.
So |R⋈S| = 100·50·0.02 = 100, |S⋈T| = 50·20·0.05 = 50 and |R⋈S⋈T| = 100·50·20·0.02·0.05 = 100.
A step costs |⋈ of what is sent| · 1/j · χ, with j the relations joined so far and χ = 1 when
the tuple sent carries the target's partitioning attribute, else 4:

==========================  ===============================  ======
probe order                 steps                            PCost
==========================  ===============================  ======
⟨R, S[a], T[b]⟩             100·1·1 + 100/2·1                  150
⟨R, S[b], T[b]⟩             100·1·4 + 100/2·1                  450
⟨S, R[a], T[b]⟩             50·1·1 + 100/2·1                   100
⟨S, T[b], R[a]⟩             50·1·1 + 50/2·1                     75
⟨T, S[a], R[a]⟩             20·1·4 + 50/2·1                    105
⟨T, S[b], R[a]⟩             20·1·1 + 50/2·1                     45
⟨R, S⋈T[S.a]⟩               100·1·1                            100
⟨T, R⋈S[S.b]⟩               20·1·1                              20
==========================  ===============================  ======

Maintaining the MIR S⋈T with S partitioned on b costs ⟨S, T[b]⟩ + ⟨T, S[b]⟩ = 50 + 20 = 70.
The best plan over base stores alone: S on a gives 150 (R) + 75 (S) + 105 (T) = 330; S on b
gives 450 + 75 + 45 = 570. With the MIR: ⟨R, S⋈T[S.a]⟩ 100, ⟨S, T[b], R[a]⟩ 75, ⟨T, S[b], R[a]⟩
45, whose first steps ⟨S, T[b]⟩ and ⟨T, S[b]⟩ also maintain S⋈T, so the MIR's upkeep is already
paid: 100 + 75 + 45 = 220.
"""

from __future__ import annotations

import pytest

from streamjoin.optimizer import JoinPredicate, Problem, Query, Relation, plan_queries
from streamjoin.optimizer.cost import (
    broadcast_factor,
    carries_key,
    join_rate,
    maintenance_cost,
    order_cost,
    shared_load,
    step_cost,
)
from streamjoin.optimizer.stores import Column, ProbeOrder, Store, StoreLabel, canonical

RS = JoinPredicate("R", "S", "a", "a", 0.02)
ST = JoinPredicate("S", "T", "b", "b", 0.05)
PROBLEM = Problem(
    (Relation("R", 100.0, ("a",)), Relation("S", 50.0, ("a", "b")), Relation("T", 20.0, ("b",))),
    (Query.of("q1", RS, ST),),
    parallelism=4,
)
PREDS = canonical([RS, ST])


def label(store: str, attr: str) -> StoreLabel:
    """``S[a]`` for a base store, ``S⋈T[S.a]`` (given as "S⋈T", "S.a") for an MIR."""
    if "⋈" not in store:
        return StoreLabel(Store.base(store), Column(store, attr))
    members = frozenset(store.split("⋈"))
    rel, name = attr.split(".")
    return StoreLabel(Store.mir(members, PREDS), Column(rel, name))


def order(start: str, *targets: tuple[str, str]) -> ProbeOrder:
    return ProbeOrder(start, tuple(label(s, a) for s, a in targets), PREDS)


def test_join_rates() -> None:
    assert join_rate(PROBLEM, ["R"], PREDS) == 100.0
    assert join_rate(PROBLEM, ["R", "S"], PREDS) == pytest.approx(100.0)
    assert join_rate(PROBLEM, ["S", "T"], PREDS) == pytest.approx(50.0)
    assert join_rate(PROBLEM, ["R", "S", "T"], PREDS) == pytest.approx(100.0)
    # R and T share no predicate: their "join" is the cross product.
    assert join_rate(PROBLEM, ["R", "T"], PREDS) == pytest.approx(2000.0)


@pytest.mark.parametrize(
    ("probe", "expected"),
    [
        (order("R", ("S", "a"), ("T", "b")), 150.0),
        (order("R", ("S", "b"), ("T", "b")), 450.0),
        (order("S", ("R", "a"), ("T", "b")), 100.0),
        (order("S", ("T", "b"), ("R", "a")), 75.0),
        (order("T", ("S", "a"), ("R", "a")), 105.0),
        (order("T", ("S", "b"), ("R", "a")), 45.0),
        (order("R", ("S⋈T", "S.a")), 100.0),
        (order("T", ("R⋈S", "S.b")), 20.0),
    ],
    ids=str,
)
def test_pcost_of_the_worked_example(probe: ProbeOrder, expected: float) -> None:
    assert order_cost(PROBLEM, probe) == pytest.approx(expected)


def test_step_costs_and_broadcast_factor() -> None:
    steps = order("T", ("S", "a"), ("R", "a")).steps
    assert [step_cost(PROBLEM, s) for s in steps] == pytest.approx([80.0, 25.0])
    first, second = steps
    assert not carries_key(first.source, first.predicates, first.target)
    assert broadcast_factor(PROBLEM, first.source, first.predicates, first.target) == 4
    assert carries_key(second.source, second.predicates, second.target)


def test_round_robin_store_and_theta_predicates_always_broadcast() -> None:
    theta = JoinPredicate("R", "S", None, None, 0.3, "R.v < S.v")
    round_robin = StoreLabel(Store.base("S"), None)
    assert not carries_key(frozenset({"R"}), (RS,), round_robin)
    assert not carries_key(frozenset({"R"}), (theta,), label("S", "a"))


def test_mir_maintenance_and_sharing() -> None:
    upkeep = [order("S", ("T", "b")), order("T", ("S", "b"))]
    assert maintenance_cost(PROBLEM, upkeep) == pytest.approx(70.0)
    plan = [
        order("R", ("S⋈T", "S.a")),
        order("S", ("T", "b"), ("R", "a")),
        order("T", ("S", "b"), ("R", "a")),
        *upkeep,
    ]
    unshared = sum(order_cost(PROBLEM, o) for o in plan)
    assert unshared == pytest.approx(290.0)
    # The maintenance orders are the first steps of the S and T orders: paid once.
    assert shared_load(PROBLEM, plan) == pytest.approx(220.0)


def test_j_counts_relations_not_stores() -> None:
    """⟨U, S⋈T[T.c], R[a]⟩ on the chain R-S-T-U: after probing S⋈T a U tuple has joined three
    relations, so the second step sends |U⋈S⋈T|/3 (not /2)."""
    tu = JoinPredicate("T", "U", "c", "c", 0.1)
    problem = Problem(
        (
            Relation("R", 100.0, ("a",)),
            Relation("S", 50.0, ("a", "b")),
            Relation("T", 20.0, ("b", "c")),
            Relation("U", 10.0, ("c",)),
        ),
        (Query.of("q", RS, ST, tu),),
        parallelism=4,
    )
    preds = canonical([RS, ST, tu])
    mir = StoreLabel(Store.mir(frozenset({"S", "T"}), preds), Column("T", "c"))
    probe = ProbeOrder("U", (mir, StoreLabel(Store.base("R"), Column("R", "a"))), preds)
    u_st = 10.0 * 50.0 * 20.0 * 0.05 * 0.1  # |U⋈S⋈T| = 50
    assert [step_cost(problem, s) for s in probe.steps] == pytest.approx([10.0, u_st / 3])


def test_the_optimizer_finds_the_hand_computed_optima() -> None:
    assert plan_queries(PROBLEM, allow_mirs=False).load == pytest.approx(330.0)
    assert plan_queries(PROBLEM).load == pytest.approx(220.0)


def test_paper_example_v2_shared_plan_sends_800_instead_of_950() -> None:
    """§V-2: q1 = R(a),S(a,b),T(b), q2 = S(b),T(b,c),U(c), rates 100, |S⋈T| = 150, the other
    joins 100, no partitioning (parallelism 1), no MIRs. Alone each query sends 475; together,
    q1 probes S→T→R and q2 T→S→U, reusing each other's first steps: 800."""
    rs = JoinPredicate("R", "S", "a", "a", 0.01)
    st = JoinPredicate("S", "T", "b", "b", 0.015)
    tu = JoinPredicate("T", "U", "c", "c", 0.01)
    relations = (
        Relation("R", 100.0, ("a",)),
        Relation("S", 100.0, ("a", "b")),
        Relation("T", 100.0, ("b", "c")),
        Relation("U", 100.0, ("c",)),
    )
    q1, q2 = Query.of("q1", rs, st), Query.of("q2", st, tu)
    alone = [plan_queries(Problem(relations, (q,), 1), allow_mirs=False).load for q in (q1, q2)]
    assert alone == pytest.approx([475.0, 475.0])
    plan = plan_queries(Problem(relations, (q1, q2), 1), allow_mirs=False)
    assert plan.load == pytest.approx(800.0)
    stores = {o.name: [h.label.store.name for h in o.steps] for o in plan.orders}
    assert stores["q1/S"] == ["T", "R"]
    assert stores["q2/T"] == ["S", "U"]
    shared = {str(s.step).split("[")[0]: sorted(s.users) for s in plan.shared}
    assert shared == {"⟨S, T": ["q1/S", "q2/S"], "⟨T, S": ["q1/T", "q2/T"]}
