"""Candidate probe orders for every (query, start relation), over base and MIR stores (CLASH §V).

1. **MIRs.** The materializable intermediate results of a query are its connected sub-joins of
   two or more relations, short of the whole query ("such that cross products are avoided"):
   for ``R(a),S(a,b),T(b)`` they are R⋈S and S⋈T, not R⋈T.
2. **Probe orders (Alg. 1).** From the start relation, repeatedly append a store (base or MIR)
   that is disjoint from what is covered so far and joined to it by at least one predicate, until
   every relation of the query is covered. Covered relations are never revisited, so no MIR
   overlapping the head is appended, and no step is a cross product.
3. **Partitioning (``apply_partitioning``).** Each order is expanded into one variant per
   combination of partitioning attributes of its target stores. A base store's candidates are
   its relation's declared attributes. An MIR store's candidates are the attributes of its
   relations that join a relation outside the MIR, in any query that contains it (the union over
   queries: Fig. 3 offers ``T[d]`` to q1 although only q2 benefits).
4. **MIR maintenance.** An MIR store is kept up to date by the subquery over its relations:
   one probe order per input relation, chosen from that subquery's own candidates (which may use
   smaller MIRs in turn).

Example, the paper's Fig. 3 (q1 = R(b),S(b,c),T(c), q2 = S(c),T(c,d),U(d)), start R of q1:
``⟨R,S,T⟩`` × S∈{b,c} × T∈{c,d} and ``⟨R,S⋈T⟩`` × S⋈T∈{S.b,T.d}: six candidates.
"""

from __future__ import annotations

import itertools
import typing as t
from dataclasses import dataclass
from functools import cached_property

from streamjoin.optimizer.problem import connected
from streamjoin.optimizer.stores import Column, ProbeOrder, Store, StoreLabel, among, canonical

if t.TYPE_CHECKING:
    from streamjoin.optimizer.problem import JoinPredicate, Problem


@dataclass(frozen=True)
class ChoiceSet:
    """The alternatives for one (owner, start relation): exactly one is run.

    Attributes:
        owner: the query's name, or for MIR maintenance the MIR store's name.
        start: the start relation.
        orders: the decorated candidate probe orders.
        maintains: the MIR store this choice keeps up to date; None for a query's choice.
    """

    owner: str
    start: str
    orders: tuple[ProbeOrder, ...]
    maintains: Store | None = None

    @property
    def is_query(self) -> bool:
        """True for a query's (query, start) choice; False for MIR maintenance."""
        return self.maintains is None

    @property
    def name(self) -> str:
        """``owner/start``, e.g. ``q1/R`` or ``S⋈T(S.c = T.c)/S``."""
        return f"{self.owner}/{self.start}"


@dataclass(frozen=True)
class Candidates:
    """Every candidate the ILP chooses from.

    Attributes:
        problem: the input.
        choice_sets: the queries' choice sets first (problem order, then start order), then the
            maintenance choice sets of every MIR store some candidate probes.
        partitionings: each store with its candidate partitioning keys (None: none usable);
            the base stores of every relation first, then MIR stores.
        allow_mirs: False when MIR stores were left out (probe orders over base stores only).
    """

    problem: Problem
    choice_sets: tuple[ChoiceSet, ...]
    partitionings: tuple[tuple[Store, tuple[Column | None, ...]], ...]
    allow_mirs: bool = True

    @cached_property
    def keys(self) -> dict[Store, tuple[Column | None, ...]]:
        """Store → its candidate partitioning keys."""
        return dict(self.partitionings)

    @cached_property
    def maintenance(self) -> dict[Store, tuple[int, ...]]:
        """MIR store → indexes (into `choice_sets`) of its maintenance choice sets."""
        out: dict[Store, list[int]] = {}
        for i, choice in enumerate(self.choice_sets):
            if choice.maintains is not None:
                out.setdefault(choice.maintains, []).append(i)
        return {store: tuple(ids) for store, ids in out.items()}

    @property
    def query_sets(self) -> tuple[ChoiceSet, ...]:
        """The queries' choice sets (one per query and start relation)."""
        return tuple(c for c in self.choice_sets if c.is_query)

    @property
    def order_count(self) -> int:
        """How many decorated candidate probe orders there are in all."""
        return sum(len(c.orders) for c in self.choice_sets)


def _joined(a: frozenset[str], b: frozenset[str], predicates: tuple[JoinPredicate, ...]) -> bool:
    """True when some predicate has one side in `a` and the other in `b`."""
    return any((p.left in a and p.right in b) or (p.right in a and p.left in b) for p in predicates)


def mirs_of(
    relations: frozenset[str],
    predicates: tuple[JoinPredicate, ...],
    max_size: int | None = None,
) -> tuple[Store, ...]:
    """The MIR stores of a (sub)query: its connected sub-joins of 2 to n-1 relations (at most
    `max_size`)."""
    out = []
    names = sorted(relations)
    top = len(names) if max_size is None else min(len(names), max_size + 1)
    for size in range(2, top):
        for combo in itertools.combinations(names, size):
            members = frozenset(combo)
            if connected(members, among(predicates, members)):
                out.append(Store.mir(members, predicates))
    return tuple(out)


def probe_sequences(
    start: str,
    relations: frozenset[str],
    predicates: tuple[JoinPredicate, ...],
    mirs: tuple[Store, ...] = (),
) -> list[tuple[Store, ...]]:
    """Alg. 1: every sequence of stores a `start` tuple can probe to cover `relations`.

    Each appended store is disjoint from the covered relations and joined to them by a
    predicate, so no step is a cross product and no relation is visited twice.
    """
    units = [Store.base(name) for name in sorted(relations) if name != start]
    units += [m for m in mirs if start not in m.members]
    out: list[tuple[Store, ...]] = []

    def extend(head: frozenset[str], seq: tuple[Store, ...]) -> None:
        for unit in units:
            if unit.members & head or not _joined(head, unit.members, predicates):
                continue
            covered = head | unit.members
            if covered == relations:
                out.append((*seq, unit))
            else:
                extend(covered, (*seq, unit))

    extend(frozenset({start}), ())
    return out


def _mir_keys(problem: Problem, max_size: int | None) -> dict[Store, set[Column]]:
    """Each MIR store's candidate keys: attributes of its relations that join a relation
    outside it, over every query containing it (the paper's rule, unioned over queries)."""
    keys: dict[Store, set[Column]] = {}
    for query in problem.queries:
        preds = canonical(query.predicates)
        for mir in mirs_of(frozenset(query.relations), preds, max_size):
            found = keys.setdefault(mir, set())
            for p in preds:
                if not p.is_equality or (p.left in mir.members) == (p.right in mir.members):
                    continue
                side = p.left if p.left in mir.members else p.right
                attr = p.attr_of(side)
                if attr is not None:
                    found.add(Column(side, attr))
    return keys


def enumerate_candidates(
    problem: Problem, *, allow_mirs: bool = True, max_mir: int | None = None
) -> Candidates:
    """All candidate probe orders of `problem`, decorated with partitionings.

    Args:
        problem: the queries and statistics.
        allow_mirs: False plans over base stores only (the paper's §V-2 example does this).
        max_mir: the most relations an MIR store may join (None: any sub-join).
    """
    keys: dict[Store, tuple[Column | None, ...]] = {}
    for rel in problem.relations:
        cols = tuple(Column(rel.name, a) for a in rel.attributes)
        keys[Store.base(rel.name)] = cols or (None,)
    if allow_mirs:
        for mir, cols_set in _mir_keys(problem, max_mir).items():
            keys[mir] = tuple(sorted(cols_set, key=str)) or (None,)

    cache: dict[tuple[str, frozenset[str], tuple[JoinPredicate, ...]], tuple[ProbeOrder, ...]] = {}

    def decorated(
        start: str, members: frozenset[str], preds: tuple[JoinPredicate, ...]
    ) -> tuple[ProbeOrder, ...]:
        memo = (start, members, preds)
        if memo not in cache:
            mirs = mirs_of(members, preds, max_mir) if allow_mirs else ()
            orders = []
            for seq in probe_sequences(start, members, preds, mirs):
                for combo in itertools.product(*(keys[store] for store in seq)):
                    labels = tuple(StoreLabel(s, k) for s, k in zip(seq, combo, strict=True))
                    orders.append(ProbeOrder(start, labels, preds))
            cache[memo] = tuple(orders)
        return cache[memo]

    sets: list[ChoiceSet] = []
    for query in problem.queries:
        preds = canonical(query.predicates)
        members = frozenset(query.relations)
        sets.extend(
            ChoiceSet(query.name, start, decorated(start, members, preds))
            for start in query.relations
        )

    # Maintenance of every MIR store some candidate probes, and of the smaller MIRs the
    # maintenance orders probe in turn (breadth first, in order of discovery).
    pending: list[Store] = []
    known: set[Store] = set()
    cursor = 0
    while True:
        for choice in sets[cursor:]:
            for order in choice.orders:
                for mir in order.mirs:
                    if mir not in known:
                        known.add(mir)
                        pending.append(mir)
        cursor = len(sets)
        if not pending:
            break
        for mir in pending:
            sets.extend(
                ChoiceSet(mir.name, start, decorated(start, mir.members, mir.predicates), mir)
                for start in mir.relations
            )
        pending = []

    used = [(store, k) for store, k in keys.items() if store.is_base or store in known]
    return Candidates(problem, tuple(sets), tuple(used), allow_mirs)
