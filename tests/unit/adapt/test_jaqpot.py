"""JAQPOT's controller against the paper's worked examples and, on random small plans, against
the exact LP of the same fractional model (`adapt.jaqpot_lp`)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.adapt.jaqpot import Hop, InputPath, cover, grepp, jaqpot, refresh_rates
from streamjoin.adapt.jaqpot_lp import min_cover, optimum


def _fig10(rate: float = 1000.0) -> list[InputPath]:
    """(A ⋈ B) ⋈ C of Fig. 10 (ρ_h: a⋉S_B 0.5, b⋉S_A 5, ab⋉S_C 5, c⋉S_AB 1)."""
    return [
        InputPath("A", rate, (Hop(0.5), Hop(5.0, "AB", 100.0))),
        InputPath("B", rate, (Hop(5.0), Hop(5.0, "AB", 100.0))),
        InputPath("C", rate, (Hop(1.0),)),
    ]


def test_path_productivity_and_grepp_reproduce_the_worked_examples() -> None:
    a, b, c = _fig10()
    assert (a.productivity, b.productivity, c.productivity) == pytest.approx((2.5 / 1.5, 25 / 6, 1))
    chosen = jaqpot(_fig10(), 300.0)
    assert chosen.resources == {"B": 300.0}  # the most productive path takes it all
    assert chosen.allowances["B"] == pytest.approx((50.0, 250.0))  # producer-consumer match
    assert chosen.output == pytest.approx(1250.0)  # 1.67× the best heuristic's 750
    # Table 2, μ = 30: Path^B (ρ_h 5/11 then 1) takes all, λ'_b = 20.62, λ'_ab = 9.38.
    table2 = [
        InputPath("A", 100.0, (Hop(4 / 11), Hop(1.0))),
        InputPath("B", 100.0, (Hop(5 / 11), Hop(1.0))),
        InputPath("C", 100.0, (Hop(0.1),)),
    ]
    chosen = jaqpot(table2, 30.0)
    assert chosen.allowances["B"] == pytest.approx((30 * 11 / 16, 30 * 5 / 16))
    assert chosen.output == pytest.approx(9.375)


def test_capacities_pass_the_rest_of_the_budget_on() -> None:
    paths = _fig10(rate=40.0)  # Path^B absorbs at most 40 · 6 = 240
    assert grepp(paths, 300.0) == pytest.approx({"B": 240.0, "A": 60.0})
    assert grepp(paths, 10_000.0) == pytest.approx({"B": 240.0, "A": 60.0, "C": 40.0})


def test_freshness_is_covered_first_and_its_resources_count() -> None:
    paths = _fig10()
    # S_AB must take 200 rows a unit: Path^B stores 5/6 of its resources there, Path^A 1/3.
    chosen = jaqpot(paths, 300.0, {"AB": 200.0})
    assert chosen.feasible and chosen.covered["AB"] >= 200.0 - 1e-9
    assert chosen.reserved == pytest.approx(240.0)
    assert chosen.output == pytest.approx(1250.0)  # (the cover's path is the best one anyway)
    starved = jaqpot(paths, 100.0, {"AB": 200.0})
    assert not starved.feasible


def test_refresh_rates_follow_the_freshness_predicates() -> None:
    paths = _fig10()
    paths = [InputPath(p.stream, p.rate, p.hops, rows=500.0) for p in paths]
    # A row spends 500 / 1000 = 0.5 in its leaf; F = 1.5 leaves 1.0 for S_AB's 100 rows.
    assert refresh_rates(paths, {"A": 1.5}) == pytest.approx({"AB": 100.0})
    assert refresh_rates(paths, {"A": 1.5, "B": 0.75}) == pytest.approx({"AB": 400.0})
    assert refresh_rates(paths, {"A": 0.4}) is None  # shorter than the leaf residence


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[InputPath], float, dict[str, float]]:
    """Up to five paths of one to three hops over up to three susceptible states."""
    states = ["S1", "S2", "S3"][: draw(st.integers(0, 3))]
    paths = []
    for i in range(draw(st.integers(1, 5))):
        hops = [Hop(draw(st.floats(0.05, 8.0)))]
        for _ in range(draw(st.integers(0, 2))):
            state = draw(st.sampled_from(states)) if states else None
            hops.append(Hop(draw(st.floats(0.05, 8.0)), state, 10.0))
        paths.append(InputPath(f"P{i}", draw(st.floats(1.0, 500.0)), tuple(hops)))
    budget = draw(st.floats(1.0, 3000.0))
    needed = {s: draw(st.floats(0.0, 200.0)) for s in states}
    return paths, budget, needed


@settings(max_examples=150, deadline=None)
@given(plans())
def test_grepp_equals_the_lp_optimum_without_freshness(
    plan: tuple[list[InputPath], float, dict[str, float]],
) -> None:
    paths, budget, _ = plan
    assert jaqpot(paths, budget).output == pytest.approx(optimum(paths, budget).output, rel=1e-7)


@settings(max_examples=150, deadline=None)
@given(plans())
def test_jaqpot_meets_freshness_within_the_papers_approximation(
    plan: tuple[list[InputPath], float, dict[str, float]],
) -> None:
    paths, budget, needed = plan
    needed = {s: r for s, r in needed.items() if any(s in p.refresh() for p in paths)}
    chosen, best = jaqpot(paths, budget, needed), optimum(paths, budget, needed)
    least = min_cover(paths, needed)
    # Feasible exactly when the LP says a cover fits the budget (up to rounding at the edge).
    if least is not None and least < budget * (1 - 1e-6):
        assert chosen.feasible
    if not chosen.feasible:
        return
    for state, rate in needed.items():
        assert chosen.covered.get(state, 0.0) >= rate * (1 - 1e-7) - 1e-9
    assert sum(chosen.resources.values()) <= budget * (1 + 1e-9) + 1e-9
    # The greedy cover within ln(m)+1 of the least (GH-WMSCP's bound), m susceptible states.
    assert least is not None
    harmonic = sum(1 / k for k in range(1, len(needed) + 1)) if needed else 1.0
    # (HiGHS: 1e-7 feasibility, on rates summed over the states.)
    assert chosen.reserved <= least * harmonic * (1 + 1e-7) + 1e-5
    # Never above the exact optimum; and, given its cover, the best output the rest can buy
    # (GrePP's optimality in the continuous model). Freshness first is the paper's choice:
    # a costlier cover through more productive paths may yield more (its §5.2, the digest).
    assert chosen.output <= best.output * (1 + 1e-7) + 1e-9
    covering = cover(paths, needed, budget) or {}
    rest = optimum(paths, budget, needed, floor=covering)
    assert chosen.output == pytest.approx(rest.output, rel=1e-6, abs=1e-6)


def test_cover_says_when_capacities_cannot_refresh_a_state() -> None:
    paths = [InputPath("A", 1.0, (Hop(1.0), Hop(1.0, "S", 1.0)))]  # at most 1 row a unit in S
    assert cover(paths, {"S": 0.5}) == pytest.approx({"A": 1.0})
    assert cover(paths, {"S": 2.0}) is None
    assert min_cover(paths, {"S": 2.0}) is None
    assert math.isclose(min_cover(paths, {"S": 0.5}) or 0.0, 1.0)


def test_a_cover_takes_back_what_later_choices_supply_too() -> None:
    # A stores its rows in both susceptible states, C only in S2 and more productively: the
    # greedy step closes S2 with C first, then S1 with A, which covers S2 over again.
    a = InputPath("A", 1.0, (Hop(4.0), Hop(1.0, "S1", 1.0), Hop(1.0, "S2", 1.0)))
    c = InputPath("C", 1.0, (Hop(8.0), Hop(1.0, "S2", 1.0)))
    needed = {"S1": 2.0, "S2": 2.0}
    assert min_cover([a, c], needed) == pytest.approx(4.5)
    assert cover([a, c], needed, budget=5.0) == pytest.approx({"A": 4.5})
    chosen = jaqpot([a, c], 5.0, needed)
    assert chosen.feasible
    assert chosen.covered["S1"] >= 2.0 - 1e-9
    assert chosen.covered["S2"] >= 2.0 - 1e-9


def test_a_cover_over_a_hop_that_finds_nothing() -> None:
    # a's combinations a+b find no c row: a's path stores none in a+b+c, which c covers.
    a = InputPath("a", 1.0, (Hop(1.0), Hop(0.0, "a+b", 50.0), Hop(1.0, "a+b+c", 50.0)))
    c = InputPath("c", 1.0, (Hop(1.0), Hop(1.0, "a+b+c", 50.0)))
    needed = {"a+b": 0.2, "a+b+c": 0.2}
    given = cover([a, c], needed, budget=10.0)
    assert given is not None
    assert given["a"] * a.refresh()["a+b"] >= 0.2 - 1e-9
    assert given["c"] * c.refresh()["a+b+c"] >= 0.2 - 1e-9


def test_a_stream_without_arrivals_needs_no_refresh() -> None:
    quiet = InputPath("a", 0.0, (Hop(1.0), Hop(1.0, "a+b", 10.0)), rows=0.0)
    busy = InputPath("b", 10.0, (Hop(1.0), Hop(1.0, "a+b", 10.0)), rows=100.0)
    assert refresh_rates([quiet, busy], {"a": 20.0, "b": 20.0}) == pytest.approx({"a+b": 1.0})
