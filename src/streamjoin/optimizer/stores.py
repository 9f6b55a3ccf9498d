"""Stores, partitionings, probe orders and steps: the vocabulary of the cost model and the ILP.

A *store* holds one relation (a base store) or one materialized intermediate result (an MIR
store: a connected sub-join of a query, CLASH §V). A *store label* is a store with the attribute
it is hash-partitioned on, written ``S[b]`` (or ``S⋈T(S.c = T.c)[T.d]`` for an MIR). A *probe
order* sends a new tuple of its start relation through a sequence of store labels; each prefix
of it is a *step*, and equal steps are computed once however many probe orders contain them
(§V: "all equal steps used in candidates of other queries get the same variable").

What makes two steps equal: the same start relation, the same store labels in the same order,
and the same join predicates among the relations involved. The paper keys steps by relation
names only; with predicates in the key, two queries that join R and S on different attributes
never share the R→S step, because their partial results differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamjoin.optimizer.problem import JoinPredicate


def canonical(
    predicates: tuple[JoinPredicate, ...] | list[JoinPredicate],
) -> tuple[JoinPredicate, ...]:
    """`predicates` in one fixed order, so equal sets give equal (and equally hashed) tuples."""
    return tuple(sorted(predicates, key=lambda p: p.identity))


def among(
    predicates: tuple[JoinPredicate, ...], relations: frozenset[str]
) -> tuple[JoinPredicate, ...]:
    """The predicates with both sides in `relations` (order kept)."""
    return tuple(p for p in predicates if p.left in relations and p.right in relations)


@dataclass(frozen=True)
class Column:
    """An attribute of one relation, ``relation.name``: the key a store is partitioned on."""

    relation: str
    name: str

    def __str__(self) -> str:
        return f"{self.relation}.{self.name}"


@dataclass(frozen=True)
class Store:
    """A base relation's store (one relation, no predicates) or an MIR store.

    Attributes:
        relations: the relations joined into the store, sorted.
        predicates: the join predicates among them (empty for a base store), in canonical order.
            Two MIRs over the same relations with different predicates are different stores.
    """

    relations: tuple[str, ...]
    predicates: tuple[JoinPredicate, ...] = ()
    members: frozenset[str] = field(init=False, repr=False, compare=False)
    """`relations` as a set."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", frozenset(self.relations))

    @classmethod
    def base(cls, relation: str) -> Store:
        """The store of one relation."""
        return cls((relation,))

    @classmethod
    def mir(cls, relations: frozenset[str], predicates: tuple[JoinPredicate, ...]) -> Store:
        """The MIR store of `relations` joined by those of `predicates` that lie among them."""
        return cls(tuple(sorted(relations)), canonical(list(among(predicates, relations))))

    @property
    def is_base(self) -> bool:
        """True for a base relation's store; MIR stores join two or more relations."""
        return len(self.relations) == 1

    @property
    def name(self) -> str:
        """``S`` for a base store; ``S⋈T(S.c = T.c)`` for an MIR store.

        An MIR's name carries its predicates: two queries may join the same relations
        differently, and those are two stores that must not be confused in a plan.
        """
        if self.is_base:
            return self.relations[0]
        return f"{'⋈'.join(self.relations)}({'; '.join(str(p) for p in self.predicates)})"


@dataclass(frozen=True)
class StoreLabel:
    """A store together with its partitioning attribute (None: round-robin, always broadcast)."""

    store: Store
    key: Column | None

    def __str__(self) -> str:
        if self.key is None:
            return f"{self.store.name}[*]"
        if self.store.is_base:
            return f"{self.store.name}[{self.key.name}]"
        return f"{self.store.name}[{self.key}]"


@dataclass(frozen=True)
class Step:
    """A probe-order prefix ``⟨start, t1, ..., tk⟩``: the step that sends the partial join of
    `start` and ``t1..t(k-1)`` to store ``tk`` (CLASH §V identifies steps with prefixes).

    Attributes:
        start: the relation whose new tuple starts the probe order.
        targets: the store labels probed so far; the last is this step's target (k >= 1).
        predicates: the join predicates among all relations of the prefix, canonical order.
    """

    start: str
    targets: tuple[StoreLabel, ...]
    predicates: tuple[JoinPredicate, ...]
    source: frozenset[str] = field(init=False, repr=False, compare=False)
    """The relations of the tuple sent in this step (the start and the earlier targets)."""
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = {self.start}
        for label in self.targets[:-1]:
            names.update(label.store.relations)
        object.__setattr__(self, "source", frozenset(names))
        # Steps are dictionary keys all over the ILP; hash their nested tuples once.
        object.__setattr__(self, "_hash", hash((self.start, self.targets, self.predicates)))

    @property
    def target(self) -> StoreLabel:
        """The store this step probes."""
        return self.targets[-1]

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return "⟨" + ", ".join([self.start, *(str(label) for label in self.targets)]) + "⟩"


@dataclass(frozen=True)
class ProbeOrder:
    """A complete probe order for one start relation, with every target's partitioning.

    Attributes:
        start: the relation whose new tuples follow this order.
        targets: the store labels probed, in order; together with `start` they cover the
            relations of the owner (a query, or the subquery that maintains an MIR) once each.
        predicates: all join predicates of the owner, canonical order.
    """

    start: str
    targets: tuple[StoreLabel, ...]
    predicates: tuple[JoinPredicate, ...]
    steps: tuple[Step, ...] = field(init=False, repr=False, compare=False)
    """Every prefix of the order, shortest first; the last is the whole order."""

    def __post_init__(self) -> None:
        out: list[Step] = []
        covered = {self.start}
        for i, label in enumerate(self.targets):
            covered.update(label.store.relations)
            preds = among(self.predicates, frozenset(covered))
            out.append(Step(self.start, self.targets[: i + 1], preds))
        object.__setattr__(self, "steps", tuple(out))

    @property
    def mirs(self) -> tuple[Store, ...]:
        """The MIR stores this order probes (each must then be maintained)."""
        return tuple(label.store for label in self.targets if not label.store.is_base)

    def __str__(self) -> str:
        return "⟨" + ", ".join([self.start, *(str(label) for label in self.targets)]) + "⟩"
