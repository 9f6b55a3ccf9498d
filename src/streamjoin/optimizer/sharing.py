"""AJoin's query grouping (Karimov, Rabl, Markl, PVLDB 2019, §2.1.2–2.1.3), for joins that may
share one join per batch.

Queries over the same streams and the same equality keys can run as one join (`plan.shared`,
`plan.shared_multiway`): the join reads each input's rows that pass any member's selections,
over the widest member window, and a query-set bit per member says which results are whose.
Sharing saves a join per batch (its Spark job, planning and sink pass) and reads the stored rows
once; it costs when the members' selections or windows differ, because then the shared join
handles rows and pairs that only some members need (AJoin's Fig. 6: a narrow window next to a
very wide one, or disjoint selections, run better apart).

**Cost (AJoin Eq. 2, per batch against stored state).** A join costs ``FIXED`` plus the rows it
indexes on each input: the input's rate times the window's span times the fraction of rows that
pass the selections (``Crd`` of the union of the members' selected sets). A member's selection
on a side is the set of its one-side conjuncts; each conjunct is taken to pass ``SELECTIVITY``
of the rows, a union of different selections the sum of theirs (at most 1), as AJoin's
inclusion-exclusion would give for disjoint sets. Full-history members (no window) share only
with each other.

**Grouping (§2.1.3).** Per sharing key: take the pair whose shared cost is lowest among the
pairs cheaper together than apart, extend it eagerly with every query that keeps it cheaper
than apart, and repeat; a query that fits nowhere runs alone. A group holds at most ``MAX_BITS``
queries, the bits of one BIGINT. As queries come and go, `place` puts a new query into the group
it lowers the cost of most (or pairs it, or leaves it alone) and `remove` takes a dropped one out;
past ``REPLAN_CHURN`` of changes since the last full grouping, the groups are made afresh.
"""

from __future__ import annotations

import itertools
import typing as t
from dataclasses import dataclass

FIXED = 50_000.0
"""A separate join's cost per batch beyond its rows, in rows: a Spark job, its planning and its
sink pass cost about what indexing this many rows does (about 50 ms on 2 cores)."""
SELECTIVITY = 1 / 3
"""The fraction of a side's rows taken to pass one selection conjunct (no statistics yet)."""
DEFAULT_RATE = 1_000.0
"""Rows per second of event time of a stream whose rate is not known yet."""
FULL_HISTORY_S = 3_600.0
"""The span a full-history join's state is taken to cover."""
MAX_BITS = 64
REPLAN_CHURN = 0.5
"""AJoin's threshold: created plus deleted queries over all queries, for a full re-grouping."""


@dataclass(frozen=True)
class Candidate:
    """What the cost model knows of one query that may share: its sharing key (streams and
    equality keys), its widest window's span (None: full history) and its selections per
    input."""

    name: str
    key: t.Hashable
    span_s: float | None
    selections: tuple[frozenset[str], ...]
    """Per input, in the order of `streams`: its one-input conjuncts."""
    streams: tuple[str, ...]

    @property
    def left(self) -> frozenset[str]:
        """The first input's selections."""
        return self.selections[0]

    @property
    def right(self) -> frozenset[str]:
        """The second input's selections."""
        return self.selections[1]


def _selected(selections: list[frozenset[str]]) -> float:
    """The fraction of a side's rows that pass any of the members' selections."""
    if any(not s for s in selections):
        return 1.0
    distinct = set(selections)
    return min(1.0, sum(SELECTIVITY ** len(s) for s in distinct))


def cost(members: t.Sequence[Candidate], rates: t.Mapping[str, float]) -> float:
    """The cost per batch of running `members` as one join (AJoin Eq. 2's indexing terms)."""
    spans = [m.span_s for m in members]
    span = FULL_HISTORY_S if any(s is None for s in spans) else max(t.cast("list[float]", spans))
    rows = 0.0
    for i, stream in enumerate(members[0].streams):
        selected = _selected([m.selections[i] for m in members])
        rows += rates.get(stream, DEFAULT_RATE) * span * selected
    return FIXED + rows


def _can_share(a: Candidate, b: Candidate) -> bool:
    return a.key == b.key and (a.span_s is None) == (b.span_s is None)


def _gain(group: list[Candidate], c: Candidate, rates: t.Mapping[str, float]) -> float:
    """What adding `c` to `group` saves against running them apart (> 0: worth it)."""
    return cost(group, rates) + cost([c], rates) - cost([*group, c], rates)


def group_all(
    candidates: t.Sequence[Candidate], rates: t.Mapping[str, float] | None = None
) -> list[list[str]]:
    """AJoin's greedy grouping of `candidates` afresh: groups of two or more, by name."""
    rates = rates or {}
    left = list(candidates)
    groups: list[list[str]] = []
    while True:
        best: tuple[float, Candidate, Candidate] | None = None
        for a, b in itertools.combinations(left, 2):
            if not _can_share(a, b):
                continue
            together = cost([a, b], rates)
            if together < cost([a], rates) + cost([b], rates) and (
                best is None or together < best[0]
            ):
                best = (together, a, b)
        if best is None:
            return groups
        group = [best[1], best[2]]
        left = [c for c in left if c not in group]
        for c in list(left):
            if len(group) < MAX_BITS and _can_share(group[0], c) and _gain(group, c, rates) > 0:
                group.append(c)
                left.remove(c)
        groups.append([c.name for c in group])


def place(
    groups: t.Sequence[t.Sequence[str]],
    new: Candidate,
    candidates: t.Sequence[Candidate],
    rates: t.Mapping[str, float] | None = None,
) -> list[list[str]]:
    """`groups` with the new query `new` placed: into the group it saves most in, else paired
    with the query running alone it saves most with, else alone. `candidates` are the running
    queries that may share (`new` among them). A query in a group already stays there: placed
    before it, another query added in the same change may have taken it as its partner."""
    rates = rates or {}
    by_name = {c.name: c for c in candidates}
    out = [list(g) for g in groups]
    if any(new.name in g for g in out):
        return out
    best: tuple[float, list[str] | None, Candidate | None] = (0.0, None, None)
    for g in out:
        members = [by_name[n] for n in g]
        if len(g) < MAX_BITS and _can_share(members[0], new):
            gain = _gain(members, new, rates)
            if gain > best[0]:
                best = (gain, g, None)
    grouped = {n for g in out for n in g}
    for c in candidates:
        if c.name != new.name and c.name not in grouped and _can_share(c, new):
            gain = _gain([c], new, rates)
            if gain > best[0]:
                best = (gain, None, c)
    if best[1] is not None:
        best[1].append(new.name)
    elif best[2] is not None:
        out.append([best[2].name, new.name])
    return out


def remove(groups: t.Sequence[t.Sequence[str]], name: str) -> list[list[str]]:
    """`groups` without query `name`; a group left with one query is no group."""
    out = [[n for n in g if n != name] for g in groups]
    return [g for g in out if len(g) > 1]
