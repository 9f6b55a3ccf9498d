"""Multi-way joins: the delta rule over k inputs, probe orders, and how long state is kept.

A query over inputs 1..k (in the order written) gets, per batch, the new combinations

    Δ(⋈ Si) = ∪_j  Δj ⋈ [Si_old for i < j] ⋈ [Si_old ∪ Δi for i > j]

Each new combination appears in exactly one term: the one of its first input (in written order)
that holds a new row. This is the micro-batch form of CLASH's rule that a tuple probes only
stores of tuples that arrived before it; the written order is the tie-break within a batch.

Term j is executed as a *probe order*: Δj probes the other inputs' stores one at a time, each
step joining the rows built so far with one more store on the conjuncts that become checkable
at that step. A step finds its candidates by hash (an equality conjunct with an input already
bound), by band buckets (a value band or an event-time window with one), or by a nested loop.

State retention: a pair window ``ts_j - ts_i ∈ [lo, hi]`` bounds ``ts_j <= ts_i + hi`` and
``ts_i <= ts_j - lo``; the tightest bound between any two inputs is a shortest path over these
edges. A stored row of input i can still be in a result only with some new row x (``ts_x >=
W``), so it is dead once ``ts_i < W - max_x dist(i, x)``; an input that some other input does not
bound (no path of windows, or no watermark) keeps its full history.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from streamjoin.plan.classify import Band, PredicateParts, classify_predicate, conjuncts

if t.TYPE_CHECKING:
    from streamjoin.model import Job, Query

Method = t.Literal["hash", "band", "nested-loop"]
"""How one probe step finds its candidates."""

Target = int | tuple[int, ...]
"""A store a probe order visits: one input (its position), or the MIR store of several inputs
(their positions, ascending): the join of their streams on the conjuncts among them, kept up
to date batch by batch (`runtime.multiway.mirs`), so that one step binds them all."""


def flat(sequence: t.Sequence[Target]) -> tuple[int, ...]:
    """The input positions a probe sequence visits, in order."""
    return tuple(i for x in sequence for i in ((x,) if isinstance(x, int) else x))


def column_name(slot: str, column: str) -> str:
    """The name of `column` of the input in `slot` inside a multi-way join (see `slots`)."""
    return f"_sj_{slot}_{column}"


def slots(q: Query) -> tuple[str, ...]:
    """Per input, the name its columns go by: its stream's name (lower case), with ``_<n>`` for
    the n-th repeat of a stream (self-joins). Named by stream rather than alias or position, so
    that two queries joining the same streams the same way write the same SQL: that is how a
    shared probe prefix is recognised (`runtime.multiway.terms`)."""
    seen: dict[str, int] = {}
    out = []
    for side in q.sides:
        name = side.stream.lower()
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append(name if n == 0 else f"{name}_{n}")
    if len(set(out)) != len(out):  # a stream named like another's repeat ("a_1"): by position
        return tuple(f"{i}" for i in range(len(out)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Conjunct:
    """One top-level conjunct of the predicate and the inputs (positions) it names."""

    sql: str
    inputs: frozenset[int]


@dataclass(frozen=True, slots=True)
class Mir:
    """The MIR store of some inputs of a query: their streams' join on the conjuncts among them.

    Queries share an MIR store when they join the same streams on the same conjuncts: `key`
    holds the streams' slots and the conjuncts (over the unique column names), not positions.
    """

    inputs: tuple[int, ...]
    """The inputs' positions in the query, ascending."""
    slots: tuple[str, ...]
    """Their slots (`slots`), in the same order."""
    conditions: tuple[str, ...]
    """The conjuncts among them, sorted."""
    streams: tuple[str, ...] = ()
    """Their streams (lower case), in the same order."""

    def bit(self, i: int) -> int:
        """The tag bit of input `i` in the store's rows (`runtime.multiway.mirs`): its slot's place
        among the slots in sorted order, the same in every query sharing the store."""
        return 1 << sorted(self.slots).index(self.slots[self.inputs.index(i)])

    @property
    def key(self) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
        """What makes two MIR stores the same: (slot, stream) pairs and the conditions."""
        return (tuple(sorted(zip(self.slots, self.streams, strict=True))), self.conditions)


@dataclass(frozen=True, slots=True)
class Step:
    """Join one more input's store into the rows built so far.

    `conditions` are rewritten to the unique column names (`column_name`); `band`, when the
    method is ``band``, is oriented ``store - probe ∈ [lo, hi]`` over those names too.
    """

    input: int
    method: Method
    conditions: tuple[str, ...]
    band: Band | None = None
    mir: Mir | None = None
    """The MIR store the step probes (binding every input of it), or None: input `input`'s
    own store."""


@dataclass(frozen=True, slots=True)
class ProbeOrder:
    """Term `start` of the delta rule: Δstart filtered by `filters`, then `steps` in order."""

    start: int
    filters: tuple[str, ...]
    steps: tuple[Step, ...]

    def describe(self, aliases: t.Sequence[str]) -> str:
        """E.g. ``Δa -> b (hash) -> c (band)``."""
        parts = [f"Δ{aliases[self.start]}"]
        for s in self.steps:
            store = aliases[s.input]
            if s.mir is not None:
                store = "(" + " ⋈ ".join(aliases[i] for i in s.mir.inputs) + ")"
            parts.append(f"{store} ({s.method})")
        return " -> ".join(parts)


@dataclass(frozen=True)
class MultiwayPlan:
    """A query over three or more inputs: its conjuncts, probe orders and state bounds."""

    query: Query
    times: tuple[str | None, ...]
    """Each input's event-time column (None without a watermark)."""
    conjuncts: tuple[Conjunct, ...]
    orders: tuple[ProbeOrder, ...]
    """One per input, in written order: ``orders[j].start == j``."""
    retain_us: tuple[int | None, ...]
    """Per input: a stored row with event time < W - retain can no longer join (None: never
    dead)."""
    select: tuple[tuple[str, str], ...]
    """(SQL over the unique column names, output name)."""
    slots: tuple[str, ...] = ()
    """Per input, the name its columns go by (`slots`)."""

    @property
    def aliases(self) -> tuple[str, ...]:
        """The inputs' aliases, in written order."""
        return tuple(side.alias for side in self.query.sides)


def plan_multiway(
    job: Job, q: Query, orders: t.Mapping[int, tuple[Target, ...]] | None = None
) -> MultiwayPlan:
    """Plan query `q` (three or more inputs).

    Args:
        job: the job declaring `q`'s streams.
        q: the query.
        orders: for some starting inputs, the order in which to probe the others' stores (base
            or MIR; e.g. from the optimizer); the rest get a greedy order (hash steps first,
            then bands, never a cross product while a connected input remains).
    """
    aliases = [s.alias for s in q.sides]
    position = {a.lower(): i for i, a in enumerate(aliases)}
    times = tuple(job.stream(s.stream).event_time for s in q.sides)
    conjuncts = tuple(_conjuncts(q.predicate, position))
    pairs = _pair_parts(conjuncts, aliases, times)
    retain = _retention(len(aliases), pairs, times)
    fixed = orders or {}
    plans = []
    for start in range(len(aliases)):
        sequence = fixed.get(start) or _greedy_order(start, len(aliases), conjuncts, pairs)
        order = _probe_order(start, sequence, conjuncts, pairs, aliases, times, _naming(q), q)
        plans.append(order)
    naming = _naming(q)
    select = tuple((rename(item.sql, naming), item.alias) for item in q.select)
    return MultiwayPlan(q, times, conjuncts, tuple(plans), retain, select, slots(q))


def local_filters(mp: MultiwayPlan) -> tuple[str, ...]:
    """The conjuncts of `mp` that name at most one input (selections), over the unique column
    names, as they appear in its probe orders' filters and conditions."""
    naming = _naming(mp.query)
    return tuple(rename(c.sql, naming) for c in mp.conjuncts if len(c.inputs) <= 1)


def join_core(mp: MultiwayPlan) -> tuple[t.Hashable, ...]:
    """What `mp` joins, without its selections: the inputs' slots and streams, and the
    conjuncts that name two or more inputs. Queries with equal cores differ only in their
    selections and select lists, so one unfiltered run of the core's delta rule can answer
    them all, each filtering it afterwards (σf distributes over the delta rule: it is checked
    per combination of rows)."""
    naming = _naming(mp.query)
    joins = sorted(rename(c.sql, naming) for c in mp.conjuncts if len(c.inputs) > 1)
    streams = tuple(side.stream.lower() for side in mp.query.sides)
    return (mp.slots, streams, tuple(joins))


def core_groups(plans: t.Sequence[MultiwayPlan]) -> list[list[MultiwayPlan]]:
    """`plans` grouped by `join_core`, in first-seen order (a group of one shares nothing)."""
    groups: dict[t.Hashable, list[MultiwayPlan]] = {}
    for mp in plans:
        groups.setdefault(join_core(mp), []).append(mp)
    return list(groups.values())


def without_filters(order: ProbeOrder, filters: t.Collection[str]) -> ProbeOrder:
    """`order` with the conditions in `filters` left out (see `join_core`)."""
    steps = tuple(
        Step(s.input, s.method, tuple(c for c in s.conditions if c not in filters), s.band, s.mir)
        for s in order.steps
    )
    kept = tuple(f for f in order.filters if f not in filters)
    return ProbeOrder(order.start, kept, steps)


def carries(step: Step, probe_slots: t.Collection[str], store_slot: str, column: str) -> bool:
    """Whether `step` joins on an equality between the store's `column` (the store's input in
    `store_slot`) and an expression of the rows so far alone (inputs in `probe_slots`): the
    probe then goes to the one partition of a store partitioned on that column (CLASH)."""
    store_column = column_name(store_slot, column)
    prefixes = tuple(column_name(slot, "") for slot in probe_slots)
    own = column_name(store_slot, "")
    for condition in step.conditions:
        tree = sqlglot.parse_one(condition, dialect="spark")
        parts = list(tree.flatten()) if isinstance(tree, exp.And) else [tree]
        for part in parts:
            part = part.unnest()
            if not isinstance(part, exp.EQ):
                continue
            for mine, other in ((part.this, part.expression), (part.expression, part.this)):
                names = [c.name for c in other.find_all(exp.Column)]
                if (
                    isinstance(mine, exp.Column)
                    and mine.name == store_column
                    and names
                    and all(n.startswith(prefixes) and not n.startswith(own) for n in names)
                ):
                    return True
    return False


def pair_step(mp: MultiwayPlan, probe: int, store: int) -> Step:
    """Input `probe`'s rows joined with input `store`'s on the conjuncts naming just those two
    (the pair's own join, as a first probe step finds it): the step that measures the pair's
    selectivity (`runtime.multiway.selectivity`)."""
    aliases = list(mp.aliases)
    naming = _naming(mp.query)
    pairs = _pair_parts(mp.conjuncts, aliases, mp.times)
    conditions = tuple(
        rename(c.sql, naming) for c in mp.conjuncts if c.inputs == frozenset((probe, store))
    )
    method = _method(store, {probe}, pairs)
    band = None
    if method == "band":
        band = _step_band(store, {probe}, pairs, aliases, mp.times, naming)
    return Step(store, method, conditions, band)


def pair_mir(mp: MultiwayPlan, a: int, b: int) -> Mir:
    """The MIR store of inputs `a` and `b` of `mp` (whether or not a plan keeps it)."""
    q = mp.query
    return _mir(tuple(sorted((a, b))), mp.conjuncts, q, _naming(q))


def renamed_sql(q: Query, sql: str) -> str:
    """`sql` over `q`'s aliases, rewritten to the unique column names (`column_name`)."""
    return rename(sql, _naming(q))


def _naming(q: Query) -> dict[str, str]:
    return {side.alias.lower(): slot for side, slot in zip(q.sides, slots(q), strict=True)}


def pair_parts(job: Job, q: Query) -> dict[tuple[int, int], PredicateParts]:
    """For each pair of input positions i < j that some conjunct names together: the classified
    conjuncts naming exactly that pair (left = i, right = j)."""
    position = {s.alias.lower(): i for i, s in enumerate(q.sides)}
    times = tuple(job.stream(s.stream).event_time for s in q.sides)
    aliases = [s.alias for s in q.sides]
    return _pair_parts(_conjuncts(q.predicate, position), aliases, times)


def rename(sql: str, naming: dict[str, str]) -> str:
    """`sql` with every ``alias.column`` replaced by its unique name (`column_name`); `naming`
    maps each lower-case alias to its slot."""
    tree = sqlglot.parse_one(sql, dialect="spark")

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table:
            name = column_name(naming[node.table.lower()], node.name)
            return exp.Column(this=exp.Identifier(this=name, quoted=True))
        return node

    return tree.transform(swap).sql(dialect="spark")


def _conjuncts(predicate: str, position: dict[str, int]) -> list[Conjunct]:
    if not predicate.strip():
        return []
    out = []
    for node in conjuncts(sqlglot.parse_one(predicate, dialect="spark")):
        named = frozenset(position[c.table.lower()] for c in node.find_all(exp.Column))
        out.append(Conjunct(node.sql(dialect="spark"), named))
    return out


def _pair_parts(
    conjuncts: t.Sequence[Conjunct], aliases: list[str], times: tuple[str | None, ...]
) -> dict[tuple[int, int], PredicateParts]:
    """For each pair i < j named together by some conjunct: the classified conjuncts naming
    exactly that pair (left = i, right = j)."""
    grouped: dict[tuple[int, int], list[str]] = {}
    for c in conjuncts:
        if len(c.inputs) == 2:
            i, j = sorted(c.inputs)
            grouped.setdefault((i, j), []).append(f"({c.sql})")
    return {
        (i, j): classify_predicate(" AND ".join(sqls), aliases[i], aliases[j], times[i], times[j])
        for (i, j), sqls in grouped.items()
    }


def _retention(
    k: int, pairs: dict[tuple[int, int], PredicateParts], times: tuple[str | None, ...]
) -> tuple[int | None, ...]:
    """Per input, the largest ``ts_x - ts_i`` bound over every other input x (see the module
    docstring); None when an input is unbounded from it or has no watermark."""
    inf = math.inf
    dist = [[0.0 if i == j else inf for j in range(k)] for i in range(k)]
    for (i, j), parts in pairs.items():
        w = parts.window
        if w is None or times[i] is None or times[j] is None:
            continue
        if w.hi_us is not None:
            dist[i][j] = min(dist[i][j], w.hi_us)
        if w.lo_us is not None:
            dist[j][i] = min(dist[j][i], -w.lo_us)
    for m in range(k):
        for i in range(k):
            for j in range(k):
                if dist[i][m] + dist[m][j] < dist[i][j]:
                    dist[i][j] = dist[i][m] + dist[m][j]
    out: list[int | None] = []
    for i in range(k):
        if any(x is None for x in times):
            out.append(None)
            continue
        worst = max(dist[i][x] for x in range(k) if x != i)
        out.append(None if math.isinf(worst) else int(worst))
    return tuple(out)


def _method(new: int, bound: set[int], pairs: dict[tuple[int, int], PredicateParts]) -> Method:
    best: Method = "nested-loop"
    for b in bound:
        parts = pairs.get((min(b, new), max(b, new)))
        if parts is None:
            continue
        if parts.equi:
            return "hash"
        if parts.bands or (
            parts.window and parts.window.lo_us is not None and parts.window.hi_us is not None
        ):
            best = "band"
    return best


def _greedy_order(
    start: int,
    k: int,
    conjuncts: t.Sequence[Conjunct],
    pairs: dict[tuple[int, int], PredicateParts],
) -> tuple[int, ...]:
    """Hash-connected inputs first, then band-connected, then any conjunct-connected input, and a
    cross product only when nothing else is left; ties go to the written order."""
    rank = {"hash": 0, "band": 1, "nested-loop": 2}
    bound, order = {start}, []
    while len(bound) < k:

        def score(n: int) -> tuple[int, int, int]:
            connected = any(n in c.inputs and c.inputs & bound for c in conjuncts)
            return (0 if connected else 1, rank[_method(n, bound, pairs)], n)

        nxt = min((n for n in range(k) if n not in bound), key=score)
        order.append(nxt)
        bound.add(nxt)
    return tuple(order)


def _probe_order(
    start: int,
    sequence: tuple[Target, ...],
    conjuncts: t.Sequence[Conjunct],
    pairs: dict[tuple[int, int], PredicateParts],
    aliases: list[str],
    times: tuple[str | None, ...],
    naming: dict[str, str],
    q: Query,
) -> ProbeOrder:
    k = len(aliases)
    if sorted((start, *flat(sequence))) != list(range(k)):
        got = [aliases[i] for i in flat(sequence)]
        msg = f"the probe order from {aliases[start]!r} must visit every other input once: {got}"
        raise ValueError(msg)
    bound = {start}
    filters = tuple(rename(c.sql, naming) for c in conjuncts if c.inputs <= bound)
    steps = []
    rank = {"hash": 0, "band": 1, "nested-loop": 2}
    for target in sequence:
        group = (target,) if isinstance(target, int) else tuple(sorted(target))
        now = bound | set(group)
        mir = _mir(group, conjuncts, q, naming) if len(group) > 1 else None
        # An MIR holds its inputs' join, not their selections: those are checked here.
        inside = [c for c in conjuncts if len(c.inputs) > 1 and c.inputs <= set(group)]
        conditions = tuple(
            rename(c.sql, naming)
            for c in conjuncts
            if c.inputs <= now and not c.inputs <= bound and (mir is None or c not in inside)
        )
        # The best way into any of the group's inputs finds the candidates.
        new = min(group, key=lambda n: (rank[_method(n, bound, pairs)], n))
        method = _method(new, bound, pairs)
        band = _step_band(new, bound, pairs, aliases, times, naming) if method == "band" else None
        steps.append(Step(new, method, conditions, band, mir))
        bound = now
    return ProbeOrder(start, filters, tuple(steps))


def _mir(
    group: tuple[int, ...], conjuncts: t.Sequence[Conjunct], q: Query, naming: dict[str, str]
) -> Mir:
    inside = sorted(
        rename(c.sql, naming) for c in conjuncts if len(c.inputs) > 1 and c.inputs <= set(group)
    )
    sides = [q.sides[i] for i in group]
    slots = tuple(naming[side.alias.lower()] for side in sides)
    return Mir(group, slots, tuple(inside), tuple(side.stream.lower() for side in sides))


def _step_band(
    new: int,
    bound: set[int],
    pairs: dict[tuple[int, int], PredicateParts],
    aliases: list[str],
    times: tuple[str | None, ...],
    naming: dict[str, str],
) -> Band:
    """The narrowest band between `new` and a bound input, as ``store - probe ∈ [lo, hi]``."""
    found: list[Band] = []
    for b in sorted(bound):
        i, j = min(b, new), max(b, new)
        parts = pairs.get((i, j))
        if parts is None:
            continue
        candidates = list(parts.bands)
        w = parts.window
        if w is not None and w.lo_us is not None and w.hi_us is not None:
            # The pair's event-time window as a band on microseconds (classify's convention:
            # right - left, with left = input i).
            li = f"unix_micros({aliases[i]}.{times[i]})"
            ri = f"unix_micros({aliases[j]}.{times[j]})"
            candidates.append(Band(li, ri, float(w.lo_us), float(w.hi_us), temporal=True))
        for band in candidates:
            left, right = rename(band.left_sql, naming), rename(band.right_sql, naming)
            if b == i:  # probe is the left side: store - probe = right - left
                found.append(Band(left, right, band.lo, band.hi, band.temporal))
            else:  # probe is the right side: left - right ∈ [-hi, -lo]
                found.append(Band(right, left, -band.hi, -band.lo, band.temporal))
    return min(found, key=lambda band: band.width)
