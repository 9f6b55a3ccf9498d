"""The optimizer's input: streams, join predicates, queries and the parallelism of the stores.

CLASH (Dossinger & Michel, §III–V) plans many multi-way window joins at once from a few numbers:
the arrival rate of every stream, the selectivity of every join predicate, and the parallelism of
the stores (how many units a probe is sent to when it must be broadcast). These are the types
the optimizer reads; the runtime converts its SQL model into them.

Units. ``rate`` is tuples per time unit (per batch or per second: pick one and keep to it).
``selectivity`` is the number of join results per time unit divided by the product of the two
rates, so it absorbs the window length: rates 100 and 100 with 150 results per time unit give a
selectivity of 0.015 (the paper's §V-2 example). Every cost the optimizer reports is then in
tuples sent per time unit.

Example:
    >>> r = Relation("R", 100.0, ("a",))
    >>> s = Relation("S", 100.0, ("a", "b"))
    >>> q = Query.of("q1", JoinPredicate("S", "R", "a", "a", 0.01))
    >>> q.relations, str(q.predicates[0])
    (('R', 'S'), 'R.a = S.a')
    >>> Problem((r, s), (q,), parallelism=4).relation("S").rate
    100.0
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass
from functools import cached_property

from streamjoin.errors import StreamJoinError

if t.TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


class OptimizerError(StreamJoinError):
    """An optimizer input that cannot be planned, or a plan that contradicts its input.

    The message names the offending value (the relation, predicate, query or number).
    """


def _check_name(kind: str, name: object) -> None:
    if not isinstance(name, str) or not name or name != name.strip():
        msg = f"a {kind} needs a non-empty name without surrounding blanks, got {name!r}"
        raise OptimizerError(msg)


def _check_positive(what: str, value: object) -> float:
    # bool is an int; True as a rate is a mistake, not 1.0.
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{what} must be a number, got {value!r}"
        raise OptimizerError(msg)
    number = float(value)
    if not math.isfinite(number) or number <= 0.0:
        # Zero is refused too: a zero-cost step would not be forced on by the paper's
        # aggregated cost-linking row, so the ILP could leave out a step the plan needs.
        msg = f"{what} must be a finite number > 0, got {value!r}"
        raise OptimizerError(msg)
    return number


@dataclass(frozen=True)
class Relation:
    """A stream, stored once in the cluster as a base store.

    Attributes:
        name: the stream's name, unique in the problem.
        rate: arrival rate in tuples per time unit (> 0).
        attributes: the attributes its store may be hash-partitioned on (the paper takes every
            join attribute of the relation, over all queries). Every attribute an equality
            predicate uses on this relation must be listed. Empty means the store cannot be
            hash-partitioned usefully: it is spread round-robin and every probe is broadcast.
    """

    name: str
    rate: float
    attributes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_name("relation", self.name)
        object.__setattr__(self, "rate", _check_positive(f"the rate of {self.name}", self.rate))
        object.__setattr__(self, "attributes", tuple(self.attributes))
        for attr in self.attributes:
            _check_name(f"attribute of {self.name}", attr)
        if len(set(self.attributes)) != len(self.attributes):
            msg = f"relation {self.name} lists an attribute twice: {self.attributes!r}"
            raise OptimizerError(msg)


@dataclass(frozen=True)
class JoinPredicate:
    """A join predicate between two relations: ``left.left_attr = right.right_attr``, or a theta
    predicate (both attributes None) that no partitioning can route by.

    The two sides are stored in name order (``left < right``), so the same predicate written
    either way round compares equal.

    Attributes:
        left: one relation.
        right: the other relation (a self-join is not modelled: use two relations).
        left_attr: the attribute of `left` for an equality predicate, else None.
        right_attr: the attribute of `right` for an equality predicate, else None.
        selectivity: results per time unit over the product of the two rates (> 0).
        label: free text telling apart predicates over the same attributes (the SQL of a theta
            or band predicate, say). Predicates with different labels are different joins: no
            step or store is shared between them.
    """

    left: str
    right: str
    left_attr: str | None
    right_attr: str | None
    selectivity: float
    label: str = ""

    def __post_init__(self) -> None:
        _check_name("predicate side", self.left)
        _check_name("predicate side", self.right)
        if self.left == self.right:
            msg = f"a predicate joins two different relations, got {self.left} with itself"
            raise OptimizerError(msg)
        if (self.left_attr is None) != (self.right_attr is None):
            msg = (
                f"predicate {self.left}.{self.left_attr} = {self.right}.{self.right_attr}: an "
                "equality names an attribute on both sides, a theta predicate on neither"
            )
            raise OptimizerError(msg)
        for attr in (self.left_attr, self.right_attr):
            if attr is not None:
                _check_name("predicate attribute", attr)
        sel = _check_positive(f"the selectivity of {self}", self.selectivity)
        object.__setattr__(self, "selectivity", sel)
        if self.left > self.right:
            left, left_attr = self.left, self.left_attr
            object.__setattr__(self, "left", self.right)
            object.__setattr__(self, "left_attr", self.right_attr)
            object.__setattr__(self, "right", left)
            object.__setattr__(self, "right_attr", left_attr)

    @property
    def is_equality(self) -> bool:
        """True for ``left.a = right.b``: a probe carrying one side can be routed by it."""
        return self.left_attr is not None

    @property
    def identity(self) -> tuple[str, str, str, str, str]:
        """What makes two predicates the same join (everything but the statistic)."""
        return (self.left, self.right, self.left_attr or "", self.right_attr or "", self.label)

    def touches(self, relation: str) -> bool:
        """True when `relation` is one of the two sides."""
        return relation in (self.left, self.right)

    def other(self, relation: str) -> str:
        """The side that is not `relation`."""
        return self.right if relation == self.left else self.left

    def attr_of(self, relation: str) -> str | None:
        """The attribute this predicate reads on `relation` (None for a theta predicate)."""
        return self.left_attr if relation == self.left else self.right_attr

    def __str__(self) -> str:
        if self.is_equality:
            text = f"{self.left}.{self.left_attr} = {self.right}.{self.right_attr}"
        else:
            text = f"{self.left} θ {self.right}"
        return f"{text} [{self.label}]" if self.label else text


def connected(relations: Iterable[str], predicates: Iterable[JoinPredicate]) -> bool:
    """True when `predicates` join every one of `relations` to the others."""
    names = list(relations)
    if not names:
        return True
    edges = list(predicates)
    seen, todo = {names[0]}, [names[0]]
    while todo:
        here = todo.pop()
        for pred in edges:
            if pred.touches(here) and pred.other(here) not in seen:
                seen.add(pred.other(here))
                todo.append(pred.other(here))
    return seen >= set(names)


@dataclass(frozen=True)
class Query:
    """A multi-way join: relations connected by predicates (a chain, a star, a cycle, ...).

    Attributes:
        name: unique in the problem.
        relations: the relations joined, each once; their order is the order in which the
            plan lists the query's starting relations.
        predicates: the join predicates; together they connect every relation (CLASH plans no
            cross products, §V). Several predicates between one pair are a conjunction.
    """

    name: str
    relations: tuple[str, ...]
    predicates: tuple[JoinPredicate, ...]

    def __post_init__(self) -> None:
        _check_name("query", self.name)
        object.__setattr__(self, "relations", tuple(self.relations))
        object.__setattr__(self, "predicates", tuple(self.predicates))
        if len(self.relations) < 2:
            msg = f"query {self.name} joins at least two relations, got {self.relations!r}"
            raise OptimizerError(msg)
        if len(set(self.relations)) != len(self.relations):
            msg = f"query {self.name} names a relation twice: {self.relations!r}"
            raise OptimizerError(msg)
        seen: set[tuple[str, str, str, str, str]] = set()
        for pred in self.predicates:
            if not isinstance(pred, JoinPredicate):
                msg = f"query {self.name}: {pred!r} is not a JoinPredicate"
                raise OptimizerError(msg)
            for side in (pred.left, pred.right):
                if side not in self.relations:
                    msg = f"query {self.name}: predicate {pred} uses {side}, not in the query"
                    raise OptimizerError(msg)
            if pred.identity in seen:
                msg = f"query {self.name} lists predicate {pred} twice"
                raise OptimizerError(msg)
            seen.add(pred.identity)
        if not connected(self.relations, self.predicates):
            msg = (
                f"query {self.name} is a cross product: its predicates do not connect "
                f"{', '.join(self.relations)}"
            )
            raise OptimizerError(msg)

    @classmethod
    def of(cls, name: str, *predicates: JoinPredicate) -> Query:
        """The query over exactly the relations its predicates touch (in first-seen order)."""
        relations: dict[str, None] = {}
        for pred in predicates:
            relations.setdefault(pred.left)
            relations.setdefault(pred.right)
        return cls(name, tuple(relations), predicates)


@dataclass(frozen=True)
class Problem:
    """Everything the optimizer plans from.

    Attributes:
        relations: every stream a query reads, each once.
        queries: the queries to plan together, at least one; names unique.
        parallelism: units per store (>= 1). A probe that does not carry the partitioning
            attribute of the store it probes goes to all of them (the paper's χ).
    """

    relations: tuple[Relation, ...]
    queries: tuple[Query, ...]
    parallelism: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "relations", tuple(self.relations))
        object.__setattr__(self, "queries", tuple(self.queries))
        if isinstance(self.parallelism, bool) or not isinstance(self.parallelism, int):
            msg = f"parallelism must be an int >= 1, got {self.parallelism!r}"
            raise OptimizerError(msg)
        if self.parallelism < 1:
            msg = f"parallelism must be >= 1, got {self.parallelism}"
            raise OptimizerError(msg)
        by_name: dict[str, Relation] = {}
        for rel in self.relations:
            if rel.name in by_name:
                msg = f"relation {rel.name} is declared twice"
                raise OptimizerError(msg)
            by_name[rel.name] = rel
        if not self.queries:
            msg = "a problem needs at least one query"
            raise OptimizerError(msg)
        names: set[str] = set()
        statistic: dict[tuple[str, str, str, str, str], tuple[float, str]] = {}
        for query in self.queries:
            if query.name in names:
                msg = f"query name {query.name} is used twice"
                raise OptimizerError(msg)
            names.add(query.name)
            for name in query.relations:
                if name not in by_name:
                    msg = f"query {query.name} reads {name}, which is not a declared relation"
                    raise OptimizerError(msg)
            for pred in query.predicates:
                for side in (pred.left, pred.right):
                    attr = pred.attr_of(side)
                    if attr is not None and attr not in by_name[side].attributes:
                        msg = (
                            f"query {query.name}: predicate {pred} uses {side}.{attr}, but "
                            f"{side} declares only {by_name[side].attributes!r}"
                        )
                        raise OptimizerError(msg)
                # The same join over the same data has one selectivity; two would make the
                # optimizer share a step between queries whose costs disagree.
                known = statistic.setdefault(pred.identity, (pred.selectivity, query.name))
                if known[0] != pred.selectivity:
                    msg = (
                        f"predicate {pred} has selectivity {known[0]} in query {known[1]} "
                        f"but {pred.selectivity} in query {query.name}"
                    )
                    raise OptimizerError(msg)

    @cached_property
    def _by_name(self) -> dict[str, Relation]:
        return {rel.name: rel for rel in self.relations}

    def relation(self, name: str) -> Relation:
        """The relation called `name` (OptimizerError if there is none)."""
        try:
            return self._by_name[name]
        except KeyError:
            msg = f"no relation called {name!r}"
            raise OptimizerError(msg) from None

    def query(self, name: str) -> Query:
        """The query called `name` (OptimizerError if there is none)."""
        for query in self.queries:
            if query.name == name:
                return query
        msg = f"no query called {name!r}"
        raise OptimizerError(msg)

    def to_dict(self) -> dict[str, t.Any]:
        """A JSON-able form (golden files, the CLI); `from_dict` reads it back."""
        return {
            "parallelism": self.parallelism,
            "relations": [
                {"name": r.name, "rate": r.rate, "attributes": list(r.attributes)}
                for r in self.relations
            ],
            "queries": [
                {
                    "name": q.name,
                    "relations": list(q.relations),
                    "predicates": [
                        {
                            "left": p.left,
                            "right": p.right,
                            "left_attr": p.left_attr,
                            "right_attr": p.right_attr,
                            "selectivity": p.selectivity,
                            **({"label": p.label} if p.label else {}),
                        }
                        for p in q.predicates
                    ],
                }
                for q in self.queries
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, t.Any]) -> Problem:
        """Read `to_dict`'s form back; a missing or mistyped field is an OptimizerError."""
        try:
            relations = tuple(
                Relation(r["name"], r["rate"], tuple(r.get("attributes", ())))
                for r in data["relations"]
            )
            queries = tuple(
                Query(
                    q["name"],
                    tuple(q["relations"]),
                    tuple(
                        JoinPredicate(
                            p["left"],
                            p["right"],
                            p.get("left_attr"),
                            p.get("right_attr"),
                            p["selectivity"],
                            p.get("label", ""),
                        )
                        for p in q["predicates"]
                    ),
                )
                for q in data["queries"]
            )
            return cls(relations, queries, data["parallelism"])
        except (KeyError, TypeError) as err:
            msg = f"not a problem description: missing or mistyped field {err}"
            raise OptimizerError(msg) from None
