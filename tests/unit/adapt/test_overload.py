"""The overload loop: exact while the budget covers the arrivals, JAQPOT's split when it does
not (only in shed mode), a new split only past its thresholds, and back to exact by itself."""

from __future__ import annotations

import pytest

from streamjoin.adapt.overload import BatchStats, DirectionStats, OverloadController


def _batch(
    n: int, seconds: float, left: tuple[int, int, int], right: tuple[int, int, int]
) -> BatchStats:
    return BatchStats(n, seconds, 1.0, {"L": DirectionStats(*left), "R": DirectionStats(*right)})


def test_exact_mode_never_sheds() -> None:
    loop = OverloadController(("L", "R"), mode="exact", budget=100.0)
    for n in range(3):
        decision = loop.observe(_batch(n, 2.0, (1000, 1000, 5000), (1000, 1000, 500)))
    assert loop.decision is not None and loop.decision.exact
    assert loop.decision.demand == pytest.approx(2000.0) and loop.decision.budget == 100.0
    assert decision is None


def test_shed_mode_gives_the_budget_to_the_productive_direction_then_recovers() -> None:
    loop = OverloadController(("L", "R"), mode="shed", budget=1500.0, window=1)
    # L's rows find 5 pairs each, R's 0.5: 2000 probes a second needed, 1500 allowed.
    decision = loop.observe(_batch(0, 2.0, (1000, 1000, 5000), (1000, 1000, 500)))
    assert decision is not None and decision.batch == 1 and not decision.exact
    assert decision.allowances == pytest.approx({"L": 1.0, "R": 0.5})
    assert decision.predicted_output == pytest.approx(5000 + 250)
    # Unchanged statistics: no new analysis, the split stays.
    assert loop.observe(_batch(1, 2.0, (1000, 1000, 5000), (1000, 500, 250))) is None
    # Arrivals fall under the budget: exact again, by itself.
    back = loop.observe(_batch(2, 0.5, (500, 500, 2500), (500, 250, 125)))
    assert back is not None and back.exact


def test_a_starved_direction_keeps_a_trickle_to_stay_measured() -> None:
    loop = OverloadController(("L", "R"), mode="shed", budget=1000.0, window=1, explore=0.02)
    decision = loop.observe(_batch(0, 2.0, (1000, 1000, 5000), (1000, 1000, 500)))
    assert decision is not None
    assert decision.allowances == pytest.approx({"L": 1.0, "R": 0.02})


def test_a_new_split_must_beat_the_old_by_the_gain() -> None:
    loop = OverloadController(("L", "R"), mode="shed", budget=1500.0, window=1, gain=0.5)
    first = loop.observe(_batch(0, 2.0, (1000, 1000, 5000), (1000, 1000, 500)))
    assert first is not None
    # R a little more productive: a different split, but not 50 % more output.
    assert loop.observe(_batch(1, 2.0, (1000, 1000, 5000), (1000, 1000, 600))) is None
    assert loop.decision == first


def test_the_uniform_policy_gives_every_direction_the_same_fraction() -> None:
    loop = OverloadController(("L", "R"), mode="shed", budget=800.0, window=1, policy="uniform")
    decision = loop.observe(_batch(0, 2.0, (1000, 1000, 5000), (1000, 1000, 500)))
    assert decision is not None
    assert decision.allowances == pytest.approx({"L": 0.4, "R": 0.4})
    assert decision.predicted_output == pytest.approx(0.4 * 5500)
    assert loop.productivity("L") == pytest.approx(5.0)


def test_with_pairs_costing_work_the_budget_bounds_the_pairs_too() -> None:
    loop = OverloadController(("L", "R"), mode="shed", budget=3000.0, window=1, pairs_cost=True)
    # L: 1000 probes finding 5000 pairs (6000 units); R: 1000 probes, 500 pairs (1500 units).
    decision = loop.observe(_batch(0, 2.0, (1000, 1000, 5000), (1000, 1000, 500)))
    assert decision is not None and decision.demand == pytest.approx(7500.0)
    # Output per unit: L 5/6, R 1/3. L first, up to the budget: 3000 units, half its rows.
    assert decision.allowances == pytest.approx({"L": 0.5, "R": 0.01})
    assert decision.predicted_output == pytest.approx(2500.0)


def test_a_split_that_overruns_the_budget_on_new_figures_is_replaced() -> None:
    loop = OverloadController(
        ("L", "R"), mode="shed", budget=3000.0, window=1, pairs_cost=True, gain=0.5
    )
    first = loop.observe(_batch(0, 2.0, (1000, 1000, 5000), (1000, 1000, 500)))
    assert first is not None and first.allowances["L"] == pytest.approx(0.5)
    # The window fills: L's probes now find 10 pairs each. Half its rows probing would cost
    # 5,500 units against 3,000, so the split goes, whatever the gain in predicted output.
    again = loop.observe(_batch(1, 2.0, (1000, 500, 5000), (1000, 10, 5)))
    assert again is not None
    assert again.allowances["L"] == pytest.approx((3000 - 0.01 * 1000 * 1.5) / 11000, rel=0.02)


def test_a_batchs_own_arrivals_are_split_within_the_budget() -> None:
    loop = OverloadController(("L", "R"), mode="shed", budget=7000.0, window=1, pairs_cost=True)
    # L: 6 units a row (its probe, 5 pairs), R: 1.5 units; 7500 needed, 7000 allowed.
    decision = loop.observe(_batch(0, 2.0, (1000, 1000, 5000), (1000, 1000, 500)))
    assert decision is not None
    latest = loop.latest()
    assert latest is not None
    budget, productivity = latest
    assert budget == pytest.approx(7000.0)
    assert productivity == pytest.approx({"L": 5.0, "R": 0.5})
    assert decision.allowances == pytest.approx({"L": 1.0, "R": 2 / 3})
    # A batch at the rates the split was made at: the same split.
    rows = {"L": 1000.0, "R": 1000.0}
    assert loop.split(rows, productivity, budget) == pytest.approx(decision.allowances)
    # R's rate triples in this batch: R's probes get what L leaves, a third as many each.
    split = loop.split({"L": 1000.0, "R": 3000.0}, productivity, budget)
    assert split == pytest.approx({"L": 1.0, "R": 2 / 9})
    # A batch the budget covers is exact.
    calm = loop.split({"L": 500.0, "R": 500.0}, productivity, budget)
    assert calm == pytest.approx({"L": 1.0, "R": 1.0})


def test_a_chains_directions_are_split_along_their_paths() -> None:
    # (a ⋈ b) ⋈ c: a's and b's pairs go on to probe c as the combinations a+b.
    routes = {"a": ("a+b",), "b": ("a+b",), "c": ()}
    loop = OverloadController(
        ("a", "b", "c"), mode="shed", budget=1000.0, window=1, pairs_cost=True, routes=routes
    )
    figures = {
        # a: 100 rows, each finds 2 b rows; b: 1000 rows, 0.2 a rows each; 600 combinations,
        # each finds 1 c row; c: 100 rows, 1 combination each.
        "a": DirectionStats(100, 100, 200),
        "b": DirectionStats(1000, 1000, 200),
        "a+b": DirectionStats(400, 400, 400),
        "c": DirectionStats(100, 100, 100),
    }
    decision = loop.observe(BatchStats(0, 2.0, 1.0, figures))
    assert decision is not None
    # Work a unit of each path: a: 1 + 2 + 2 = 5 for 2 rows; b: 1 + 0.2 + 0.2 = 1.4 for 0.2;
    # c: 1 + 1 = 2 for 1. Exact needs 500 + 1400 + 200 = 2100; the 1000 go to a, then c, then
    # b: 500, 200, and 300 of b's 1400.
    assert decision.demand == pytest.approx(2100.0)
    assert decision.allowances == pytest.approx({"a": 1.0, "b": 300 / 1400, "c": 1.0})
    latest = loop.latest()
    assert latest is not None
    assert loop.outputs_per_probe("a", latest[1]) == pytest.approx(2.0)
    assert loop.outputs_per_probe("b", latest[1]) == pytest.approx(0.2)


def test_freshness_keeps_a_chains_combinations_refreshed() -> None:
    # (a ⋈ b) ⋈ c with c's probes the most productive: on throughput alone a and b starve,
    # and the combinations a+b, which c's rows probe, go stale.
    routes = {"a": ("a+b",), "b": ("a+b",), "c": ()}
    stay = dict.fromkeys(("a", "b", "c", "a+b"), 10.0)
    figures = {
        "a": DirectionStats(100, 100, 10),
        "b": DirectionStats(100, 100, 10),
        "a+b": DirectionStats(20, 20, 20),
        "c": DirectionStats(100, 100, 1000),
    }
    chosen: dict[float | None, dict[str, float]] = {}
    for fresh in (None, 40.0):
        loop = OverloadController(
            ("a", "b", "c"),
            mode="shed",
            budget=1100.0,
            window=1,
            pairs_cost=True,
            routes=routes,
            residence=stay,
            freshness={} if fresh is None else dict.fromkeys("abc", fresh),
        )
        decision = loop.observe(BatchStats(0, 2.0, 1.0, figures))
        assert decision is not None and decision.feasible
        chosen[fresh] = decision.allowances
    assert chosen[None] == pytest.approx({"a": 0.01, "b": 0.01, "c": 1.0})
    # 200 combinations held 10 s, a row of a 10 s window at most 40 s old in an output: 200 /
    # 30 = 6.7 a second into a+b, 80 of the 1100 units (a probe of a or b: 1.2 units, 0.1 in).
    covered = chosen[40.0]
    assert covered["a"] * 120 + covered["b"] * 120 == pytest.approx(80.0, rel=0.05)
    assert covered["c"] == pytest.approx(1020 / 1100, rel=0.01)
