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
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from streamjoin.plan.multiway import carries, core_groups, local_filters, pair_mir, without_filters
from streamjoin.plan.probeorder import column_name
from streamjoin.runtime.batch.joins import bucket_range

if t.TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence

    from streamjoin.model import StreamDef
    from streamjoin.plan import MultiwayPlan, ProbeOrder, Step
    from streamjoin.plan.probeorder import Mir


def renamed(view: str, slot: str, stream: StreamDef) -> str:
    """``SELECT`` of `view`'s columns under their names in `slot` (`plan.multiway.slots`)."""
    cols = ", ".join(f"`{c.name}` AS `{column_name(slot, c.name)}`" for c in stream.columns)
    return f"SELECT {cols} FROM {view}"


Probe = t.Literal["broadcast", "route", "planner"]
"""How a probe step's rows so far reach the store (`step_sql`)."""


def step_sql(rows: str, n: int, step: Step, store: str, *, probe: Probe = "broadcast") -> str:
    """The rows so far joined with one more store (step `n` of a probe order).

    `probe`: ``broadcast`` sends the rows so far (small: they stem from a batch's delta) to
    every partition of the store; ``route`` sends each to the one partition of a store
    partitioned on a column this step's equality carries (CLASH), the store staying where it
    is and streaming through the rows' hash table; ``planner`` leaves the choice to Spark."""
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
    # Without a hint Spark's size estimate of a join output is a product, and it would shuffle
    # and sort the whole store instead of moving the rows so far.
    hint = {
        "broadcast": f"/*+ BROADCAST(_sj_p{n}) */ ",
        "route": f"/*+ SHUFFLE_HASH(_sj_p{n}) */ ",
        "planner": "",
    }[probe]
    return f"SELECT {hint}* FROM ({rows}) AS _sj_p{n} JOIN ({store}) AS _sj_s{n} ON {on}"


def _pair_slots(mp: MultiwayPlan, *inputs: int) -> tuple[tuple[str, str], ...]:
    """The (slot, stream) pairs of `inputs`, as `Mir.key` holds them."""
    sides = mp.query.sides
    return tuple(sorted((mp.slots[i], sides[i].stream.lower()) for i in inputs))


def newer_bits(mir: Mir, start: int) -> int:
    """Which of an MIR's inputs a term starting at input `start` takes with their new rows (the
    inputs written after the start; see `plan.multiway`): bit b for the b-th of its slots in
    sorted order, the order the MIR store tags its new rows in (`runtime.multiway.mirs`)."""
    return sum(mir.bit(i) for i in mir.inputs if i > start)


@dataclass
class _Term:
    owner: str
    """The query the term answers, or the name of a shared core (`join_core`)."""
    select: str
    stores: list[str]
    steps: list[Step]
    prefixes: list[str]
    """The rows after the start (0) and after each step (n + 1), as written without sharing."""
    direct: list[str | None]
    """Per step, the rows after it when they are read rather than joined (an MIR store's new
    pairs), else None."""
    probes: list[Probe]
    """Per step, how the rows so far reach the store (`step_sql`)."""


class MirViews(t.Protocol):
    """What `batch_terms` reads of the batch's MIR stores (`runtime.multiway.mirs.MirStores`)."""

    def view(self, mp: MultiwayPlan, mir: Mir, newer: int) -> str:
        """The store's rows for a term of `mp`: its stored pairs, plus the batch's new ones
        whose new inputs are all among the bits of `newer` (`newer_bits`)."""
        ...

    def new_pairs(self, mp: MultiwayPlan, mir: Mir, start: int) -> str:
        """The batch's new pairs of the store that term `start` of `mp` finds in its first
        step: the start's row is new, and the other's only when it is written later."""
        ...


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
    store: Callable[[str, int | None, bool, str | None], str],
    watermark: int | None,
    *,
    share: bool = True,
    mirs: MirViews | None = None,
    partitioning: Mapping[str, str] | None = None,
    routed: Collection[str] = (),
    probing: Mapping[str, Mapping[int, str]] | None = None,
) -> BatchTerms:
    """Every term of every multi-way query's delta rule for one batch.

    With `share`, queries whose joins are the same and differ only in their selections (equal
    `join_core`) run the core's delta rule once, unfiltered, and each filters its rows; and a
    probe prefix that several terms run is computed once (CLASH's shared steps).

    Args:
        plans: the multi-way queries' plans.
        streams: each plan's input streams, in written order.
        deltas: stream name -> view of the batch's new rows.
        store: ``store(stream, lo, with_new, column)`` -> a view of the stream's stored rows
            with event time >= lo (None: all), plus its new rows when `with_new`,
            hash-partitioned on `column` when it is not None.
        watermark: W, the global watermark the batch started with.
        share: share cores and probe prefixes across queries.
        mirs: the batch's MIR stores (`runtime.multiway.mirs`); needed when a step probes one. A
            term whose first step joins the two inputs of an MIR store that the batch keeps
            reads that step's pairs from the store's new pairs, which the store computes anyway
            (CLASH: the maintenance step and the probe step are one shared step).
        partitioning: stream -> the column its store is partitioned on: a step whose equality
            carries that column sends the rows so far to that one partition (reading the store
            partitioned on it), any other step to all of them.
        routed: the streams whose deltas are large enough to send to one partition (see
            `partitioning`); the terms starting from any other stream broadcast every step.
        probing: per query that sheds probes (`runtime.batch.shedding`), per input position
            j: the view of Δj's rows that probe in term j. Such a query shares nothing, and
            its first steps do not read an MIR store's new pairs (all of Δj's).
    """
    partitioned = partitioning or {}
    views: dict[tuple[str, int | None, bool, str | None], str] = {}

    def view(stream: str, lo: int | None, with_new: bool, column: str | None) -> str:
        if (stream, lo, with_new, column) not in views:
            views[stream, lo, with_new, column] = store(stream, lo, with_new, column)
        return views[stream, lo, with_new, column]

    kept = {s.mir.key for mp in plans for o in mp.orders for s in o.steps if s.mir is not None}
    kept_slots = {slots for slots, _ in kept}
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
            direct: list[str | None] = []
            probes: list[Probe] = []
            bound = [mp.slots[j]]
            for n, step in enumerate(order.steps):
                i = step.input
                pair = None
                # (`pair_mir` parses the conjuncts: only for a pair of streams a store joins.)
                if (
                    n == 0
                    and step.mir is None
                    and j not in starts
                    and _pair_slots(mp, j, i) in kept_slots
                ):
                    pair = pair_mir(mp, j, i)
                if mirs is not None and pair is not None and pair.key in kept:
                    # The first step's pairs are the MIR store's new pairs from Δj.
                    given = (*order.filters, *step.conditions)
                    rest = [c for c in given if c not in pair.conditions]
                    found = mirs.new_pairs(mp, pair, j)
                    if rest:
                        found = f"SELECT * FROM {found} WHERE " + " AND ".join(
                            f"({c})" for c in rest
                        )
                    stores.append("")
                    direct.append(found)
                    prefixes.append(found)
                    probes.append("broadcast")
                    bound.append(mp.slots[i])
                    continue
                if step.mir is not None:
                    if mirs is None:
                        msg = f"{mp.query.name} probes an MIR store, and none was given"
                        raise ValueError(msg)
                    stored = mirs.view(mp, step.mir, newer_bits(step.mir, j))
                    probe: Probe = "broadcast"
                else:
                    # A stored row older than W - retain cannot meet any new row; inputs
                    # written after the start are probed with their new rows, earlier ones
                    # without.
                    keep = mp.retain_us[i]
                    lo = watermark - keep if watermark is not None and keep is not None else None
                    column = partitioned.get(inputs[i].name)
                    route = (
                        column is not None
                        and inputs[j].name in routed
                        and carries(step, bound, mp.slots[i], column)
                    )
                    probe = "route" if route else "broadcast"
                    rows_of = view(inputs[i].name, lo, i > j, column if route else None)
                    stored = renamed(rows_of, mp.slots[i], inputs[i])
                stores.append(stored)
                direct.append(None)
                probes.append(probe)
                bound += [mp.slots[x] for x in ((i,) if step.mir is None else step.mir.inputs)]
                prefixes.append(step_sql(prefixes[-1], n, step, stored, probe=probe))
            terms.append(_Term(owner, select, stores, list(order.steps), prefixes, direct, probes))
    runs: dict[str, int] = {}
    for term in terms:
        for prefix in term.prefixes[1:]:
            runs[prefix] = runs.get(prefix, 0) + 1
    names: dict[str, str] = {}
    selects: dict[str, list[str]] = {}
    for term in terms:
        rows = term.prefixes[0]
        for n, step in enumerate(term.steps):
            read = term.direct[n]
            rows = (
                read
                if read is not None
                else step_sql(rows, n, step, term.stores[n], probe=term.probes[n])
            )
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
