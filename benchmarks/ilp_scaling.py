"""How long the CLASH ILP takes as queries grow in number and size (the paper's Fig. 9(e)/(f)).

Run as ``python -m benchmarks.ilp_scaling [--quick] [--time-limit S]``. It plans 10, 50 and 100
queries of three relations each over seven TPC-H-like streams in the tight ILP form (the
default); without ``--quick`` it also plans 10 and 30 queries of four relations, runs the 10,
50 and 100 three-relation instances in the paper's row-by-row form too, and takes the median of
three runs. One row per instance: queries, relations per query, form, streams used, ILP
variables and rows, build time (candidates and formulation, in Python), HiGHS solve time (wall
and CPU: on a loaded machine the CPU time is the steadier number), total wall time, the plan's
probe load (``objective``), the load of the same probe orders run without sharing
(``unshared``), the paper's "individual optimization" baseline (``alone``: each query planned
by itself, loads summed; tight rows only), how many MIR stores the plan keeps, and whether the
solve was proven optimal or stopped by the time limit. The last line is the same as JSON.

The queries come from templates: every way of joining three (or four) of the streams along the
join graph below, one predicate variant per joined pair, shuffled with a fixed seed. With seven
streams the queries overlap heavily, so sub-joins (orders⋈lineitem, partsupp⋈part, ...) recur
in many of them: the sharing the ILP is for. Rates and selectivities are made up to resemble
TPC-H's proportions (per second): each line item matches one order, a part has four suppliers,
25 nations. ``lineitem.linestatus = orders.orderstatus`` is the paper's many-match join,
``customer.custkey = nation.nationkey`` its few-match one; theta predicates (labelled) stand
for band and inequality joins.

The issue's target is 100 three-relation queries solved in under one second (the paper needed
120 ms with Gurobi); the JSON line says whether build + solve stayed under it, in wall time and
in CPU time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
import typing as t

from streamjoin.optimizer import JoinPredicate, Problem, Query, Relation, plan_queries
from streamjoin.optimizer.candidates import enumerate_candidates
from streamjoin.optimizer.decode import decode
from streamjoin.optimizer.ilp import build_ilp
from streamjoin.optimizer.solve import solve_ilp

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from streamjoin.optimizer.ilp import Formulation

PARALLELISM = 8
SEED = 5

# name → (rate per second, join attributes)
STREAMS: dict[str, tuple[float, tuple[str, ...]]] = {
    "lineitem": (6000.0, ("orderkey", "partkey", "suppkey", "linestatus", "shipdate")),
    "orders": (1500.0, ("orderkey", "custkey", "orderstatus", "orderdate")),
    "customer": (150.0, ("custkey", "nationkey")),
    "partsupp": (800.0, ("partkey", "suppkey")),
    "part": (200.0, ("partkey", "size")),
    "supplier": (10.0, ("suppkey", "nationkey")),
    "nation": (1.0, ("nationkey",)),
}


def _eq(left: str, la: str, right: str, ra: str, sel: float) -> JoinPredicate:
    return JoinPredicate(left, right, la, ra, sel)


# The join graph: predicate variants per pair of streams (a variant is a conjunction).
JOINS: dict[tuple[str, str], tuple[tuple[JoinPredicate, ...], ...]] = {
    ("lineitem", "orders"): (
        (_eq("lineitem", "orderkey", "orders", "orderkey", 1 / 1500),),
        (_eq("lineitem", "linestatus", "orders", "orderstatus", 1 / 3),),
        (_eq("lineitem", "shipdate", "orders", "orderdate", 1 / 2500),),
        (JoinPredicate("lineitem", "orders", None, None, 0.002, "shipdate within 7 days"),),
        (JoinPredicate("lineitem", "orders", None, None, 0.1, "extendedprice > totalprice / 2"),),
    ),
    ("lineitem", "part"): ((_eq("lineitem", "partkey", "part", "partkey", 1 / 200),),),
    ("lineitem", "supplier"): ((_eq("lineitem", "suppkey", "supplier", "suppkey", 1 / 10),),),
    ("lineitem", "partsupp"): (
        (_eq("lineitem", "partkey", "partsupp", "partkey", 4 / 800),),
        (
            _eq("lineitem", "partkey", "partsupp", "partkey", 4 / 800),
            _eq("lineitem", "suppkey", "partsupp", "suppkey", 80 / 800),
        ),
        (JoinPredicate("lineitem", "partsupp", None, None, 0.2, "supplycost < extendedprice"),),
    ),
    ("customer", "orders"): (
        (_eq("orders", "custkey", "customer", "custkey", 1 / 150),),
        (JoinPredicate("orders", "customer", None, None, 0.001, "totalprice > acctbal"),),
    ),
    ("customer", "nation"): (
        (_eq("customer", "nationkey", "nation", "nationkey", 1.0),),
        # The paper's low-selectivity join: only the lowest custkeys equal a nationkey.
        (_eq("customer", "custkey", "nation", "nationkey", 0.004),),
    ),
    ("nation", "supplier"): ((_eq("supplier", "nationkey", "nation", "nationkey", 1.0),),),
    ("customer", "supplier"): ((_eq("customer", "nationkey", "supplier", "nationkey", 1 / 25),),),
    ("part", "partsupp"): (
        (_eq("partsupp", "partkey", "part", "partkey", 1 / 200),),
        (JoinPredicate("partsupp", "part", None, None, 0.3, "retailprice > supplycost"),),
    ),
    ("partsupp", "supplier"): (
        (_eq("partsupp", "suppkey", "supplier", "suppkey", 1 / 10),),
        (JoinPredicate("partsupp", "supplier", None, None, 0.3, "availqty > acctbal"),),
    ),
    ("lineitem", "nation"): ((_eq("lineitem", "suppkey", "nation", "nationkey", 0.0001),),),
    ("part", "supplier"): ((_eq("part", "size", "supplier", "nationkey", 0.02),),),
}


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if (a, b) in JOINS else (b, a)


def _connected(names: Sequence[str], pairs: Sequence[tuple[str, str]]) -> bool:
    seen, todo = {names[0]}, [names[0]]
    while todo:
        here = todo.pop()
        for a, b in pairs:
            other = b if a == here else a if b == here else None
            if other is not None and other not in seen:
                seen.add(other)
                todo.append(other)
    return len(seen) == len(names)


def templates(size: int) -> list[tuple[tuple[str, ...], tuple[JoinPredicate, ...]]]:
    """Every connected `size`-stream query of the join graph: a spanning set of joined pairs
    (a tree, or a cycle when the pairs close one) and one predicate variant per pair."""
    out = []
    for names in itertools.combinations(sorted(STREAMS), size):
        pairs = [p for p in itertools.combinations(names, 2) if JOINS.get(_pair(*p))]
        for count in range(size - 1, len(pairs) + 1):
            for chosen in itertools.combinations(pairs, count):
                if not _connected(names, chosen):
                    continue
                variants = [JOINS[_pair(*p)] for p in chosen]
                for combo in itertools.product(*variants):
                    out.append((names, tuple(p for v in combo for p in v)))
    return out


def workload(n_queries: int, size: int, seed: int = SEED) -> Problem:
    """`n_queries` distinct queries of `size` streams, drawn from `templates` with `seed`."""
    pool = templates(size)
    if n_queries > len(pool):
        msg = f"only {len(pool)} distinct {size}-stream queries, asked for {n_queries}"
        raise ValueError(msg)
    random.Random(seed).shuffle(pool)
    queries = tuple(
        Query(f"q{i + 1}", names, preds) for i, (names, preds) in enumerate(pool[:n_queries])
    )
    used = sorted({name for q in queries for name in q.relations})
    relations = tuple(Relation(n, STREAMS[n][0], STREAMS[n][1]) for n in used)
    return Problem(relations, queries, PARALLELISM)


def alone_load(problem: Problem, time_limit: float) -> float:
    """The paper's "individual optimization" baseline: each query planned alone, loads summed."""
    total = 0.0
    for query in problem.queries:
        used = [problem.relation(name) for name in query.relations]
        single = Problem(tuple(used), (query,), problem.parallelism)
        total += plan_queries(single, time_limit).load
    return total


def run_one(
    n_queries: int, size: int, form: Formulation, time_limit: float, repeats: int, alone: bool
) -> dict[str, t.Any]:
    """Plan one instance `repeats` times; the row reports the median times."""
    problem = workload(n_queries, size)
    baseline = alone_load(problem, time_limit) if alone else None
    builds, build_cpus, solves, cpus = [], [], [], []
    row: dict[str, t.Any] = {}
    for _ in range(repeats):
        began, began_cpu = time.perf_counter(), time.process_time()
        candidates = enumerate_candidates(problem)
        model = build_ilp(candidates, form)
        built = time.perf_counter() - began
        build_cpus.append(time.process_time() - began_cpu)
        chosen, report = solve_ilp(model, time_limit=time_limit, build_seconds=built)
        plan = decode(candidates, chosen, report)
        builds.append(built)
        solves.append(report.solve_seconds)
        cpus.append(report.solve_cpu_seconds)
        row = {
            "queries": n_queries,
            "relations_per_query": size,
            "form": form,
            "streams": len(problem.relations),
            "probe_orders": candidates.order_count,
            "variables": report.variables,
            "constraints": report.constraints,
            "objective": report.objective,
            "plan_load": plan.load,
            "unshared_load": plan.unshared_load,
            "alone_load": baseline,
            "mirs": len(plan.mirs),
            "shared_steps": len(plan.shared),
            "status": report.status,
            "optimal": report.optimal,
            "time_limit_hit": report.time_limit_hit,
        }
    row["build_ms"] = 1e3 * statistics.median(builds)
    row["solve_ms"] = 1e3 * statistics.median(solves)
    row["solve_cpu_ms"] = 1e3 * statistics.median(cpus)
    row["total_ms"] = row["build_ms"] + row["solve_ms"]
    row["total_cpu_ms"] = 1e3 * statistics.median(build_cpus) + row["solve_cpu_ms"]
    return row


COLUMNS = (
    ("queries", "queries", 7, "d"),
    ("rel/q", "relations_per_query", 5, "d"),
    ("form", "form", 5, ""),
    ("streams", "streams", 7, "d"),
    ("vars", "variables", 6, "d"),
    ("rows", "constraints", 6, "d"),
    ("build ms", "build_ms", 8, ".0f"),
    ("solve ms", "solve_ms", 8, ".0f"),
    ("cpu ms", "solve_cpu_ms", 7, ".0f"),
    ("total ms", "total_ms", 8, ".0f"),
    ("objective", "objective", 10, ".4g"),
    ("unshared", "unshared_load", 10, ".4g"),
    ("alone", "alone_load", 10, ".4g"),
    ("MIRs", "mirs", 4, "d"),
    ("optimal", "optimal", 7, ""),
    ("limit hit", "time_limit_hit", 9, ""),
)


def _line(cells: Sequence[str]) -> str:
    return "  ".join(f"{c:>{w}}" for c, (_, _, w, _) in zip(cells, COLUMNS, strict=True))


def _cell(value: object, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ilp_scaling", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3-relation queries, tight form, once")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per solve")
    args = parser.parse_args(argv)
    cases: list[tuple[int, int, Formulation]] = [(10, 3, "tight"), (50, 3, "tight")]
    cases.append((100, 3, "tight"))
    if not args.quick:
        cases += [(10, 4, "tight"), (30, 4, "tight")]
        cases += [(10, 3, "paper"), (50, 3, "paper"), (100, 3, "paper")]
    repeats = 1 if args.quick else 3
    solve_ilp(build_ilp(enumerate_candidates(workload(2, 3))))  # load HiGHS before timing
    print(_line([title for title, _, _, _ in COLUMNS]))
    rows = []
    for n_queries, size, form in cases:
        row = run_one(n_queries, size, form, args.time_limit, repeats, alone=form == "tight")
        rows.append(row)
        print(_line([_cell(row[key], spec) for _, key, _, spec in COLUMNS]), flush=True)
    target = next(r for r in rows if (r["queries"], r["relations_per_query"]) == (100, 3))
    summary = {
        "benchmark": "ilp_scaling",
        "time_limit_s": args.time_limit,
        # Build + solve, proven optimal; wall time, and CPU time for a loaded machine.
        "target_100x3_under_1s": target["total_ms"] < 1000 and bool(target["optimal"]),
        "target_100x3_under_1s_cpu": target["total_cpu_ms"] < 1000 and bool(target["optimal"]),
        "rows": rows,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
