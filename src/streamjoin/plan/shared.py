"""One join for several two-way queries (AJoin's computation sharing with query-set bits).

Queries over the same two streams with the same equality keys and no WITH options may share
(`optimizer.sharing` decides which do). Their shared join is planned and run like a query of its
own (`SharedGroup.plan`), over the streams under the aliases ``sjl`` and ``sjr``:

- its condition is the members' common equality keys and the widest of their windows, and on
  each side the loosest of the members' selections when it is short (`querybits.side_filter`):
  Spark pushes it below the join, so rows no member selects are neither indexed nor probed;
- its output is every column a member selects or tests (each distinct expression once).

Its rows are kept for the batch; the query-set bits (`SharedGroup.bits`) are then computed over
them (`querybits`): bit i says that the pair passes member i's conditions beyond the shared
join's, each distinct condition evaluated once per pair whatever the number of members that use
it. Member i's results are the shared rows with bit i set, its columns renamed (`SharedMember`).
A pair is in member i's results exactly when member i's whole predicate holds, so sharing
changes the work, never the output.

(The bits are computed after the join, not in it: Spark generates the join's code once per
slice of state it unions, so long expressions there made a batch compile megabytes of Java;
over the kept rows the code is the same every batch and Spark compiles it once.)
"""

from __future__ import annotations

import hashlib
import typing as t
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from streamjoin.model import JoinSide, Query, SelectItem
from streamjoin.optimizer.sharing import Candidate
from streamjoin.plan.classify import conjuncts
from streamjoin.plan.grouping import conjunct_sql
from streamjoin.plan.micros import implied_by_window
from streamjoin.plan.querybits import Columns, query_bits, side_filter, with_aliases

if t.TYPE_CHECKING:
    from streamjoin.plan.multiway import MultiwayPlan
    from streamjoin.plan.physical import QueryPlan

LEFT, RIGHT = "sjl", "sjr"
BITS = "_sjq"
"""The column of a shared row's query-set bits, where a joint write computes them."""


@dataclass(frozen=True)
class SharedMember:
    """One query of a group: its bit, and its output columns as (shared column, its name)."""

    name: str
    bit: int
    columns: tuple[tuple[str, str], ...]
    predicate: str | None = None
    """Its conditions beyond the shared join's, over the join's columns (None: none)."""


P = t.TypeVar("P", "QueryPlan", "MultiwayPlan")


@dataclass(frozen=True)
class SharedGroup(t.Generic[P]):
    """Queries that run as one join: the join's plan and each member's share of its rows."""

    plan: P
    members: tuple[SharedMember, ...]
    bits: str
    """A shared row's query-set bits (a BIGINT over the join's columns): bit i is set when
    member i's predicate holds."""

    @property
    def name(self) -> str:
        """The shared join's name (its router's, in the manifest)."""
        return self.plan.query.name


def _sides(node: exp.Expr) -> set[str]:
    return {col.table for col in node.find_all(exp.Column)}


@dataclass(frozen=True)
class _Split:
    """A query's predicate by role: shared keys, selections per side, pair conjuncts."""

    equi: tuple[str, ...]
    """The equality keys, each as ``sjl.<expr> = sjr.<expr>``."""
    left: frozenset[str]
    right: frozenset[str]
    pair: tuple[str, ...]
    """The conjuncts over both sides but the equality keys."""


def _split(qp: QueryPlan) -> _Split:
    q = qp.query
    aliases = {q.left.alias.lower(): LEFT, q.right.alias.lower(): RIGHT}
    equi = tuple(
        sorted(with_aliases(f"{k.left_sql} = {k.right_sql}", aliases) for k in qp.parts.equi)
    )
    # (The keys as written either way round, to know them among the conjuncts.)
    keys = {*equi, *(with_aliases(f"{k.right_sql} = {k.left_sql}", aliases) for k in qp.parts.equi)}
    left: set[str] = set()
    right: set[str] = set()
    pair: list[str] = []
    for c in conjuncts(sqlglot.parse_one(q.predicate, dialect="spark")):
        text = with_aliases(conjunct_sql(c), aliases)
        sides = _sides(c)
        if sides == {q.left.alias}:
            left.add(text)
        elif sides == {q.right.alias}:
            right.add(text)
        elif text not in keys:
            pair.append(text)
    return _Split(equi, frozenset(left), frozenset(right), tuple(pair))


def candidate(qp: QueryPlan) -> Candidate | None:
    """`qp` as the sharing cost model sees it, or None if it cannot share: it has WITH
    options, no equality key, or a window over other columns than the event times."""
    q = qp.query
    if q.options or not qp.parts.equi:
        return None
    window = qp.parts.window
    if window is not None and (qp.left_time is None or qp.right_time is None):
        return None
    span = None
    if window is not None and window.lo_us is not None and window.hi_us is not None:
        span = (window.hi_us - window.lo_us) / 1e6
    split = _split(qp)
    times = (qp.left_time, qp.right_time)
    key = (q.left.stream, q.right.stream, split.equi, times)
    streams = (q.left.stream, q.right.stream)
    return Candidate(q.name, key, span, (split.left, split.right), streams)


def shared_query(
    members: t.Sequence[QueryPlan], numeric: t.Collection[str] = ()
) -> tuple[Query, tuple[SharedMember, ...], str]:
    """The query whose plan runs `members` as one join, each member's share of it, and the
    query-set bits of its rows (`SharedGroup.bits`, `querybits.query_bits`). `numeric`: the
    numeric columns of the streams, as ``sjl.<column>`` and ``sjr.<column>``."""
    first = members[0].query
    splits = [_split(qp) for qp in members]
    # The join hashes on the keys common to all; a member's other keys are its own conditions.
    common = set(splits[0].equi).intersection(*(s.equi for s in splits))
    conds = sorted(common)
    windows = [qp.parts.window for qp in members]
    window: tuple[str, str, int, int] | None = None
    if all(w is not None and w.lo_us is not None and w.hi_us is not None for w in windows):
        lo = min(t.cast("int", w.lo_us) for w in windows if w is not None)
        hi = max(t.cast("int", w.hi_us) for w in windows if w is not None)
        lt, rt = f"{LEFT}.{members[0].left_time}", f"{RIGHT}.{members[0].right_time}"
        window = (lt, rt, lo, hi)
        conds.append(
            f"{rt} BETWEEN {lt} + INTERVAL '{lo}' MICROSECOND "
            f"AND {lt} + INTERVAL '{hi}' MICROSECOND"
        )
    for side in ([s.left for s in splits], [s.right for s in splits]):
        if (only := side_filter(side, numeric)) is not None:
            conds.append(f"({only})")
    columns = Columns((LEFT, RIGHT))
    shares, own_conds = [], []
    for i, (qp, split) in enumerate(zip(members, splits, strict=True)):
        q = qp.query
        aliases = {q.left.alias.lower(): LEFT, q.right.alias.lower(): RIGHT}
        own = [(columns.name(with_aliases(item.sql, aliases)), item.alias) for item in q.select]
        keys = [k for k in split.equi if k not in common]
        # (The shared join has tested its window on every pair: a member's window conjunct
        # that window implies would test each pair again for nothing.)
        pair = [c for c in split.pair if window is None or not implied_by_window(c, *window)]
        mine = sorted({columns.over(c) for c in (*split.left, *split.right, *pair, *keys)})
        own_conds.append(mine)
        predicate = " AND ".join(f"({c})" for c in mine) or None
        shares.append(SharedMember(q.name, i, tuple(own), predicate))
    select = [SelectItem(text, column) for text, column in columns.names.items()]
    names = ",".join(qp.query.name for qp in members)
    digest = hashlib.sha256(names.encode()).hexdigest()[:10]
    query = Query(
        name=f"shared_{digest}",
        sink="",
        left=JoinSide(first.left.stream, LEFT),
        right=JoinSide(first.right.stream, RIGHT),
        predicate=" AND ".join(conds),
        select=tuple(select),
        line=first.line,
    )
    return query, tuple(shares), query_bits(own_conds)
