"""The job's multi-way queries as one CLASH problem, and the ILP's probe orders back as plans.

Each stream is a relation (one store, shared by every query that reads it). A pair of inputs
joined by ``a.col = b.col`` on bare columns gives an equality predicate (the store may be
partitioned on that column); every other conjunct naming exactly the pair becomes one theta
predicate labelled with its SQL, so that queries share a step only when they join the same way.

Statistics: rates are rows per batch per stream and selectivities are fractions of the pair
product; without measurements every stream gets the same rate and every predicate a default
by kind (`DEFAULT_SELECTIVITY`), which still lets the ILP find the shared prefixes and avoid
broadcasts. A query that reads one stream twice (a self-join) or that the optimizer's model
cannot state keeps its greedy orders (`plan.multiway`).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from streamjoin.optimizer import (
    GlobalPlan,
    JoinPredicate,
    OptimizerError,
    Problem,
    Relation,
    plan_queries,
)
from streamjoin.optimizer import Query as Planned

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from streamjoin.model import Job, Query
    from streamjoin.plan.classify import PredicateParts

DEFAULT_SELECTIVITY = {"equality": 0.01, "band": 0.05, "theta": 0.3}
"""Fraction of the pair product a predicate keeps, before any statistics are measured."""


@dataclass(frozen=True)
class ClashPlan:
    """The ILP's answer for the job: its global plan, and per query the probe order (input
    positions after the start) for each start position."""

    plan: GlobalPlan
    orders: dict[str, dict[int, tuple[int, ...]]]
    left_out: dict[str, str]
    """Queries planned greedily instead, with the reason."""


def plan_clash(
    job: Job,
    queries: Sequence[Query],
    pairs: Mapping[str, Mapping[tuple[int, int], PredicateParts]],
    *,
    rates: Mapping[str, float] | None = None,
    parallelism: int = 4,
    time_limit: float = 1.0,
) -> ClashPlan | None:
    """Solve CLASH's ILP over `queries` (three or more inputs each); None if none fits.

    Args:
        job: the job.
        queries: its multi-way queries.
        pairs: per query, the classified conjuncts of each pair of input positions (i < j).
        rates: rows per batch per stream, if measured.
        parallelism: units per store (the broadcast factor).
        time_limit: seconds for the solver; the best plan so far is used when it is hit.
    """
    planned, left_out = [], {}
    for q in queries:
        streams = [s.stream for s in q.sides]
        if len(set(streams)) != len(streams):
            left_out[q.name] = "reads a stream twice (self-joins are not in CLASH's model)"
            continue
        try:
            planned.append(_query(q, pairs[q.name]))
        except OptimizerError as err:
            left_out[q.name] = str(err)
    if not planned:
        return None
    used = sorted({name for p in planned for name in p.relations})
    attributes: dict[str, set[str]] = {name: set() for name in used}
    for p in planned:
        for pred in p.predicates:
            if pred.left_attr is not None and pred.right_attr is not None:
                attributes[pred.left].add(pred.left_attr)
                attributes[pred.right].add(pred.right_attr)
    relations = tuple(
        Relation(name, (rates or {}).get(name, 1000.0), tuple(sorted(attributes[name])))
        for name in used
    )
    problem = Problem(relations, tuple(planned), parallelism)
    # MIR stores are not executed by the runtime yet: plan over base stores only.
    plan = plan_queries(problem, time_limit, allow_mirs=False)
    orders: dict[str, dict[int, tuple[int, ...]]] = {}
    for p in planned:
        q = next(x for x in queries if x.name == p.name)
        position = {side.stream: i for i, side in enumerate(q.sides)}
        orders[q.name] = {
            position[start]: tuple(
                position[label.store.name] for label in plan.order_for(q.name, start).order.targets
            )
            for start in p.relations
        }
    return ClashPlan(plan, orders, left_out)


def _query(q: Query, pairs: Mapping[tuple[int, int], PredicateParts]) -> Planned:
    streams = [s.stream for s in q.sides]
    preds: list[JoinPredicate] = []
    for (i, j), parts in pairs.items():
        a, b = streams[i], streams[j]
        others: list[str] = []
        for key in parts.equi:
            left, right = _bare(key.left_sql), _bare(key.right_sql)
            if left is not None and right is not None:
                sel = DEFAULT_SELECTIVITY["equality"]
                preds.append(JoinPredicate(a, b, left, right, sel))
            else:
                others.append(f"{key.left_sql} = {key.right_sql}")
        kind = "band" if parts.bands or parts.window else "theta"
        others += [
            f"band {x.right_sql} - {x.left_sql} in [{x.lo:g}, {x.hi:g}]" for x in parts.bands
        ]
        if parts.window is not None:
            others.append(f"window {parts.window.describe()}")
        others += list(parts.residual)
        if others:
            label = " AND ".join(others)
            preds.append(JoinPredicate(a, b, None, None, DEFAULT_SELECTIVITY[kind], label))
    return Planned(q.name, tuple(streams), tuple(preds))


def _bare(sql: str) -> str | None:
    """`col` for a bare qualified column ``alias.col``, else None."""
    head, dot, tail = sql.partition(".")
    if dot and head.isidentifier() and tail.isidentifier():
        return tail
    return None
