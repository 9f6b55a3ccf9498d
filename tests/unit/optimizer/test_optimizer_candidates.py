"""Candidate probe orders, MIRs and partitioning options, against the paper's Fig. 3."""

from __future__ import annotations

import pytest

from streamjoin.optimizer import (
    JoinPredicate,
    Problem,
    Query,
    Relation,
    build_ilp,
    enumerate_candidates,
)
from streamjoin.optimizer.candidates import mirs_of, probe_sequences
from streamjoin.optimizer.stores import canonical

P = JoinPredicate
# Fig. 3: q1 = R(b),S(b,c),T(c) and q2 = S(c),T(c,d),U(d).
RS, ST, TU = P("R", "S", "b", "b", 0.01), P("S", "T", "c", "c", 0.01), P("T", "U", "d", "d", 0.01)
FIG3 = Problem(
    (
        Relation("R", 100.0, ("b",)),
        Relation("S", 100.0, ("b", "c")),
        Relation("T", 100.0, ("c", "d")),
        Relation("U", 100.0, ("d",)),
    ),
    (Query.of("q1", RS, ST), Query.of("q2", ST, TU)),
    parallelism=5,
)


def _names(seqs: list[tuple[object, ...]]) -> set[str]:
    return {"⟨" + ", ".join(getattr(s, "name", "") for s in seq) + "⟩" for seq in seqs}


def test_fig3_mirs() -> None:
    q1 = mirs_of(frozenset("RST"), canonical([RS, ST]))
    q2 = mirs_of(frozenset("STU"), canonical([ST, TU]))
    assert [m.name for m in q1] == ["R⋈S(R.b = S.b)", "S⋈T(S.c = T.c)"]  # no R⋈T: a cross product
    assert [m.name for m in q2] == ["S⋈T(S.c = T.c)", "T⋈U(T.d = U.d)"]
    assert q1[1] == q2[0]  # the same store, shared by both queries


@pytest.mark.parametrize(
    ("preds", "start", "expected"),
    [
        ((RS, ST), "R", {"⟨S, T⟩", "⟨S⋈T(S.c = T.c)⟩"}),
        ((RS, ST), "S", {"⟨T, R⟩", "⟨R, T⟩"}),
        ((RS, ST), "T", {"⟨S, R⟩", "⟨R⋈S(R.b = S.b)⟩"}),
        ((ST, TU), "S", {"⟨T, U⟩", "⟨T⋈U(T.d = U.d)⟩"}),
        ((ST, TU), "T", {"⟨U, S⟩", "⟨S, U⟩"}),
        ((ST, TU), "U", {"⟨T, S⟩", "⟨S⋈T(S.c = T.c)⟩"}),
    ],
)
def test_fig3_probe_orders(
    preds: tuple[JoinPredicate, ...], start: str, expected: set[str]
) -> None:
    relations = frozenset(r for p in preds for r in (p.left, p.right))
    ordered = canonical(list(preds))
    seqs = probe_sequences(start, relations, ordered, mirs_of(relations, ordered))
    assert _names(list(seqs)) == expected


def test_fig3_partitioned_candidates_for_q1_from_r() -> None:
    """σ1..σ4 = ⟨R,S,T⟩ × S∈{b,c} × T∈{c,d} and σ5, σ6 = ⟨R,S⋈T⟩ × S⋈T∈{S.b, T.d}: T[d] and
    S⋈T[T.d] are offered to q1 although only q2 can use them (the union over queries)."""
    candidates = enumerate_candidates(FIG3)
    q1_r = next(c for c in candidates.choice_sets if c.name == "q1/R")
    assert sorted(str(o) for o in q1_r.orders) == sorted(
        [
            "⟨R, S[b], T[c]⟩",
            "⟨R, S[c], T[c]⟩",
            "⟨R, S[b], T[d]⟩",
            "⟨R, S[c], T[d]⟩",
            "⟨R, S⋈T(S.c = T.c)[S.b]⟩",
            "⟨R, S⋈T(S.c = T.c)[T.d]⟩",
        ]
    )


def test_fig3_mir_maintenance_candidates() -> None:
    """ "There are four probe orders, one for sending S to the T-store and one for sending T to
    the S-store and each store can be partitioned according to two attributes"."""
    candidates = enumerate_candidates(FIG3)
    upkeep = {
        c.name: sorted(str(o) for o in c.orders)
        for c in candidates.choice_sets
        if c.maintains is not None and c.maintains.relations == ("S", "T")
    }
    assert upkeep == {
        "S⋈T(S.c = T.c)/S": ["⟨S, T[c]⟩", "⟨S, T[d]⟩"],
        "S⋈T(S.c = T.c)/T": ["⟨T, S[b]⟩", "⟨T, S[c]⟩"],
    }
    keys = {s.name: [str(k) for k in ks] for s, ks in candidates.partitionings}
    # An MIR is partitioned on attributes joining outside it, over all queries (§V).
    assert keys["S⋈T(S.c = T.c)"] == ["S.b", "T.d"]
    assert keys["R⋈S(R.b = S.b)"] == ["S.c"]
    assert keys["T⋈U(T.d = U.d)"] == ["T.c"]


def test_fig3_equal_prefixes_share_one_step_variable() -> None:
    """σ1 = ⟨R,S[b],T[c]⟩ and σ3 = ⟨R,S[b],T[d]⟩ both start with σ7 = ⟨R,S[b]⟩: their cost rows
    (rows 4 and 5 of Fig. 3) use the same y column."""
    model = build_ilp(enumerate_candidates(FIG3), "paper")
    rows = {r.name: r for r in model.rows if r.kind == "cost"}
    q1_r = next(i for i, c in enumerate(model.candidates.choice_sets) if c.name == "q1/R")
    orders = [str(o) for o in model.candidates.choice_sets[q1_r].orders]
    sigma1 = rows[f"cost q1/R #{orders.index('⟨R, S[b], T[c]⟩')}"]
    sigma3 = rows[f"cost q1/R #{orders.index('⟨R, S[b], T[d]⟩')}"]
    y7 = set(sigma1.columns[1:]) & set(sigma3.columns[1:])
    assert len(y7) == 1
    assert model.column_name(y7.pop()) == "y[⟨R, S[b]⟩]"
    # -PCost·x + Σ StepCost·y >= 0, with PCost the sum of the step costs.
    assert -sigma1.coefs[0] == pytest.approx(sum(sigma1.coefs[1:]))


def test_mirs_over_the_same_relations_with_other_predicates_are_other_stores() -> None:
    other = P("S", "T", "d", "c", 0.5)
    a = mirs_of(frozenset("RST"), canonical([RS, ST]))[1]
    b = mirs_of(frozenset("RST"), canonical([RS, other]))[1]
    assert a.relations == b.relations == ("S", "T")
    assert a != b
    assert (a.name, b.name) == ("S⋈T(S.c = T.c)", "S⋈T(S.d = T.c)")


def test_steps_are_shared_only_under_the_same_predicates() -> None:
    """Two queries joining R and S on different attributes produce different partial results:
    their R→S steps must not be one step."""
    relations = (Relation("R", 10.0, ("a", "b")), Relation("S", 10.0, ("a", "b")))
    same = Problem(
        relations,
        (Query.of("q1", P("R", "S", "a", "a", 0.1)), Query.of("q2", P("R", "S", "a", "a", 0.1))),
        2,
    )
    different = Problem(
        relations,
        (Query.of("q1", P("R", "S", "a", "a", 0.1)), Query.of("q2", P("R", "S", "b", "b", 0.1))),
        2,
    )
    assert build_ilp(enumerate_candidates(same)).steps  # shared: a y column each
    assert not build_ilp(enumerate_candidates(different)).steps


def test_no_mirs_when_disabled_and_none_for_two_way_joins() -> None:
    plain = enumerate_candidates(FIG3, allow_mirs=False)
    assert all(not o.mirs for c in plain.choice_sets for o in c.orders)
    assert all(c.is_query for c in plain.choice_sets)
    assert mirs_of(frozenset("RS"), (RS,)) == ()


def test_star_and_cycle_candidates_avoid_cross_products() -> None:
    star = (P("F", "A", "a", "a", 0.1), P("F", "B", "b", "b", 0.1), P("F", "C", "c", "c", 0.1))
    rels = frozenset("FABC")
    seqs = probe_sequences("A", rels, canonical(list(star)))
    # From a spoke the hub comes first; then the other spokes in either order.
    assert _names(list(seqs)) == {"⟨F, B, C⟩", "⟨F, C, B⟩"}
    cycle = (P("R", "S", "a", "a", 0.1), P("S", "T", "b", "b", 0.1), P("T", "R", "c", "c", 0.1))
    seqs = probe_sequences("R", frozenset("RST"), canonical(list(cycle)))
    assert _names(list(seqs)) == {"⟨S, T⟩", "⟨T, S⟩"}
