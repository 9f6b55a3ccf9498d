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
    live = {"exact": {"keeps_up": False, "latency_p99_s": 9.0, "pairs": 10, "share_of_exact": 1.0}}
    live["jaqpot"] = {"keeps_up": True, "latency_p99_s": 1.5, "pairs": 8, "share_of_exact": 0.8}
    report = {"model": model, "live": {"ways": live, "rate_per_stream": 1.0, "budget": 5}}
    rows = overload_targets("overload-quick.json", report)
    assert [met for _, _, met in rows] == [True, False, True]
    lines = overload_lines({"overload-quick.json": report})
    assert sum(line.startswith("| table3") or line.startswith("| selective") for line in lines) == 8
