"""One multi-way join for several multi-way queries (AJoin's sharing, three or more inputs).

Multi-way queries over the same streams in the same order, with the same equality keys, windows
between the same inputs, and no WITH options, may share (`optimizer.sharing` decides which do,
as for two-way queries, `plan.shared`). Their shared join is a multi-way query of its own over
the streams under the aliases ``sj0``, ``sj1``, …, planned like any other (probe orders, MIR
stores, CLASH's ILP):

- its condition is the members' equality keys, for each pair of inputs with windows the widest
  of the members' windows, and on each input the loosest of the members' selections when it is
  short (`querybits.side_filter`);
- its output is every column a member selects or tests (`querybits.Columns`).

Each member's results are the shared rows whose query-set bit it owns (`querybits.query_bits`
over the member's own conditions: its selections, its windows but those the shared windows
bound already (`micros.implied_by_window`), its other conditions), as for two-way groups. The
shared join's condition holds wherever a member's does, so a member's results are exactly its
own.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import typing as t
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from streamjoin.model import JoinSide, Query, SelectItem
from streamjoin.optimizer.sharing import Candidate
from streamjoin.plan.classify import conjuncts
from streamjoin.plan.grouping import conjunct_sql
from streamjoin.plan.micros import implied_by_window
from streamjoin.plan.multiway import pair_parts
from streamjoin.plan.querybits import (
    Columns,
    numeric_columns,
    query_bits,
    side_filter,
    with_aliases,
)
from streamjoin.plan.shared import SharedMember

if t.TYPE_CHECKING:
    from streamjoin.model import Job


def alias(i: int) -> str:
    """The shared join's alias of input `i`."""
    return f"sj{i}"


@dataclass(frozen=True)
class _Parts:
    """A multi-way query's predicate by role, over the shared join's aliases."""

    keys: frozenset[str]
    """The equality keys between two inputs, as ``sj<i>.<expr> = sj<j>.<expr>`` with i < j."""
    windows: dict[tuple[int, int], tuple[int, int]]
    """Per pair i < j with an event-time window: ``ts_j - ts_i ∈ [lo, hi]`` in microseconds."""
    selections: tuple[frozenset[str], ...]
    """Per input, its one-input conjuncts."""
    rest: tuple[str, ...]
    """Every other conjunct (windows among them)."""


def _parts(job: Job, q: Query) -> _Parts | None:
    """`q`'s predicate by role, or None if it cannot share: WITH options, a window not over
    both inputs' event times, or inputs that only other conditions connect."""
    if q.options:
        return None
    aliases = {side.alias.lower(): alias(i) for i, side in enumerate(q.sides)}
    times = [job.stream(side.stream).event_time for side in q.sides]
    keys: set[str] = set()
    written: set[str] = set()
    windows: dict[tuple[int, int], tuple[int, int]] = {}
    for (i, j), parts in pair_parts(job, q).items():
        for k in parts.equi:
            keys.add(with_aliases(f"{k.left_sql} = {k.right_sql}", aliases))
            written |= {
                with_aliases(f"{a} = {b}", aliases)
                for a, b in itertools.permutations((k.left_sql, k.right_sql))
            }
        w = parts.window
        if w is not None:
            if w.lo_us is None or w.hi_us is None or times[i] is None or times[j] is None:
                return None
            windows[i, j] = (w.lo_us, w.hi_us)
    linked = {tuple(sorted(_inputs(k))) for k in keys} | set(windows)
    if not _connected(len(q.sides), linked):
        return None
    selections: list[set[str]] = [set() for _ in q.sides]
    rest = []
    for conjunct in _conjunct_texts(q.predicate):
        text = with_aliases(conjunct, aliases)
        named = _inputs(text)
        if len(named) == 1:
            selections[next(iter(named))].add(text)
        elif text not in written:
            rest.append(text)
    return _Parts(frozenset(keys), windows, tuple(map(frozenset, selections)), tuple(rest))


@functools.lru_cache(maxsize=4096)
def _conjunct_texts(predicate: str) -> tuple[str, ...]:
    # (Kept, as `_inputs`: each query's predicate is read for its candidate and its shared join.)
    return tuple(conjunct_sql(c) for c in conjuncts(sqlglot.parse_one(predicate, dialect="spark")))


@functools.lru_cache(maxsize=65536)
def _inputs(text: str) -> frozenset[int]:
    tree = sqlglot.parse_one(text, dialect="spark")
    return frozenset(int(col.table[2:]) for col in tree.find_all(exp.Column) if col.table)


def _connected(n: int, edges: t.Collection[tuple[int, ...]]) -> bool:
    reached, frontier = {0}, [0]
    while frontier:
        at = frontier.pop()
        for edge in edges:
            if at in edge:
                for other in set(edge) - reached:
                    reached.add(other)
                    frontier.append(other)
    return len(reached) == n


def multiway_candidate(job: Job, q: Query) -> Candidate | None:
    """Multi-way query `q` as the sharing cost model sees it, or None if it cannot share."""
    parts = _parts(job, q)
    if parts is None:
        return None
    streams = tuple(side.stream for side in q.sides)
    times = tuple(job.stream(s).event_time for s in streams)
    key = ("multiway", streams, times, parts.keys, frozenset(parts.windows))
    spans = [(hi - lo) / 1e6 for lo, hi in parts.windows.values()]
    return Candidate(q.name, key, max(spans) if spans else None, parts.selections, streams)


def shared_core(
    job: Job, members: t.Sequence[Query]
) -> tuple[Query, tuple[SharedMember, ...], str]:
    """The multi-way query that runs `members` as one join, each member's share of it, and the
    query-set bits of its rows."""
    every = [_parts(job, q) for q in members]
    if any(p is None for p in every):
        msg = f"queries {', '.join(q.name for q in members)} cannot share a join"
        raise ValueError(msg)
    parts = t.cast("list[_Parts]", every)
    first = members[0]
    times = [job.stream(side.stream).event_time for side in first.sides]
    conds = sorted(parts[0].keys)
    shared_windows: list[tuple[str, str, int, int]] = []  # (first, second, lo, hi)
    for i, j in sorted(parts[0].windows):
        lo = min(p.windows[i, j][0] for p in parts)
        hi = max(p.windows[i, j][1] for p in parts)
        ti, tj = f"{alias(i)}.{times[i]}", f"{alias(j)}.{times[j]}"
        shared_windows.append((ti, tj, lo, hi))
        span = f"{ti} + INTERVAL '{lo}' MICROSECOND AND {ti} + INTERVAL '{hi}' MICROSECOND"
        conds.append(f"{tj} BETWEEN {span}")
    numeric = numeric_columns(job, ((side.stream, alias(i)) for i, side in enumerate(first.sides)))
    for i in range(len(first.sides)):
        if (only := side_filter([p.selections[i] for p in parts], numeric)) is not None:
            conds.append(f"({only})")
    columns = Columns({alias(i) for i in range(len(first.sides))})
    shares, own_conds = [], []
    for bit, (q, p) in enumerate(zip(members, parts, strict=True)):
        aliases = {side.alias.lower(): alias(i) for i, side in enumerate(q.sides)}
        own = [(columns.name(with_aliases(item.sql, aliases)), item.alias) for item in q.select]
        # (The shared join has tested its windows on every row: a member's window conjunct
        # one of them implies would test each row again for nothing.)
        rest = [c for c in p.rest if not any(implied_by_window(c, *w) for w in shared_windows)]
        mine = sorted({columns.over(c) for c in (*rest, *(c for s in p.selections for c in s))})
        own_conds.append(mine)
        predicate = " AND ".join(f"({c})" for c in mine) or None
        shares.append(SharedMember(q.name, bit, tuple(own), predicate))
    select = [SelectItem(text, column) for text, column in columns.names.items()]
    names = ",".join(q.name for q in members)
    sides = [JoinSide(side.stream, alias(i)) for i, side in enumerate(first.sides)]
    query = Query(
        name=f"shared_{hashlib.sha256(names.encode()).hexdigest()[:10]}",
        sink="",
        left=sides[0],
        right=sides[1],
        predicate=" AND ".join(conds),
        select=tuple(select),
        line=first.line,
        further=tuple(sides[2:]),
    )
    return query, tuple(shares), query_bits(own_conds)
