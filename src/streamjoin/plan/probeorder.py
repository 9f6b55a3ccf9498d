"""Probe orders of a multi-way join: the stores a new input's rows probe, one step at a time,
and how each step finds its candidates (`plan.multiway` has the delta rule they execute).

A step finds its candidates by hash (an equality conjunct with an input already bound), by band
buckets (a value band or an event-time window with one), or by a nested loop; the greedy order
takes hash-connected inputs first, then band-connected, and a cross product only when nothing
else is left. Inside a multi-way join every column goes by a unique name (`column_name`).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from streamjoin.plan.parts import Band

if t.TYPE_CHECKING:
    from streamjoin.plan.parts import PredicateParts

Method = t.Literal["hash", "band", "nested-loop"]
"""How one probe step finds its candidates."""

Target = int | tuple[int, ...]
"""A store a probe order visits: one input (its position), or the MIR of several inputs (their
positions, ascending): the join of their streams on the conjuncts among them, so that one step
binds them all (the operator's chain keeps it as a level, `plan.chain`; the cached slices probe
its inputs one at a time, `runtime.multiway.terms.unfolded`)."""


def flat(sequence: t.Sequence[Target]) -> tuple[int, ...]:
    """The input positions a probe sequence visits, in order."""
    return tuple(i for x in sequence for i in ((x,) if isinstance(x, int) else x))


def column_name(slot: str, column: str) -> str:
    """The name of `column` of the input in `slot` inside a multi-way join (see `slots`)."""
    return f"_sj_{slot}_{column}"


@dataclass(frozen=True, slots=True)
class Conjunct:
    """One top-level conjunct of the predicate and the inputs (positions) it names."""

    sql: str
    inputs: frozenset[int]


@dataclass(frozen=True, slots=True)
class Mir:
    """The MIR of some inputs of a query: their streams' join on the conjuncts among them."""

    inputs: tuple[int, ...]
    """The inputs' positions in the query, ascending."""


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
    """The MIR the step probes (binding every input of it), or None: input `input`'s own
    store."""


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


def method_into(new: int, bound: set[int], pairs: dict[tuple[int, int], PredicateParts]) -> Method:
    """How a step finds input `new`'s candidates once the inputs in `bound` are joined: by hash
    if an equality conjunct links them, by band buckets if a band or a closed window does, else
    by a nested loop."""
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


def greedy_order(
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
            return (0 if connected else 1, rank[method_into(n, bound, pairs)], n)

        nxt = min((n for n in range(k) if n not in bound), key=score)
        order.append(nxt)
        bound.add(nxt)
    return tuple(order)


def probe_order(
    start: int,
    sequence: tuple[Target, ...],
    conjuncts: t.Sequence[Conjunct],
    pairs: dict[tuple[int, int], PredicateParts],
    aliases: list[str],
    times: tuple[str | None, ...],
    naming: dict[str, str],
) -> ProbeOrder:
    """Term `start` of the delta rule visiting the stores of `sequence` in order: each step's
    conditions are the conjuncts it makes checkable, over the unique column names."""
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
        mir = Mir(group) if len(group) > 1 else None
        # An MIR holds its inputs' join, not their selections: those are checked here.
        inside = [c for c in conjuncts if len(c.inputs) > 1 and c.inputs <= set(group)]
        conditions = tuple(
            rename(c.sql, naming)
            for c in conjuncts
            if c.inputs <= now and not c.inputs <= bound and (mir is None or c not in inside)
        )
        # The best way into any of the group's inputs finds the candidates.
        new = min(group, key=lambda n: (rank[method_into(n, bound, pairs)], n))
        method = method_into(new, bound, pairs)
        band = step_band(new, bound, pairs, aliases, times, naming) if method == "band" else None
        steps.append(Step(new, method, conditions, band, mir))
        bound = now
    return ProbeOrder(start, filters, tuple(steps))


def step_band(
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
