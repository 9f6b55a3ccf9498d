"""The overload benchmark's model (`benchmarks.overload_model`) and its RESULTS.md rows."""

from __future__ import annotations

import random

import pytest

from benchmarks.overload_model import Plan, along, demand, draw_plan, random_policy, run_model
from benchmarks.report_overload import overload_lines, overload_targets
from streamjoin.adapt.jaqpot_baselines import evaluate


def _exact(plan: Plan) -> float:
    return evaluate(plan.root, {n: float("inf") for names in plan.directions for n in names})


@pytest.mark.parametrize("shape", ["linear", "bushy"])
def test_random_shedding_yields_the_budgets_share_of_exact(shape: str) -> None:
    plan = draw_plan(random.Random(3), shape, 5.0, 0, "selective")
    out = evaluate(plan.root, random_policy(plan, 0.4 * demand(plan)))
    assert out == pytest.approx(0.4 * _exact(plan), rel=1e-9)
    full = along(plan, {p.stream: p.capacity for p in plan.paths})
    assert evaluate(plan.root, full) == pytest.approx(_exact(plan), rel=1e-9)


def test_the_model_run_and_its_rows() -> None:
    model = run_model(seeds=2, seed=1)
    for case in model["cases"]:
        shares = case["share_of_exact"]
        # JAQPOT is the LP's optimum, and no baseline that keeps freshness beats it.
        assert case["jaqpot_over_lp"] == pytest.approx(1.0, abs=1e-3)
        assert shares["random"] == pytest.approx(0.4, abs=1e-6)
        fresh = [n for n, bad in case["freshness_violations"].items() if not bad and n != "lp"]
        assert all(shares["jaqpot"] >= shares[n] - 1e-9 for n in fresh)
        assert case["freshness_violations"]["jaqpot"] == 0
    ways = {"exact": {"keeps_up": True, "latency_p99_s": 2.0, "pairs": 10, "share_of_exact": 1.0}}
    ways["jaqpot"] = {"keeps_up": True, "latency_p99_s": 1.5, "pairs": 8, "share_of_exact": 0.65}
    ways["uniform"] = {"keeps_up": True, "latency_p99_s": 1.5, "pairs": 8, "share_of_exact": 0.45}
    heavy = {w: r | {"keeps_up": False, "drained": True} for w, r in ways.items()}
    heavy["exact"]["latency_growth"], heavy["jaqpot"]["latency_growth"] = 4.5, 0.9
    live = [
        {
            "partners": 1,
            "ways": ways,
            "rate_per_stream": 1.0,
            "budget": 5,
            "budget_from": "measured",
        },
        {
            "partners": 200,
            "ways": heavy,
            "rate_per_stream": 2.0,
            "budget": None,
            "budget_from": "the trigger",
        },
        {
            "streams": 4,
            "partners": 1,
            "ways": ways,
            "rate_per_stream": 1.0,
            "budget": 5,
            "budget_from": "measured",
        },
    ]
    report = {"model": model, "live": live}
    rows = {target.split(": ", 1)[1]: met for target, _, met in overload_targets("o.json", report)}
    # Rates 1:10: JAQPOT gives the slow stream's probes what they need (≈ 67 % of exact's pairs
    # at 40 % of its work, uniform shedding 40 %); the paper's heuristics are not 2× behind.
    assert rows == {
        "JAQPOT within 2 % of the LP optimum, freshness met (model)": True,
        "rates 1:10, two-way, at 40 % budget: JAQPOT ≥ 1.5× uniform shedding (model)": True,
        "rates 1:10, linear, at 40 % budget: JAQPOT ≥ 1.3× uniform shedding (model)": True,
        "rates 1:10, four streams: ≥ 2× the paper's best heuristic (model)": False,
        "rates 1:10, two-way, live at 40 % budget: JAQPOT ≥ 1.5× uniform shedding": False,
        "rates 1:10, four-way linear, live at 40 % budget: JAQPOT ≥ 1.3× uniform shedding": True,
        "latency bounded under shedding where exact's grows": True,
    }
    lines = overload_lines({"overload-quick.json": report})
    assert sum(line.startswith("| table3") or line.startswith("| selective") for line in lines) == 8
    assert sum(line.startswith("| asymmetric") for line in lines) == 5
    assert sum(line.startswith("| 2 streams, 1 partner(s)") for line in lines) == 3
    assert sum(line.startswith("| 4 streams") for line in lines) == 3
