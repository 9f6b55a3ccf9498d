"""Golden instances: the ILP's plan equals brute force and the recorded plan.

Each file under ``golden/`` holds a tiny problem (2-way, 3-way chain, star, cycle, two queries
sharing a sub-join, 4-way chain) and, under ``expected``, the optimal probe load, the chosen
probe orders, the MIR maintenance orders, the partitioning of every store and the ILP's size in
both formulations. The test re-solves every instance with HiGHS in both formulations and checks:

- the ILP objective equals the brute-force optimum (relative 1e-6), and the optimum is unique
  (so the chosen orders are a fair thing to compare);
- the plan is the brute-force plan, and it equals the golden file;
- the decoded plan, recomputed from its parts, costs the ILP objective.

To rewrite the ``expected`` sections after an intended change:
``STREAMJOIN_REGEN_GOLDEN=1 python -m pytest tests/unit/optimizer -k golden``, then review the
diff. The brute-force checks run in that mode too, so a regenerated file is still an optimum.
"""

from __future__ import annotations

import json
import os
import typing as t
from pathlib import Path

import pytest

from streamjoin.optimizer import (
    GlobalPlan,
    Problem,
    brute_force,
    decode,
    enumerate_candidates,
    plan_queries,
    recompute_load,
)
from streamjoin.optimizer.ilp import build_ilp

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("STREAMJOIN_REGEN_GOLDEN") == "1"
FILES = sorted(GOLDEN.glob("*.json"))


def _summary(plan: GlobalPlan) -> dict[str, t.Any]:
    return {
        "orders": {o.name: str(o.order) for o in plan.orders},
        "maintenance": {o.name: str(o.order) for o in plan.maintenance},
        "partitioning": plan.partitioning(),
    }


def test_golden_files_exist() -> None:
    names = {f.stem for f in FILES}
    assert {"two_way", "chain3", "star4", "cycle3", "shared_subjoin", "chain4"} <= names


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_golden(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    problem = Problem.from_dict(data["problem"])
    allow_mirs = bool(data.get("allow_mirs", True))
    candidates = enumerate_candidates(problem, allow_mirs=allow_mirs)

    brute = brute_force(candidates)
    assert brute.optimal_plans == 1, f"{path.stem}: the optimum is not unique; change the rates"
    brute_plan = decode(candidates, brute.selection)
    assert brute_plan.load == pytest.approx(brute.load, rel=1e-12)

    plans = {
        form: plan_queries(problem, time_limit=30.0, allow_mirs=allow_mirs, form=form)
        for form in ("tight", "paper")
    }
    for form, plan in plans.items():
        assert plan.report is not None
        assert plan.report.optimal, f"{form}: {plan.report.status}"
        assert plan.report.objective == pytest.approx(brute.load, rel=1e-6), form
        assert plan.load == pytest.approx(brute.load, rel=1e-6), form
        assert recompute_load(problem, plan) == pytest.approx(plan.load, rel=1e-12), form
        assert _summary(plan) == _summary(brute_plan), form

    sizes = {
        form: [model.n_columns, len(model.rows)]
        for form in ("tight", "paper")
        for model in [build_ilp(candidates, form)]
    }
    actual = {"objective": brute.load, **_summary(brute_plan), "ilp_size": sizes}

    if REGEN:
        data["expected"] = actual
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        path.write_text(text, encoding="utf-8")
    expected = data.get("expected")
    assert expected is not None, f"{path.name} has no expected plan; regenerate (module doc)"
    assert actual["objective"] == pytest.approx(expected["objective"], rel=1e-9)
    assert actual["orders"] == expected["orders"]
    assert actual["maintenance"] == expected["maintenance"]
    assert actual["partitioning"] == expected["partitioning"]
    assert actual["ilp_size"] == expected["ilp_size"]
