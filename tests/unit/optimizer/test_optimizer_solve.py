"""Formulation sizes and rows, the HiGHS solve (time limit, greedy start), and the decoded plan."""

from __future__ import annotations

import math

import pytest

from benchmarks.ilp_scaling import workload
from streamjoin.optimizer import (
    GlobalPlan,
    JoinPredicate,
    OptimizerError,
    Problem,
    Query,
    Relation,
    build_ilp,
    decode,
    enumerate_candidates,
    plan_queries,
    recompute_load,
    solve_ilp,
)
from streamjoin.optimizer.solve import greedy_selection

P = JoinPredicate
# Two queries sharing S⋈T (golden/shared_subjoin.json): the optimum uses the MIR.
SHARED = Problem(
    (
        Relation("R", 100.0, ("b",)),
        Relation("S", 80.0, ("b", "c")),
        Relation("T", 60.0, ("c", "d")),
        Relation("U", 50.0, ("d",)),
    ),
    (
        Query.of("q1", P("R", "S", "b", "b", 0.02), P("S", "T", "c", "c", 0.01)),
        Query.of("q2", P("S", "T", "c", "c", 0.01), P("T", "U", "d", "d", 0.03)),
    ),
    parallelism=4,
)


def test_rows_of_each_family() -> None:
    candidates = enumerate_candidates(SHARED)
    for form in ("tight", "paper"):
        model = build_ilp(candidates, form)
        kinds = {row.kind for row in model.rows}
        assert kinds == {
            "choice",
            "maintenance",
            "cost",
            "mir",
            "one_partitioning",
            "partition_link",
        }
        choice = [r for r in model.rows if r.kind == "choice"]
        assert len(choice) == 6  # two queries x three start relations
        assert all(r.lower == r.upper == 1 for r in choice)
        maintenance = [r for r in model.rows if r.kind == "maintenance"]
        assert all((r.lower, r.upper) == (0, 1) for r in maintenance)
        one_key = {r.name: r.lower for r in model.rows if r.kind == "one_partitioning"}
        assert one_key["one key S"] == 1.0  # base stores: exactly one partitioning
        assert one_key["one key S⋈T(S.c = T.c)"] == 0.0  # MIR stores: at most one (only if kept)
        assert model.n_nonzeros == sum(len(r.columns) for r in model.rows)
        text = model.to_text()
        assert text.startswith(f"minimize ({form} form)")
        assert "choice q1/R:" in text


def test_forms_agree_and_report_size() -> None:
    plans = {form: plan_queries(SHARED, form=form) for form in ("tight", "paper")}
    for form, plan in plans.items():
        report = plan.report
        assert report is not None
        assert report.form == form
        assert report.optimal and not report.time_limit_hit and not report.from_start
        assert report.objective == pytest.approx(536.0)
        assert report.bound == pytest.approx(536.0)
        assert report.gap == 0.0
        assert report.variables > 0 and report.constraints > 0 and report.nonzeros > 0
        assert report.solve_seconds >= 0.0 and report.build_seconds > 0.0
    assert plans["tight"].describe()[2:] == plans["paper"].describe()[2:]


def test_decoded_plan_describes_stores_orders_mirs_and_shared_steps() -> None:
    plan = plan_queries(SHARED)
    assert [m.name for m in plan.mirs] == ["S⋈T(S.c = T.c)"]
    assert plan.partitioning() == {"R": "b", "S": "c", "T": "c", "U": "d", "S⋈T(S.c = T.c)": "S.b"}
    assert str(plan.order_for("q1", "R").order) == "⟨R, S⋈T(S.c = T.c)[S.b]⟩"
    u = plan.order_for("q2", "U")
    assert [str(hop) for hop in u.steps] == ["S⋈T(S.c = T.c)[S.b] (broadcast)"]
    assert u.cost == pytest.approx(200.0)  # |U| = 50 sent to all 4 units
    shared = {str(s.step): s.users for s in plan.shared}
    assert shared["⟨S, T[c]⟩"] == ("q1/S", "q2/S", "S⋈T(S.c = T.c)/S")
    assert plan.unshared_load > plan.load
    text = "\n".join(plan.describe())
    for words in (
        "probe load 536",
        "S⋈T(S.c = T.c): hash on S.b (MIR, maintained)",
        "MIR maintenance:",
    ):
        assert words in text
    assert "q2/U: ⟨U, S⋈T(S.c = T.c)[S.b]⟩ cost 200" in text
    with pytest.raises(OptimizerError, match="'q3'"):
        plan.order_for("q3", "R")


def test_greedy_start_is_a_valid_plan() -> None:
    candidates = enumerate_candidates(SHARED)
    plan = decode(candidates, greedy_selection(candidates))
    assert not plan.mirs
    assert recompute_load(SHARED, plan) == pytest.approx(plan.load)
    assert plan.load >= 536.0


def test_time_limit_uses_the_best_plan_so_far() -> None:
    """The paper form of 50 TPC-H-like queries takes HiGHS seconds; 10 ms is not enough."""
    problem = workload(50, 3)
    plan = plan_queries(problem, time_limit=0.01, form="paper")
    report = plan.report
    assert report is not None
    assert report.time_limit_hit and not report.optimal
    assert "time limit hit" in report.describe()
    assert math.isfinite(report.objective)
    assert plan.load == pytest.approx(report.objective, rel=1e-6)
    assert recompute_load(problem, plan) == pytest.approx(plan.load, rel=1e-9)
    # The same instance in the tight form, solved to optimality, is no dearer.
    best = plan_queries(problem, time_limit=30.0)
    assert best.report is not None and best.report.optimal
    assert best.load <= plan.load * (1 + 1e-9)


@pytest.mark.parametrize(("limit", "gap"), [(0.0, 0.0), (-1.0, 0.0), (math.inf, 0.0), (1.0, 1.5)])
def test_bad_solver_settings(limit: float, gap: float) -> None:
    model = build_ilp(enumerate_candidates(SHARED))
    with pytest.raises(OptimizerError):
        solve_ilp(model, time_limit=limit, gap=gap)


def test_decode_refuses_an_incomplete_or_inconsistent_selection() -> None:
    candidates = enumerate_candidates(SHARED)
    chosen = greedy_selection(candidates)
    first = min(chosen)
    with pytest.raises(OptimizerError, match="no probe order chosen"):
        decode(candidates, {i: k for i, k in chosen.items() if i != first})
    # q1/R through S[b] then q1/T through S[c]: S cannot be partitioned both ways.
    sets = candidates.choice_sets
    r = next(i for i, c in enumerate(sets) if c.name == "q1/R")
    t_ = next(i for i, c in enumerate(sets) if c.name == "q1/T")
    r_k = next(k for k, o in enumerate(sets[r].orders) if str(o) == "⟨R, S[b], T[c]⟩")
    t_k = next(k for k, o in enumerate(sets[t_].orders) if str(o) == "⟨T, S[c], R[b]⟩")
    with pytest.raises(OptimizerError, match="partitioned on"):
        decode(candidates, {**chosen, r: r_k, t_: t_k})


def test_recompute_load_rejects_a_tampered_plan() -> None:
    plan = plan_queries(SHARED)
    other = tuple(
        label.__class__(label.store, None) if label.store.name == "S" else label
        for label in plan.stores
    )
    tampered = GlobalPlan(
        other, plan.orders, plan.maintenance, plan.shared, plan.load, plan.unshared_load
    )
    with pytest.raises(OptimizerError, match="partitions it otherwise"):
        recompute_load(SHARED, tampered)
