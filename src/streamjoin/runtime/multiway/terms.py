"""Spark SQL text for the terms of the multi-way joins' delta rule (see `plan.multiway`).

Every input's columns are renamed to names unique across the inputs (``_sj_<stream>_<column>``),
so that each probe step can be written as ``SELECT * FROM (rows so far) JOIN (store) ON ...`` and
nested: Spark keeps the nesting as the join order, which is the probe order. A band step
explodes the rows so far over the buckets their band overlaps and keys the store by its own
bucket, as the two-way band join does (`joins.bucket_range`).

Sharing (CLASH): the names come from the streams, not the query, so two terms that start from
the same stream's new rows and probe the same stores on the same conditions write the same
prefix SQL. Such a prefix becomes one view, computed once per batch, that every term running it
reads (`BatchTerms.shared`).

Every step reads one input's store: where the plan's order probes an MIR (the operator's chain
keeps those as its levels), the slices probe the MIR's inputs one at a time (`unfolded`).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from streamjoin.plan.multiway import core_groups, local_filters, plan_multiway, without_filters
from streamjoin.plan.probeorder import column_name
from streamjoin.runtime.batch.joins import bucket_range

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from streamjoin.model import Job, StreamDef
    from streamjoin.plan import MultiwayPlan, ProbeOrder, Step


def renamed(view: str, slot: str, stream: StreamDef) -> str:
    """``SELECT`` of `view`'s columns under their names in `slot` (`plan.multiway.slots`)."""
    cols = ", ".join(f"`{c.name}` AS `{column_name(slot, c.name)}`" for c in stream.columns)
    return f"SELECT {cols} FROM {view}"


def step_sql(rows: str, n: int, step: Step, store: str) -> str:
    """The rows so far joined with one more store (step `n` of a probe order): the rows so far
    (small: they stem from a batch's delta) broadcast to every partition of the store."""
    conditions = [f"({c})" for c in step.conditions]
    if step.band is not None:
        low, high, key = bucket_range(step.band, "left")
        probe_bucket, store_bucket = f"_sj_pb{n}", f"_sj_sb{n}"
        rows = (
            f"SELECT *, explode(sequence(CAST({low} AS BIGINT), CAST({high} AS BIGINT))) "
            f"AS {probe_bucket} FROM ({rows})"
        )
        store = f"SELECT *, CAST({key} AS BIGINT) AS {store_bucket} FROM ({store})"
        conditions.insert(0, f"{probe_bucket} = {store_bucket}")
    on = " AND ".join(conditions) or "TRUE"
    # Without the hint Spark's size estimate of a join output is a product, and it would
    # shuffle and sort the whole store instead of moving the rows so far.
    hint = f"/*+ BROADCAST(_sj_p{n}) */"
    return f"SELECT {hint} * FROM ({rows}) AS _sj_p{n} JOIN ({store}) AS _sj_s{n} ON {on}"


def probe_inputs(order: ProbeOrder) -> tuple[int, ...]:
    """The inputs `order` probes, one at a time: in an MIR's place, first the input its step
    finds the candidates of (joined to the rows so far by the step's method), then the rest."""
    out: list[int] = []
    for step in order.steps:
        rest = () if step.mir is None else (i for i in step.mir.inputs if i != step.input)
        out += [step.input, *rest]
    return tuple(out)


def unfolded(job: Job, mp: MultiwayPlan) -> MultiwayPlan:
    """`mp` with every step into an MIR replaced by steps into its inputs' own stores
    (`probe_inputs`): the cached slices keep no MIR (the operator's chain keeps its MIRs as its
    levels, `plan.chain`). Each step's conditions are planned again, so the conjuncts among an
    MIR's inputs are checked where the second of them is joined."""
    if all(s.mir is None for o in mp.orders for s in o.steps):
        return mp
    return plan_multiway(job, mp.query, {o.start: probe_inputs(o) for o in mp.orders})


@dataclass
class _Term:
    owner: str
    """The query the term answers, or the name of a shared core (`join_core`)."""
    select: str
    stores: list[str]
    steps: list[Step]
    prefixes: list[str]
    """The rows after the start (0) and after each step (n + 1), as written without sharing."""


@dataclass
class BatchTerms:
    """The SQL of every multi-way term of one batch, and the shared views they read."""

    terms: dict[str, list[str]] = field(default_factory=dict)
    """Per query, one SELECT per term of its delta rule (one in all when its core is shared)."""
    shared: dict[str, str] = field(default_factory=dict)
    """View name -> SQL of a probe prefix that several terms run, or of a core several queries
    filter: computed once, fanned out (in dependency order)."""
    users: dict[str, int] = field(default_factory=dict)
    """View name -> how many terms (prefix) or queries (core) read it."""
    cores: dict[str, list[str]] = field(default_factory=dict)
    """Core view name -> the queries that filter it."""


def batch_terms(
    plans: Sequence[MultiwayPlan],
    streams: Callable[[MultiwayPlan], Sequence[StreamDef]],
    deltas: Mapping[str, str],
    store: Callable[[str, int | None, bool], str],
    watermark: int | None,
    *,
    share: bool = True,
    probing: Mapping[str, Mapping[int, str]] | None = None,
) -> BatchTerms:
    """Every term of every multi-way query's delta rule for one batch.

    With `share`, queries whose joins are the same and differ only in their selections (equal
    `join_core`) run the core's delta rule once, unfiltered, and each filters its rows; and a
    probe prefix that several terms run is computed once (CLASH's shared steps).

    Args:
        plans: the multi-way queries' plans, each step into one input's store (`unfolded`).
        streams: each plan's input streams, in written order.
        deltas: stream name -> view of the batch's new rows.
        store: ``store(stream, lo, with_new)`` -> a view of the stream's stored rows with event
            time >= lo (None: all), plus its new rows when `with_new`.
        watermark: W, the global watermark the batch started with.
        share: share cores and probe prefixes across queries.
        probing: per query that sheds probes (`runtime.batch.shedding`), per input position
            j: the view of Δj's rows that probe in term j. Such a query shares nothing.
    """
    views: dict[tuple[str, int | None, bool], str] = {}

    def view(stream: str, lo: int | None, with_new: bool) -> str:
        if (stream, lo, with_new) not in views:
            views[stream, lo, with_new] = store(stream, lo, with_new)
        return views[stream, lo, with_new]

    out = BatchTerms()
    shedding = probing or {}
    alone = [[mp] for mp in plans if mp.query.name in shedding]
    others = [mp for mp in plans if mp.query.name not in shedding]
    groups = (core_groups(others) if share else [[mp] for mp in others]) + alone
    terms: list[_Term] = []
    filtered: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    """Query -> (core view, its select, its selections) for queries answered from a core."""
    for members in groups:
        mp = members[0]
        inputs = streams(mp)
        orders: Sequence[ProbeOrder] = mp.orders
        owner, select = mp.query.name, ", ".join(f"{sql} AS `{a}`" for sql, a in mp.select)
        if len(members) > 1:
            owner = f"_sj_core_{len(out.cores)}"
            out.cores[owner] = [m.query.name for m in members]
            dropped = set(local_filters(mp))
            orders = [without_filters(o, dropped) for o in mp.orders]
            select = ", ".join(
                f"`{column_name(slot, c.name)}`"
                for slot, stream in zip(mp.slots, inputs, strict=True)
                for c in stream.columns
            )
            for m in members:
                chosen = ", ".join(f"{sql} AS `{a}`" for sql, a in m.select)
                filtered[m.query.name] = (owner, chosen, local_filters(m))
        starts = shedding.get(mp.query.name, {})
        for order in orders:
            j = order.start
            rows = renamed(starts.get(j, deltas[inputs[j].name]), mp.slots[j], inputs[j])
            if order.filters:
                condition = " AND ".join(f"({f})" for f in order.filters)
                rows = f"SELECT * FROM ({rows}) WHERE {condition}"
            prefixes, stores = [rows], []
            for n, step in enumerate(order.steps):
                if step.mir is not None:
                    msg = f"{mp.query.name}: the cached slices keep no MIR (`unfolded` its plan)"
                    raise ValueError(msg)
                # A stored row older than W - retain cannot meet any new row; inputs written
                # after the start are probed with their new rows, earlier ones without.
                i = step.input
                keep = mp.retain_us[i]
                lo = watermark - keep if watermark is not None and keep is not None else None
                stored = renamed(view(inputs[i].name, lo, i > j), mp.slots[i], inputs[i])
                stores.append(stored)
                prefixes.append(step_sql(prefixes[-1], n, step, stored))
            terms.append(_Term(owner, select, stores, list(order.steps), prefixes))
    runs: dict[str, int] = {}
    for term in terms:
        for prefix in term.prefixes[1:]:
            runs[prefix] = runs.get(prefix, 0) + 1
    names: dict[str, str] = {}
    selects: dict[str, list[str]] = {}
    for term in terms:
        rows = term.prefixes[0]
        for n, step in enumerate(term.steps):
            rows = step_sql(rows, n, step, term.stores[n])
            prefix = term.prefixes[n + 1]
            if share and runs[prefix] > 1:
                if prefix not in names:
                    names[prefix] = f"_sj_shared_{len(names)}"
                    out.shared[names[prefix]] = rows
                name = names[prefix]
                out.users[name] = out.users.get(name, 0) + 1
                rows = f"SELECT * FROM {name}"
        selects.setdefault(term.owner, []).append(f"SELECT {term.select} FROM ({rows})")
    for owner, parts in selects.items():
        if owner in out.cores:
            out.shared[owner] = " UNION ALL ".join(parts)
            out.users[owner] = len(out.cores[owner])
        else:
            out.terms[owner] = parts
    for query, (core, select, selections) in filtered.items():
        where = " AND ".join(f"({f})" for f in selections) or "TRUE"
        out.terms[query] = [f"SELECT {select} FROM {core} WHERE {where}"]
    return out
