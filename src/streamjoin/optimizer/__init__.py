"""The multi-query join optimizer of CLASH (Dossinger & Michel): probe orders, partitioning and
materialized intermediate results for many multi-way joins at once, chosen by an ILP.

Pure Python (no Spark). The pipeline, one module per stage:

- :mod:`.problem` — the input: relations with rates, predicates with selectivities, queries;
- :mod:`.stores` and :mod:`.cost` — stores, steps and the paper's probe-load model (Eq. 1);
- :mod:`.candidates` — candidate probe orders over base and MIR stores (Alg. 1);
- :mod:`.ilp` — the ILP as data (Alg. 2 plus one partitioning per store);
- :mod:`.solve` — HiGHS with a time limit and a greedy start;
- :mod:`.decode` — the chosen candidates as a `GlobalPlan`;
- :mod:`.brute` — exhaustive search, the oracle on tiny instances.

Example (the paper's §V-2: the shared plan sends 800 tuples where planning each query alone
sends 950):
    >>> R, S = Relation("R", 100.0, ("a",)), Relation("S", 100.0, ("a", "b"))
    >>> T, U = Relation("T", 100.0, ("b", "c")), Relation("U", 100.0, ("c",))
    >>> q1 = Query.of("q1", JoinPredicate("R", "S", "a", "a", 0.01),
    ...               JoinPredicate("S", "T", "b", "b", 0.015))
    >>> q2 = Query.of("q2", JoinPredicate("S", "T", "b", "b", 0.015),
    ...               JoinPredicate("T", "U", "c", "c", 0.01))
    >>> plan = plan_queries(Problem((R, S, T, U), (q1, q2), 1), allow_mirs=False)
    >>> round(plan.load), [hop.label.store.name for hop in plan.order_for("q1", "S").steps]
    (800, ['T', 'R'])
"""

from __future__ import annotations

import time

from streamjoin.optimizer.brute import BruteResult, brute_force
from streamjoin.optimizer.candidates import Candidates, ChoiceSet, enumerate_candidates
from streamjoin.optimizer.decode import (
    GlobalPlan,
    PlannedOrder,
    PlannedStep,
    SharedStep,
    decode,
    recompute_load,
)
from streamjoin.optimizer.ilp import Formulation, IlpModel, build_ilp
from streamjoin.optimizer.problem import JoinPredicate, OptimizerError, Problem, Query, Relation
from streamjoin.optimizer.solve import SolveReport, solve_ilp
from streamjoin.optimizer.stores import Column, ProbeOrder, Step, Store, StoreLabel

__all__ = [
    "BruteResult",
    "Candidates",
    "ChoiceSet",
    "Column",
    "Formulation",
    "GlobalPlan",
    "IlpModel",
    "JoinPredicate",
    "OptimizerError",
    "PlannedOrder",
    "PlannedStep",
    "ProbeOrder",
    "Problem",
    "Query",
    "Relation",
    "SharedStep",
    "SolveReport",
    "Step",
    "Store",
    "StoreLabel",
    "brute_force",
    "brute_force_plan",
    "build_ilp",
    "decode",
    "enumerate_candidates",
    "plan_queries",
    "recompute_load",
    "solve_ilp",
]


def plan_queries(
    problem: Problem,
    time_limit: float = 1.0,
    *,
    allow_mirs: bool = True,
    max_mir: int | None = None,
    gap: float = 0.0,
    form: Formulation = "tight",
) -> GlobalPlan:
    """The global plan of least probe load for all queries of `problem`.

    Args:
        problem: queries and statistics.
        time_limit: seconds the solver may run; when hit, the best plan found so far is used
            (``plan.report.time_limit_hit`` says so).
        allow_mirs: False plans over base stores only (no materialized intermediate results).
        max_mir: the most relations an MIR store may join (None: any sub-join).
        gap: relative optimality gap at which the solver may stop (0: optimal).
        form: the ILP formulation, ``"tight"`` or the paper's row by row, ``"paper"`` (same
            optimum; see :mod:`.ilp`).
    """
    began = time.perf_counter()
    candidates = enumerate_candidates(problem, allow_mirs=allow_mirs, max_mir=max_mir)
    model = build_ilp(candidates, form)
    built = time.perf_counter() - began
    chosen, report = solve_ilp(model, time_limit=time_limit, gap=gap, build_seconds=built)
    return decode(candidates, chosen, report)


def brute_force_plan(problem: Problem, *, allow_mirs: bool = True) -> GlobalPlan:
    """The optimal plan by exhaustive search (tiny instances only; see :mod:`.brute`)."""
    candidates = enumerate_candidates(problem, allow_mirs=allow_mirs)
    return decode(candidates, brute_force(candidates).selection)
