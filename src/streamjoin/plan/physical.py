"""The physical plan of a job: per query, how candidate pairs are found; per stream, its state.

Strategies (chosen per query, in this order of preference):

- ``hash``: the predicate has equality conjuncts; Spark SQL's batch join extracts them as hash
  keys by itself, so the delta is simply joined with the state on the whole predicate. A value
  band's bucket joins the keys; so may the event-time window's (``time_band``) when a few hot keys
  would leave long candidate lists (the query option ``time_buckets``).
- ``band``: no equality, but a band ``right - left ∈ [lo, hi]`` (a value band, or else the
  event-time window). Both sides get a bucket id ``floor(v / w)`` with ``w = hi - lo`` (a quarter
  of it for the window, ``TIME_BAND_SPLIT``); the delta side is exploded to the buckets its band
  overlaps, the state side is hashed on its own bucket, and the whole predicate is rechecked on
  the candidates.
- ``nested-loop``: nothing to hash on; the (small) delta is broadcast against the state.

State retention follows from the windows: a left row can only meet right rows that are not yet
late, i.e. with ``ts >= W`` (the global watermark), so it is needed while ``l.ts >= W - hi``; a
right row while ``r.ts >= W + lo``. A stream's state keeps the loosest bound over all its uses.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, replace

from streamjoin.optimizer.sharing import Candidate, group_all
from streamjoin.plan.aggregate import AggregatePlan, GroupBuffer, plan_aggregate
from streamjoin.plan.clash import ClashPlan, plan_clash
from streamjoin.plan.classify import classify_predicate
from streamjoin.plan.groups import GroupQueryPlan, plan_group_query
from streamjoin.plan.micros import micros_predicate
from streamjoin.plan.multiway import MultiwayPlan, pair_parts, plan_multiway
from streamjoin.plan.options import check_multiway_options, check_two_way_options
from streamjoin.plan.outer import OuterPlan, plan_outer
from streamjoin.plan.parts import Band, ColumnBound, PredicateParts
from streamjoin.plan.querybits import numeric_columns
from streamjoin.plan.retention import (
    Use,
    column_expiry,
    column_lag,
    loosest,
    query_retention,
    side_retention,
    stream_expiry,
)
from streamjoin.plan.rollup import RollupPlan
from streamjoin.plan.shared import LEFT, RIGHT, SharedGroup, candidate, shared_query
from streamjoin.plan.shared_multiway import multiway_candidate, shared_core
from streamjoin.plan.shedding import check_freshness, check_shedding
from streamjoin.plan.streams import StreamPlan

if t.TYPE_CHECKING:
    from streamjoin.model import Job, Query

Strategy = t.Literal["hash", "band", "nested-loop"]
"""How a query finds candidate pairs; see the module docstring."""


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """One query: its classified predicate and the chosen strategy."""

    query: Query
    parts: PredicateParts
    """The classified predicate that finds its candidate pairs: the whole one, an outer
    join's ON condition (the WHERE filters the pairs)."""
    strategy: Strategy
    band: Band | None
    left_time: str | None
    right_time: str | None
    time_band: Band | None = None
    """For an equi join with a bounded event-time window and no value band: the window as a
    temporal band, whose bucket may join the hash keys when few keys carry most rows (the
    query option ``time_buckets``; see `runtime.routing.router.QueryRouter.band`)."""
    spark_predicate: str = ""
    """The predicate as the joins run it: the same truth values, its timestamp arithmetic in
    microseconds where that is exact (`plan.micros`)."""
    expiry: tuple[ColumnBound | None, ColumnBound | None] = (None, None)
    """Per side, the column its rows leave the join's index by (`retention.column_expiry`)."""


@dataclass(frozen=True)
class JobPlan:
    """All queries and active streams of a job: two-way queries in `queries`, the multi-way joins
    a batch runs in `multiway` (each query over three or more inputs that runs alone, and each
    shared multi-way join)."""

    job: Job
    streams: tuple[StreamPlan, ...]
    queries: tuple[QueryPlan, ...]
    multiway: tuple[MultiwayPlan, ...] = ()
    clash: ClashPlan | None = None
    """The ILP's global plan for the multi-way queries (their probe orders come from it)."""
    shared: tuple[SharedGroup[QueryPlan], ...] = ()
    """Two-way queries that run as one join (`plan.shared`)."""
    cores: tuple[SharedGroup[MultiwayPlan], ...] = ()
    """Multi-way queries that run as one multi-way join (`plan.shared_multiway`); the join's
    plan is in `multiway` too."""
    aggregates: tuple[AggregatePlan, ...] = ()
    """The ``GROUP BY window`` queries: in `job`, each is its join, selecting the columns its
    groups read (`plan.aggregate`)."""
    outers: tuple[OuterPlan, ...] = ()
    """The outer joins: when each emits its rows without a partner (`plan.outer`)."""
    group_queries: tuple[GroupQueryPlan, ...] = ()
    """The queries over windowed groups of single streams (`plan.groups`)."""

    @property
    def rollups(self) -> tuple[RollupPlan, ...]:
        """The rollups over the GROUP BY queries' rows (`plan.rollup`)."""
        return tuple(RollupPlan(a.query) for a in self.aggregates if a.query.rollup is not None)

    @property
    def buffers(self) -> tuple[GroupBuffer, ...]:
        """Every buffer of rows waiting for their windows to close: the GROUP BY and top-N
        queries' joined rows, and each group query input's stream rows."""
        return (*self.aggregates, *(b for g in self.group_queries for b in g.inputs))

    @property
    def joins(self) -> tuple[QueryPlan, ...]:
        """The two-way joins a batch runs: each shared join, and each query that runs alone."""
        grouped = {m.name for g in self.shared for m in g.members}
        alone = tuple(qp for qp in self.queries if qp.query.name not in grouped)
        return (*alone, *(g.plan for g in self.shared))

    @property
    def groups(self) -> tuple[SharedGroup[QueryPlan] | SharedGroup[MultiwayPlan], ...]:
        """Every shared join, two-way and multi-way."""
        return (*self.shared, *self.cores)

    def plans(self) -> list[QueryPlan | MultiwayPlan]:
        """A plan per query of the job, in its order; a multi-way query that shares a join gets
        its own plan (which no batch runs), for what it reads and for `explain`."""
        own: dict[str, QueryPlan | MultiwayPlan] = {p.query.name: p for p in self.queries}
        own |= {p.query.name: p for p in self.multiway}
        return [own.get(q.name) or plan_multiway(self.job, q) for q in self.job.queries]

    def stream(self, name: str) -> StreamPlan:
        """The plan of active stream `name`."""
        for s in self.streams:
            if s.name == name:
                return s
        msg = f"stream {name!r} is not used by any query"
        raise KeyError(msg)

    def explain(self) -> str:
        """The plan as text, for ``streamjoin explain``."""
        from streamjoin.plan.explain import explain_plan

        return explain_plan(self)


def plan_job(
    job: Job,
    *,
    every_stream: bool = False,
    history_us: int | None = 0,
    groups: t.Sequence[t.Sequence[str]] | None = None,
) -> JobPlan:
    """Classify every query's predicate and derive each active stream's state layout.

    Args:
        job: the job.
        every_stream: make every declared stream active, read by no query or not (a served
            job, whose queries come and go, reads all its streams from the start).
        history_us: with `every_stream`, how far behind the watermark each stream's state
            keeps rows at least, beyond what the queries need (None: all of them), for the
            queries added later to join with.
        groups: the two-way queries that share a join, by name (None: AJoin's grouping
            afresh, `optimizer.sharing.group_all`; empty: none share).
    """
    aggregates = tuple(
        plan_aggregate(q, window_lag(job, q), job.source)
        for q in job.queries
        if q.windowed is not None
    )
    if aggregates:
        joins = {a.name: a.join_query() for a in aggregates}
        job = replace(job, queries=tuple(joins.get(q.name, q) for q in job.queries))
    outers = tuple(plan_outer(job, q) for q in job.queries if q.outer is not None)
    queries = tuple(_plan_query(job, q) for q in job.queries if not q.multiway)
    many = [q for q in job.queries if q.multiway]
    for q in job.queries:
        check_shedding(job, q)
    for q in many:
        check_multiway_options(job, q)
    candidates = {c.name: c for c in sharing_candidates(job, queries)}
    if groups is None:
        groups = group_all(list(candidates.values()))
    valid = _valid(groups, candidates)
    by_name = {q.name: q for q in many}
    cores = [(g, shared_core(job, [by_name[n] for n in g])) for g in valid if g[0] in by_name]
    grouped = {n for g, _ in cores for n in g}
    run = [q for q in many if q.name not in grouped] + [core for _, (core, _, _) in cores]
    clash = plan_clash(job, run, {q.name: pair_parts(job, q) for q in run}) if run else None
    fixed = clash.orders if clash is not None else {}
    multiway = tuple(plan_multiway(job, q, fixed.get(q.name)) for q in run)
    for qp in queries:  # (a side is bounded by its window, or by a column it leaves by)
        ends = zip(side_retention(qp), qp.expiry, strict=True)
        check_freshness(job, qp.query, all(k is not None or e is not None for k, e in ends))
    for mp in multiway:
        check_freshness(job, mp.query, None not in mp.retain_us)
    used = {side.stream for q in job.queries for side in q.sides}
    used |= {s for g in job.group_queries for s in g.streams}
    active = [s for s in job.streams if every_stream or s.name in used]
    kept: list[Use] = [(history_us, None)] if every_stream else []
    uses: dict[str, list[Use]] = {s.name: list(kept) for s in active}
    for qp in queries:  # (a side its window leaves unbounded may leave by a column)
        for side, keep, bound in zip(qp.query.sides, side_retention(qp), qp.expiry, strict=True):
            uses[side.stream].append((keep, bound))
    for mp in multiway:
        for stream, keep in query_retention(mp).items():
            uses[stream].append((keep, None))
    for op in outers:
        for stream, keep in op.retention().items():
            uses[stream].append((keep, None))
    group_queries = tuple(plan_group_query(g) for g in job.group_queries)
    for gp in group_queries:
        for group in gp.query.inputs:  # (its rows wait in the query's buffer, not in the state)
            uses[group.stream].append((0, None))
        if gp.query.rows is not None and gp.rows is not None:  # (they wait in the state)
            uses[gp.query.rows.stream].append((gp.rows.retain_us, None))
    streams = []
    for index, s in enumerate(active):
        kept_for = uses[s.name]
        retain_us = loosest([k for k, _ in kept_for])
        streams.append(StreamPlan(s, index, retain_us, stream_expiry(s, kept_for)))
    planned = {mp.query.name: mp for mp in multiway}
    core_groups = tuple(
        SharedGroup(planned[core.name], shares, bits) for _, (core, shares, bits) in cores
    )
    two_way = {qp.query.name: qp for qp in queries}
    shared = tuple(_plan_shared(job, [two_way[n] for n in g]) for g in valid if g[0] not in by_name)
    return JobPlan(
        job,
        tuple(streams),
        queries,
        multiway,
        clash,
        shared,
        core_groups,
        aggregates,
        outers,
        group_queries,
    )


def sharing_candidates(job: Job, queries: t.Iterable[QueryPlan]) -> list[Candidate]:
    """The queries of `job` that may share a join, as the cost model sees them: the two-way
    ones among `queries` (their plans), and the multi-way ones. A GROUP BY query or an outer
    join runs its join alone: its rows go to its buffer, or meet its rows without a partner."""
    two = [
        c
        for qp in queries
        if qp.query.windowed is None and qp.query.outer is None and (c := candidate(qp))
    ]
    many = [
        c
        for q in job.queries
        if q.multiway and q.windowed is None and (c := multiway_candidate(job, q))
    ]
    return [*two, *many]


def candidates_of(plan: JobPlan) -> list[Candidate]:
    """The queries of `plan` that may share a join (`sharing_candidates`)."""
    return sharing_candidates(plan.job, plan.queries)


def _valid(
    groups: t.Sequence[t.Sequence[str]], candidates: t.Mapping[str, Candidate]
) -> list[list[str]]:
    """`groups` as this job can run them: only queries that may share, each once, with the
    streams and keys of their group's first (groups kept from an earlier version of the job
    may name queries since changed or gone)."""
    out, seen = [], set()
    for group in groups:
        members = [candidates[n] for n in group if n in candidates and n not in seen]
        kept = [m.name for m in members if m.key == members[0].key]
        if len(kept) > 1:
            out.append(kept)
            seen.update(kept)
    return out


def _plan_shared(job: Job, members: list[QueryPlan]) -> SharedGroup[QueryPlan]:
    first = members[0].query
    numeric = numeric_columns(job, ((first.left.stream, LEFT), (first.right.stream, RIGHT)))
    query, shares, bits = shared_query(members, numeric)
    return SharedGroup(_plan_query(job, query), shares, bits)


def side_lags(job: Job, query: Query) -> tuple[int | None, ...]:
    """Per input of `query`: how far behind the watermark its event time may be in a result
    still to come (`plan.aggregate`): its `side_retention` planned alone, and for a preserved
    side of an outer join, how long its rows may wait for a partner (`plan.outer`)."""
    # (Planned on its join alone: a GROUP BY's SELECT names the window, no input.)
    joined = replace(query, select=(), aggregation=None, topn=None)
    plan = plan_multiway(job, joined) if query.multiway else _plan_query(job, joined)
    lags = side_retention(plan)
    if query.outer is None:
        return lags
    op = plan_outer(job, query)
    return tuple(
        max(lag, op.lag(i)) if lag is not None and op.outer.preserves(i) else lag
        for i, lag in enumerate(lags)
    )


def window_lag(job: Job, query: Query) -> int | None:
    """How far behind the watermark the column that `query`'s groups are windowed by may be in
    a result still to come (None: without bound): its input's lag (`side_lags`) for an event
    time, else the lag of a column bounding the join (`retention.column_lag`)."""
    agg = query.windowed
    assert agg is not None
    lags = side_lags(job, query)
    alias = agg.window.source[0]
    side = next(i for i, s in enumerate(query.sides) if s.alias.lower() == alias)
    if agg.window.by_event_time(job.stream(query.sides[side].stream)):
        return lags[side]
    times = tuple(job.stream(s.stream).event_time for s in query.sides)
    return column_lag(query, side, times, lags, job.source)


TIME_BAND_SPLIT = 4
"""Buckets a keyless join's event-time window is cut into. Its rows arrive in time order, so a
batch's probes reach the few buckets just behind it; each bucket is a run of its own on the
partitions in turn (`indexsql.run_places`), and at a quarter of the window each of two
partitions holds half of the rows any probe reaches (in buckets of the window's width, one
partition holds most of them)."""


def _plan_query(job: Job, q: Query) -> QueryPlan:
    left, right = job.stream(q.left.stream), job.stream(q.right.stream)
    # (An outer join's candidate pairs are its ON condition's: a pair that meets the ON and not
    # the WHERE still gives its rows a partner. The WHERE filters, with the whole predicate.)
    found_by = q.predicate if q.outer is None else q.outer.on
    parts = classify_predicate(
        found_by, q.left.alias, q.right.alias, left.event_time, right.event_time
    )
    band: Band | None = None
    time_band: Band | None = None
    window = parts.window
    if window is not None and (window.lo_us is None or window.hi_us is None):
        window = None
    times = (f"{q.left.alias}.{left.event_time}", f"{q.right.alias}.{right.event_time}")
    strategy: Strategy
    if parts.equi:
        # Equality keys of few distinct values leave many candidates per key; a value band's
        # bucket joins the hash keys and cuts them down (the demo's 5 instruments, say).
        strategy = "hash"
        band = min(parts.bands, key=lambda b: b.width) if parts.bands else None
        if band is None and window is not None:
            time_band = window.band(*times)
    elif parts.bands:
        strategy, band = "band", min(parts.bands, key=lambda b: b.width)
    elif window is not None:
        strategy, band = "band", window.band(*times, split=TIME_BAND_SPLIT)
    else:
        strategy = "nested-loop"
    check_two_way_options(job, q, parts, band, time_band)
    timestamps = [
        f"{side.alias}.{c.name}"
        for side, stream in ((q.left, left), (q.right, right))
        for c in stream.columns
        if c.type.name == "TIMESTAMP"
    ]
    spark_predicate = micros_predicate(q.predicate, timestamps)
    qp = QueryPlan(
        q, parts, strategy, band, left.event_time, right.event_time, time_band, spark_predicate
    )
    return replace(qp, expiry=column_expiry(qp, timestamps))
