"""A multi-way join as the join operator runs it: a chain of two-way joins, each level's
left side the MIR store of the inputs joined so far (CLASH's materialised intermediate result),
its right side one more input.

Level n joins the rows of inputs ``order[0..n]`` (its left side) with input ``order[n + 1]``
on the conjuncts that name that input and only inputs before it. Each level is a two-way
index: a batch's new left rows (the level before's new combinations, or the first input's new
rows) meet its old and new right rows, its new right rows meet its old left rows: the delta
rule of a two-way join, applied level by level, gives each new combination of the whole query
once: each level finds each of its new combinations once, and the next level takes each as one
new left row. Stored in a
level, the left side's rows are the MIR: a new row of input ``order[n + 1]`` finds every
combination of the inputs before it in one lookup.

How long a level keeps a row: a combination of stored rows can be in a new result only if
each of its rows can (`plan.multiway`'s retention); so a row of a level is dead once any of its
inputs' rows is, that is once ``min_i(ts_i + retain_i) < W``. Each level's row carries that
sum as its time, and a level expires the rows below the watermark.

The order is the probe order of the first input (the optimizer's or the greedy one): each
input joins on a condition with the inputs before it where the query allows.
"""

from __future__ import annotations

import hashlib
import typing as t
from dataclasses import dataclass

from streamjoin.plan.multiway import pair_parts, renamed_sql

if t.TYPE_CHECKING:
    from streamjoin.model import Job
    from streamjoin.plan.multiway import MultiwayPlan


@dataclass(frozen=True)
class Level:
    """One two-way join of a chain: the inputs joined so far (left) with one more (right)."""

    inputs: tuple[int, ...]
    """The left side's inputs, by position in the query, in chain order."""
    new: int
    """The right side's input."""
    keys: tuple[tuple[str, str], ...]
    """The equalities that find its pairs: (SQL over the left's columns, over the right's),
    over the unique column names; none: every row under one key (a nested loop)."""
    conditions: tuple[str, ...]
    """The conjuncts its pairs must meet (the keys among them), over the unique names."""
    key: str
    """What the level's index is kept by: the query's name and a digest of what it joins."""


@dataclass(frozen=True)
class Chain:
    """A multi-way query's levels and what filters its inputs before they enter them."""

    levels: tuple[Level, ...]
    filters: tuple[tuple[str, ...], ...]
    """Per input (by position): its selections, over the unique names."""
    order: tuple[int, ...]


def directions(chain: Chain, aliases: t.Sequence[str]) -> tuple[tuple[str, str], ...]:
    """Per level, the names of the rows that probe from its left side and from its right
    (JAQPOT's half-way joins): the first level's both sides are inputs, by alias; a later
    level's left rows are the combinations of the inputs before it (``a+b``), its right an
    input's."""
    return tuple(
        ("+".join(aliases[i] for i in level.inputs), aliases[level.new]) for level in chain.levels
    )


def routes(chain: Chain, aliases: t.Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Per input (by alias), the combinations its rows' pairs go on to probe as, level by
    level up the chain (JAQPOT's input path after its first hop)."""
    names = directions(chain, aliases)
    out = {names[0][0]: tuple(left for left, _ in names[1:])}
    for n, (_, right) in enumerate(names):
        out[right] = tuple(left for left, _ in names[n + 1 :])
    return out


def chain_order(mp: MultiwayPlan) -> tuple[int, ...]:
    """The inputs in the order the chain joins them: the probe order of the first input. A
    step into an MIR joins first the input its method reaches from the rows so far, then the
    MIR's others (by ascending position, a level may have no conjunct with those before it)."""
    order = [mp.orders[0].start]
    for step in mp.orders[0].steps:
        others = () if step.mir is None else step.mir.inputs
        for i in (step.input, *others):
            if i not in order:
                order.append(i)
    return tuple(order)


def chain_choices(job: Job, mp: MultiwayPlan) -> bool:
    """Whether `mp`'s chain may take another order: its first input has more than one probe
    order that joins each next input to those before it (CLASH's candidates). Where none
    has, the optimizer's measures cannot change the chain."""
    joined = set(pair_parts(job, mp.query))
    n = len(mp.query.sides)

    def orders(covered: frozenset[int]) -> int:
        if len(covered) == n:
            return 1
        nexts = [
            j
            for j in range(n)
            if j not in covered and any((min(i, j), max(i, j)) in joined for i in covered)
        ]
        return sum(orders(covered | {j}) for j in nexts)

    return orders(frozenset({0})) > 1


def plan_chain(job: Job, mp: MultiwayPlan) -> Chain:
    """The chain of two-way joins that runs `mp`."""
    q = mp.query
    order = chain_order(mp)
    pairs = pair_parts(job, q)
    filters: list[list[str]] = [[] for _ in q.sides]
    constants: list[str] = []
    for c in mp.conjuncts:
        if len(c.inputs) == 1:
            filters[next(iter(c.inputs))].append(renamed_sql(q, c.sql))
        elif not c.inputs:
            constants.append(renamed_sql(q, c.sql))
    levels = []
    for n in range(1, len(order)):
        new, bound = order[n], order[:n]
        conditions = [
            renamed_sql(q, c.sql)
            for c in mp.conjuncts
            if new in c.inputs and len(c.inputs) > 1 and c.inputs <= {*bound, new}
        ]
        if n in (1, len(order) - 1):
            # (First, to keep no row a false one forbids; last, because one may depend on the
            # batch's time, `current_timestamp()`, which the stored combinations met earlier.)
            conditions += constants
        keys = []
        for i in bound:
            parts = pairs.get((min(i, new), max(i, new)))
            for k in parts.equi if parts is not None else ():
                ends = (k.left_sql, k.right_sql) if i < new else (k.right_sql, k.left_sql)
                keys.append((renamed_sql(q, ends[0]), renamed_sql(q, ends[1])))
        what = repr((mp.slots, order[: n + 1], conditions, keys, filters, mp.retain_us))
        digest = hashlib.sha256(f"{q!r}|{what}".encode()).hexdigest()[:12]
        key = f"{q.name}#{digest}-{n}"
        levels.append(Level(bound, new, tuple(keys), tuple(conditions), key))
    return Chain(tuple(levels), tuple(tuple(f) for f in filters), order)
