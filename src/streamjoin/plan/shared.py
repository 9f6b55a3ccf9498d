"""One join for several two-way queries (AJoin's computation sharing with query-set bits).

Queries over the same two streams with the same equality keys and no WITH options may share
(`optimizer.sharing` decides which do). Their shared join is planned and run like a query of its
own (`SharedGroup.plan`), over the streams under the aliases ``sjl`` and ``sjr``:

- its condition is the members' common equality keys, the widest of their windows, and
  ``L <> 0`` and ``R <> 0``, where L is a BIGINT whose bit i says that a left row passes
  member i's selections on the left stream (its conjuncts over that side alone), R the same on
  the right: Spark pushes them below the join, so rows no member selects are neither indexed
  nor probed, and each selection is evaluated once per row, not once per query;
- its output is every column a member selects (each distinct expression once) and the bits
  ``L & R & P``, where P's bit i says that the pair passes member i's other conjuncts.

Member i's results are the shared rows with bit i set, its columns renamed (`SharedMember`).
A pair is in member i's results exactly when member i's whole predicate holds, so sharing
changes the work, never the output.
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

if t.TYPE_CHECKING:
    from streamjoin.plan.physical import QueryPlan

LEFT, RIGHT = "sjl", "sjr"
BITS = "_sjq"
"""The shared join's column of query-set bits."""


@dataclass(frozen=True)
class SharedMember:
    """One query of a group: its bit, and its output columns as (shared column, its name)."""

    name: str
    bit: int
    columns: tuple[tuple[str, str], ...]

    @property
    def mask(self) -> str:
        """The bit as a BIGINT literal."""
        return _bit(self.bit)


@dataclass(frozen=True)
class SharedGroup:
    """Queries that run as one join: the join's plan and each member's share of its rows."""

    plan: QueryPlan
    members: tuple[SharedMember, ...]

    @property
    def name(self) -> str:
        """The shared join's name (its router's, in the manifest)."""
        return self.plan.query.name


def _bit(i: int) -> str:
    return "shiftleft(CAST(1 AS BIGINT), 63)" if i == 63 else f"{1 << i}L"


def _roles(sql: str, aliases: t.Mapping[str, str]) -> str:
    """`sql` with each side's alias replaced by the shared join's."""
    tree = sqlglot.parse_one(sql, dialect="spark")
    for col in tree.find_all(exp.Column):
        if col.table in aliases:
            col.set("table", exp.to_identifier(aliases[col.table]))
    return tree.sql(dialect="spark")


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
    aliases = {q.left.alias: LEFT, q.right.alias: RIGHT}
    equi = tuple(sorted(_roles(f"{k.left_sql} = {k.right_sql}", aliases) for k in qp.parts.equi))
    # (The keys as written either way round, to know them among the conjuncts.)
    keys = {*equi, *(_roles(f"{k.right_sql} = {k.left_sql}", aliases) for k in qp.parts.equi)}
    left: set[str] = set()
    right: set[str] = set()
    pair: list[str] = []
    for c in conjuncts(sqlglot.parse_one(q.predicate, dialect="spark")):
        text = _roles(conjunct_sql(c), aliases)
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
    return Candidate(q.name, key, span, split.left, split.right, streams)


def _bits(parts: list[tuple[int, t.Iterable[str]]]) -> str | None:
    """``CASE WHEN c THEN bit ELSE 0 END | ...`` over the members' conjuncts; None when every
    member's are empty (every bit always set)."""
    terms, always = [], True
    for i, conds in parts:
        conds = sorted(conds)
        if conds:
            always = False
            terms.append(f"CASE WHEN {' AND '.join(conds)} THEN {_bit(i)} ELSE 0L END")
        else:
            terms.append(_bit(i))
    return None if always else " | ".join(f"({term})" for term in terms)


def shared_query(members: t.Sequence[QueryPlan]) -> tuple[Query, tuple[SharedMember, ...]]:
    """The query whose plan runs `members` as one join, and each member's share of it."""
    first = members[0].query
    splits = [_split(qp) for qp in members]
    # The join hashes on the keys common to all; a member's other keys are its own conditions.
    common = set(splits[0].equi).intersection(*(s.equi for s in splits))
    splits = [
        _Split(s.equi, s.left, s.right, (*s.pair, *(k for k in s.equi if k not in common)))
        for s in splits
    ]
    conds = sorted(common)
    windows = [qp.parts.window for qp in members]
    if all(w is not None and w.lo_us is not None and w.hi_us is not None for w in windows):
        lo = min(t.cast("int", w.lo_us) for w in windows if w is not None)
        hi = max(t.cast("int", w.hi_us) for w in windows if w is not None)
        lt, rt = f"{LEFT}.{members[0].left_time}", f"{RIGHT}.{members[0].right_time}"
        conds.append(
            f"{rt} BETWEEN {lt} + INTERVAL '{lo}' MICROSECOND "
            f"AND {lt} + INTERVAL '{hi}' MICROSECOND"
        )
    sides = []
    for which in ("left", "right"):
        bits = _bits([(i, getattr(s, which)) for i, s in enumerate(splits)])
        if bits is not None:
            conds.append(f"({bits}) <> 0L")
        sides.append(bits or "-1L")
    pair = _bits([(i, s.pair) for i, s in enumerate(splits)]) or "-1L"
    every = f"({sides[0]}) & ({sides[1]}) & ({pair})"
    # (No `every <> 0` in the join: each member keeps the rows with its own bit anyway, and the
    # long CASE chains cost Spark's analysis and planning each time they appear.)
    columns: dict[str, str] = {}
    shares = []
    for i, qp in enumerate(members):
        q = qp.query
        aliases = {q.left.alias: LEFT, q.right.alias: RIGHT}
        own = []
        for item in q.select:
            text = _roles(item.sql, aliases)
            column = columns.setdefault(text, f"_sjc{len(columns)}")
            own.append((column, item.alias))
        shares.append(SharedMember(q.name, i, tuple(own)))
    select = [SelectItem(text, column) for text, column in columns.items()]
    select.append(SelectItem(every, BITS))
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
    return query, tuple(shares)
