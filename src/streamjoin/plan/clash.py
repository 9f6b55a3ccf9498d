"""The job's multi-way queries as one CLASH problem, and the ILP's probe orders back as plans.

Each stream is a relation (one store, shared by every query that reads it). A pair of inputs
joined by ``a.col = b.col`` on bare columns gives an equality predicate (the store may be
partitioned on that column); every other conjunct naming exactly the pair becomes one theta
predicate labelled with its SQL, so that queries share a step only when they join the same way.

Statistics: rates are rows per batch per stream and selectivities are new joined pairs per
batch over the product of the two rates. The runtime measures both once per epoch (selectivities
by counting each distinct pair join on a sample of the batch, `pair_measures`); before any
measurement every stream gets the same rate and every predicate a default by kind
(`DEFAULT_SELECTIVITY`), which still lets the ILP find the shared prefixes and avoid broadcasts.
A query that reads one stream twice (a self-join) or that the optimizer's model cannot state
keeps its greedy orders (`plan.multiway`).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, replace

from streamjoin.optimizer import (
    GlobalPlan,
    JoinPredicate,
    OptimizerError,
    Problem,
    Relation,
    Store,
    plan_queries,
)
from streamjoin.optimizer import Query as Planned

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from streamjoin.model import Job, Query
    from streamjoin.plan.parts import PredicateParts
    from streamjoin.plan.probeorder import Target

MAX_MIR = 2
"""The most streams an MIR of a plan joins (fewer candidates for the solver)."""

DEFAULT_SELECTIVITY = {"equality": 0.01, "band": 0.05, "theta": 0.3}
"""Fraction of the pair product a predicate keeps, before any statistics are measured."""


@dataclass(frozen=True)
class ClashPlan:
    """The ILP's answer for the job: its global plan, and per query the probe order (the stores
    to probe after the start) for each start position."""

    plan: GlobalPlan
    orders: dict[str, dict[int, tuple[Target, ...]]]
    """Per query and start position, the stores to probe (`plan.probeorder.Target`)."""
    left_out: dict[str, str]
    """Queries planned greedily instead, with the reason."""


def plan_clash(
    job: Job,
    queries: Sequence[Query],
    pairs: Mapping[str, Mapping[tuple[int, int], PredicateParts]],
    *,
    rates: Mapping[str, float] | None = None,
    selectivities: Mapping[str, float] | None = None,
    parallelism: int = 4,
    time_limit: float = 1.0,
) -> ClashPlan | None:
    """Solve CLASH's ILP over `queries` (three or more inputs each); None if none fits.

    Args:
        job: the job.
        queries: its multi-way queries.
        pairs: per query, the classified conjuncts of each pair of input positions (i < j).
        rates: rows per batch per stream, if measured.
        selectivities: measured selectivities by `selectivity_key` (the rest: defaults).
        parallelism: units per store (the broadcast factor).
        time_limit: seconds for the solver; the best plan so far is used when it is hit.
    """
    planned, left_out = optimizer_queries(queries, pairs, selectivities or {})
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
    plan = plan_queries(problem, time_limit, max_mir=MAX_MIR)
    orders: dict[str, dict[int, tuple[Target, ...]]] = {}
    for p in planned:
        q = next(x for x in queries if x.name == p.name)
        position = {side.stream: i for i, side in enumerate(q.sides)}

        def target(store: Store, position: dict[str, int] = position) -> Target:
            if store.is_base:
                return position[store.name]
            return tuple(sorted(position[r] for r in store.relations))

        orders[q.name] = {
            position[start]: tuple(
                target(label.store) for label in plan.order_for(q.name, start).order.targets
            )
            for start in p.relations
        }
    return ClashPlan(plan, orders, left_out)


def optimizer_queries(
    queries: Sequence[Query],
    pairs: Mapping[str, Mapping[tuple[int, int], PredicateParts]],
    selectivities: Mapping[str, float],
) -> tuple[list[Planned], dict[str, str]]:
    """`queries` as the optimizer states them, and those it cannot state with the reason."""
    planned, left_out = [], {}
    for q in queries:
        streams = [s.stream for s in q.sides]
        if len(set(streams)) != len(streams):
            left_out[q.name] = "reads a stream twice (self-joins are not in CLASH's model)"
            continue
        try:
            planned.append(_query(q, pairs[q.name], selectivities))
        except OptimizerError as err:
            left_out[q.name] = str(err)
    return planned, left_out


def selectivity_key(pred: JoinPredicate) -> str:
    """The name a predicate's measured selectivity is kept under (its identity, as text)."""
    return " | ".join(pred.identity)


@dataclass(frozen=True)
class PairMeasure:
    """A pair of one query's inputs, and the optimizer's predicates whose selectivities
    counting the pair's join measures.

    A batch counts the pair's new joined pairs twice: those meeting its equalities (none when
    it has no routable equality) and those meeting its whole conjunction. The equalities'
    selectivity is the first count over the product of the two streams' rows in the batch;
    the rest's (`label_key`) is the second count over the first, or over that product when the
    pair has no equality. The optimizer's estimate of the pair's join, rate x rate x the
    product of its selectivities, is then the measured count (`measured_selectivities`).
    """

    query: str
    left: int
    right: int
    """Input positions in `query` (left < right)."""
    equalities: tuple[str, ...]
    """The routable equalities, ``a.x = b.y`` over the query's aliases."""
    equality_keys: tuple[str, ...]
    label_key: str | None
    """The key of the pair's other conjuncts (None: the pair is its equalities)."""


def pair_measures(
    queries: Sequence[Query], pairs: Mapping[str, Mapping[tuple[int, int], PredicateParts]]
) -> list[PairMeasure]:
    """What to count to measure every predicate of `queries` that CLASH plans with, each once
    (queries joining a pair the same way share the measure)."""
    out, seen = [], set()
    for q in queries:
        streams = [s.stream for s in q.sides]
        if len(set(streams)) != len(streams):
            continue
        for (i, j), parts in sorted(pairs[q.name].items()):
            equalities, label, sqls = _pair_predicates(streams[i], streams[j], parts)
            keys = tuple(selectivity_key(p) for p in equalities)
            label_key = selectivity_key(label) if label is not None else None
            if (keys, label_key) in seen:
                continue
            seen.add((keys, label_key))
            out.append(PairMeasure(q.name, i, j, tuple(sqls), keys, label_key))
    return out


def measured_selectivities(
    measure: PairMeasure, equal: float | None, total: float, rows: tuple[int, int]
) -> dict[str, float]:
    """Selectivities from one batch's counts of a pair's new joined pairs.

    Args:
        measure: the pair.
        equal: pairs meeting its equalities (None when it has none).
        total: pairs meeting its whole conjunction.
        rows: the two streams' rows in the batch (left, right).

    A count of zero is taken as half a pair: a selectivity stays positive (the optimizer
    needs it so), and tiny.
    """
    product = float(rows[0]) * float(rows[1])
    if product <= 0:
        return {}
    out: dict[str, float] = {}
    if measure.equality_keys:
        equal = max(equal or 0.0, 0.5)
        # Several equalities in one pair are counted together: each takes an equal share.
        each = (equal / product) ** (1.0 / len(measure.equality_keys))
        out.update(dict.fromkeys(measure.equality_keys, each))
        if measure.label_key is not None:
            out[measure.label_key] = min(1.0, max(total, 0.5) / equal)
    elif measure.label_key is not None:
        out[measure.label_key] = max(total, 0.5) / product
    return out


def _query(
    q: Query,
    pairs: Mapping[tuple[int, int], PredicateParts],
    measured: Mapping[str, float],
) -> Planned:
    streams = [s.stream for s in q.sides]
    preds: list[JoinPredicate] = []
    for (i, j), parts in pairs.items():
        equalities, label, _ = _pair_predicates(streams[i], streams[j], parts)
        for pred in [*equalities, *([label] if label is not None else [])]:
            sel = measured.get(selectivity_key(pred))
            preds.append(replace(pred, selectivity=sel) if sel is not None else pred)
    return Planned(q.name, tuple(streams), tuple(preds))


def _pair_predicates(
    a: str, b: str, parts: PredicateParts
) -> tuple[list[JoinPredicate], JoinPredicate | None, list[str]]:
    """The optimizer's predicates for a pair of streams (default selectivities): the routable
    equalities, one theta predicate labelled with the SQL of the rest (None if nothing is
    left), and the equalities' SQL."""
    equalities: list[JoinPredicate] = []
    sqls: list[str] = []
    others: list[str] = []
    for key in parts.equi:
        left, right = _bare(key.left_sql), _bare(key.right_sql)
        if left is not None and right is not None:
            equalities.append(JoinPredicate(a, b, left, right, DEFAULT_SELECTIVITY["equality"]))
            sqls.append(f"{key.left_sql} = {key.right_sql}")
        else:
            others.append(key.describe())
    kind = "band" if parts.bands or parts.window else "theta"
    others += [f"band {x.describe()}" for x in parts.bands]
    if parts.window is not None:
        others.append(f"window {parts.window.describe()}")
    others += list(parts.residual)
    label = None
    if others:
        label = JoinPredicate(a, b, None, None, DEFAULT_SELECTIVITY[kind], " AND ".join(others))
    return equalities, label, sqls


def _bare(sql: str) -> str | None:
    """`col` for a bare qualified column ``alias.col``, else None."""
    head, dot, tail = sql.partition(".")
    if dot and head.isidentifier() and tail.isidentifier():
        return tail
    return None
