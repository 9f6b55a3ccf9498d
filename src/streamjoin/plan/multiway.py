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

import functools
import math
import typing as t
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from streamjoin.plan.classify import classify_predicate, conjuncts
from streamjoin.plan.parts import PredicateParts
from streamjoin.plan.probeorder import (
    Conjunct,
    ProbeOrder,
    Step,
    Target,
    greedy_order,
    method_into,
    probe_order,
    rename,
    step_band,
)

if t.TYPE_CHECKING:
    from streamjoin.model import Job, Query


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
        sequence = fixed.get(start) or greedy_order(start, len(aliases), conjuncts, pairs)
        order = probe_order(start, sequence, conjuncts, pairs, aliases, times, _naming(q))
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
    method = method_into(store, {probe}, pairs)
    band = None
    if method == "band":
        band = step_band(store, {probe}, pairs, aliases, mp.times, naming)
    return Step(store, method, conditions, band)


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


def _conjuncts(predicate: str, position: dict[str, int]) -> tuple[Conjunct, ...]:
    return _conjuncts_at(predicate, tuple(sorted(position.items())))


@functools.lru_cache(maxsize=4096)
def _conjuncts_at(predicate: str, position: tuple[tuple[str, int], ...]) -> tuple[Conjunct, ...]:
    # (Kept: a job's plan reads each multi-way query's conjuncts several times, and a hundred
    # queries from a few templates have the same ones, each a parse and a print of SQL.)
    if not predicate.strip():
        return ()
    at = dict(position)
    out = []
    for node in conjuncts(sqlglot.parse_one(predicate, dialect="spark")):
        named = frozenset(at[c.table.lower()] for c in node.find_all(exp.Column))
        out.append(Conjunct(node.sql(dialect="spark"), named))
    return tuple(out)


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
