"""The CLASH ILP (§V, Alg. 2) as plain data: columns, rows and the objective; no solver here.

Columns, all binary:

- ``x[σ]`` per decorated candidate probe order σ of every choice set (a query's (query, start)
  or an MIR's maintenance (MIR, start)): 1 when σ is installed;
- ``y[ρ]`` per distinct step ρ (probe-order prefix). Equal prefixes, in any query or in MIR
  maintenance, are one column, so a shared step is paid once;
- ``z[S, a]`` per store S and candidate partitioning attribute a: 1 when S is partitioned on a.

Rows of the **paper** formulation (``form="paper"``):

1. **choice** (Eq. 2): ``Σ x[σ] = 1`` over the candidates of each (query, start). For an MIR's
   maintenance (MIR, start) the row is ``Σ x[σ'] <= 1``: maintenance is run only when needed
   (the paper leaves open whether MIR subqueries get an "= 1" row; with one, every MIR would
   always be maintained).
2. **cost** (Eq. 3, ``cost_constraint``): ``-PCost(σ)·x[σ] + Σ_{ρ∈σ} StepCost(ρ)·y[ρ] >= 0``.
   All step costs are > 0 (the problem refuses zero rates and selectivities), so choosing σ
   forces every one of its steps on.
3. **mir** (``probe_order_constraint``): for each σ probing an MIR store M and each input
   relation j of M: ``-k_j·x[σ] + Σ x[σ'] >= 0`` over M's maintenance candidates from j. The
   paper defines k_j as "the number of probe orders required for computing the result starting
   from relation j", which is one; its Fig. 3 prints 2, which read literally would force two
   maintenance orders from the same relation, so we take k_j = 1. The maintenance candidates
   do not depend on how M itself is partitioned, so M[b] and M[d] share them, as in Fig. 3.
4. **one_partitioning**, which the paper leaves implicit (§IV-A: "each store is only
   partitioned according to one attribute"): ``Σ_a z[S, a] = 1`` for a base store (always
   materialized) and ``<= 1`` for an MIR store; and **partition_link** per σ:
   ``-k·x[σ] + Σ_{S[a] probed by σ} z[S, a] >= 0`` with k the number of stores σ probes. Without
   these rows the ILP could store a relation twice, once per partitioning, at no cost.

Objective: ``min Σ_ρ StepCost(ρ)·y[ρ]`` (probe load, tuples sent per time unit).

The **tight** formulation (``form="tight"``, the default) is the same ILP with each aggregated
row split by choice set. Because a choice set runs at most one candidate, the candidates of one
set can share a row: ``Σ_{σ∈C, ρ∈σ} x[σ] <= y[ρ]`` (cost linking), ``Σ_{σ∈C, σ probes S[a]} x[σ]
<= z[S, a]`` (partitioning) and ``Σ_{σ∈C, σ probes M} x[σ] <= Σ x[σ']`` (MIR maintenance, per
input of M). And a step that the candidates of only one choice set contain needs no ``y`` at
all: at most one of them runs, so its cost goes straight onto their ``x``. The integer solutions
are the same as the paper's (so is the optimum, which the tests check against brute force), but
the LP relaxation is far tighter: the paper's aggregated cost row lets a fractional ``x`` pay
for one dear step and skip the rest, and HiGHS then has to branch. On 100 three-relation TPC-H
queries the paper form needs seconds, the tight form a small fraction of one
(``benchmarks/ilp_scaling.py``).
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass
from functools import cached_property

from streamjoin.optimizer.cost import step_cost
from streamjoin.optimizer.problem import OptimizerError

if t.TYPE_CHECKING:
    from streamjoin.optimizer.candidates import Candidates
    from streamjoin.optimizer.stores import Column, Step, Store

RowKind = t.Literal["choice", "maintenance", "cost", "mir", "one_partitioning", "partition_link"]
"""The family a row belongs to (see the module docstring, rows 1 to 4)."""

Formulation = t.Literal["paper", "tight"]
"""``paper``: the rows as the paper prints them, one per candidate. ``tight``: the same ILP with
the rows split per choice set and private steps folded into ``x`` (the module docstring)."""


@dataclass(frozen=True)
class Row:
    """One linear constraint ``lower <= Σ coefs·columns <= upper``."""

    kind: RowKind
    name: str
    columns: tuple[int, ...]
    coefs: tuple[float, ...]
    lower: float
    upper: float


@dataclass(frozen=True)
class IlpModel:
    """The formulated ILP.

    Columns are numbered: first every ``x`` (choice set by choice set, candidate by candidate),
    then every ``y`` (`steps`), then every ``z`` (`partitions`).

    Attributes:
        candidates: what the columns choose between.
        form: which formulation the rows follow.
        order_costs: the objective's coefficient of each ``x`` (zero in the paper form; in the
            tight form the cost of the candidate's steps that have no ``y``).
        steps: the steps that have a ``y`` column (every step in the paper form; in the tight
            form those that candidates of two or more choice sets contain).
        step_costs: StepCost of each step of `steps` (the coefficients of ``y``).
        partitions: (store, key) of each ``z`` column.
        rows: every constraint.
    """

    candidates: Candidates
    form: Formulation
    order_costs: tuple[float, ...]
    steps: tuple[Step, ...]
    step_costs: tuple[float, ...]
    partitions: tuple[tuple[Store, Column | None], ...]
    rows: tuple[Row, ...]

    @cached_property
    def order_offsets(self) -> tuple[int, ...]:
        """Column of the first candidate of each choice set (``x`` of candidate k of set i is
        ``order_offsets[i] + k``)."""
        out, at = [], 0
        for choice in self.candidates.choice_sets:
            out.append(at)
            at += len(choice.orders)
        return tuple(out)

    @property
    def n_orders(self) -> int:
        """How many ``x`` columns."""
        return self.candidates.order_count

    @property
    def n_columns(self) -> int:
        """How many columns (variables) in all."""
        return self.n_orders + len(self.steps) + len(self.partitions)

    @property
    def n_nonzeros(self) -> int:
        """How many nonzero coefficients the constraint matrix has."""
        return sum(len(row.columns) for row in self.rows)

    @property
    def objective(self) -> tuple[float, ...]:
        """The cost of every column: `order_costs` on ``x``, StepCost on ``y``, zero on ``z``."""
        return self.order_costs + self.step_costs + (0.0,) * len(self.partitions)

    @cached_property
    def step_column(self) -> dict[Step, int]:
        """Step → its ``y`` column."""
        return {step: self.n_orders + i for i, step in enumerate(self.steps)}

    @cached_property
    def partition_column(self) -> dict[tuple[Store, Column | None], int]:
        """(store, key) → its ``z`` column."""
        base = self.n_orders + len(self.steps)
        return {pair: base + i for i, pair in enumerate(self.partitions)}

    def column_name(self, col: int) -> str:
        """A readable name: ``x[q1/R ⟨R, S[a]⟩]``, ``y[⟨R, S[a]⟩]`` or ``z[S[a]]``."""
        if col < self.n_orders:
            for i in range(len(self.order_offsets) - 1, -1, -1):
                if self.order_offsets[i] <= col:
                    choice = self.candidates.choice_sets[i]
                    return f"x[{choice.name} {choice.orders[col - self.order_offsets[i]]}]"
        if col < self.n_orders + len(self.steps):
            return f"y[{self.steps[col - self.n_orders]}]"
        store, key = self.partitions[col - self.n_orders - len(self.steps)]
        return f"z[{store.name}[{'*' if key is None else key}]]"

    def to_text(self) -> str:
        """The model as readable text, one row a line (for debugging and ``explain``)."""
        lines = [f"minimize ({self.form} form)"]
        lines += [f"  {c:g} {self.column_name(i)}" for i, c in enumerate(self.objective) if c]
        lines.append("subject to")
        for row in self.rows:
            terms = " + ".join(
                f"{v:g} {self.column_name(c)}" for c, v in zip(row.columns, row.coefs, strict=True)
            )
            if row.lower == row.upper:
                bound = f"= {row.lower:g}"
            elif math.isinf(row.upper):
                bound = f">= {row.lower:g}"
            else:
                bound = f"<= {row.upper:g}"
            lines.append(f"  {row.name}: {terms} {bound}")
        return "\n".join(lines)


def _offsets(candidates: Candidates) -> list[int]:
    out, at = [], 0
    for choice in candidates.choice_sets:
        out.append(at)
        at += len(choice.orders)
    return out


def build_ilp(candidates: Candidates, form: Formulation = "tight") -> IlpModel:
    """Formulate the ILP for `candidates` (Alg. 2 plus the one-partitioning rows).

    Args:
        candidates: the candidate probe orders.
        form: ``"tight"`` (default) or ``"paper"``; both have the same optimum (module docstring).
    """
    if form == "paper":
        return _paper(candidates)
    if form == "tight":
        return _tight(candidates)
    msg = f"unknown ILP formulation {form!r}; expected 'paper' or 'tight'"
    raise OptimizerError(msg)


def _choice_rows(candidates: Candidates, offsets: list[int]) -> list[Row]:
    rows = []
    for i, choice in enumerate(candidates.choice_sets):
        cols = tuple(range(offsets[i], offsets[i] + len(choice.orders)))
        ones = (1.0,) * len(cols)
        if choice.is_query:
            rows.append(Row("choice", f"choice {choice.name}", cols, ones, 1, 1))
        else:
            rows.append(Row("maintenance", f"maintain {choice.name}", cols, ones, 0, 1))
    return rows


def _partition_rows(
    candidates: Candidates, z_col: dict[tuple[Store, Column | None], int]
) -> list[Row]:
    rows = []
    for store, keys in candidates.partitionings:
        cols = tuple(z_col[(store, key)] for key in keys)
        lower = 1.0 if store.is_base else 0.0
        rows.append(
            Row("one_partitioning", f"one key {store.name}", cols, (1.0,) * len(cols), lower, 1)
        )
    return rows


def _paper(candidates: Candidates) -> IlpModel:
    problem = candidates.problem
    sets = candidates.choice_sets
    n_orders = candidates.order_count

    # y columns: distinct steps in order of first appearance (deterministic column order).
    step_ids: dict[Step, int] = {}
    for choice in sets:
        for order in choice.orders:
            for step in order.steps:
                if step not in step_ids:
                    step_ids[step] = len(step_ids)
    steps = tuple(step_ids)
    costs = tuple(step_cost(problem, step) for step in steps)

    partitions = tuple((store, key) for store, keys in candidates.partitionings for key in keys)
    z_base = n_orders + len(steps)
    z_col = {pair: z_base + i for i, pair in enumerate(partitions)}
    offsets = _offsets(candidates)
    maintenance = candidates.maintenance
    rows = _choice_rows(candidates, offsets)

    for i, choice in enumerate(sets):
        for k, order in enumerate(choice.orders):
            x = offsets[i] + k
            name = f"{choice.name} #{k}"
            order_steps = order.steps
            pcost = sum(costs[step_ids[s]] for s in order_steps)
            rows.append(
                Row(
                    "cost",
                    f"cost {name}",
                    (x, *(n_orders + step_ids[s] for s in order_steps)),
                    (-pcost, *(costs[step_ids[s]] for s in order_steps)),
                    0.0,
                    math.inf,
                )
            )
            for mir in order.mirs:
                for m in maintenance[mir]:
                    sub = sets[m]
                    sub_cols = tuple(range(offsets[m], offsets[m] + len(sub.orders)))
                    rows.append(
                        Row(
                            "mir",
                            f"mir {name} needs {sub.name}",
                            (x, *sub_cols),
                            (-1.0, *(1.0,) * len(sub_cols)),
                            0.0,
                            math.inf,
                        )
                    )
            labels = order.targets
            rows.append(
                Row(
                    "partition_link",
                    f"partition {name}",
                    (x, *(z_col[(label.store, label.key)] for label in labels)),
                    (-float(len(labels)), *(1.0,) * len(labels)),
                    0.0,
                    math.inf,
                )
            )

    rows += _partition_rows(candidates, z_col)
    zeros = (0.0,) * n_orders
    return IlpModel(candidates, "paper", zeros, steps, costs, partitions, tuple(rows))


def _tight(candidates: Candidates) -> IlpModel:
    problem = candidates.problem
    sets = candidates.choice_sets
    n_orders = candidates.order_count
    offsets = _offsets(candidates)

    # Which choice sets contain each step; a step of one set only gets no y column.
    owners: dict[Step, set[int]] = {}
    for i, choice in enumerate(sets):
        for order in choice.orders:
            for step in order.steps:
                owners.setdefault(step, set()).add(i)
    cost_of = {step: step_cost(problem, step) for step in owners}
    steps = tuple(step for step, sets_of in owners.items() if len(sets_of) > 1)
    y_col = {step: n_orders + i for i, step in enumerate(steps)}
    order_costs = [0.0] * n_orders
    for i, choice in enumerate(sets):
        for k, order in enumerate(choice.orders):
            order_costs[offsets[i] + k] = sum(
                cost_of[step] for step in order.steps if step not in y_col
            )

    partitions = tuple((store, key) for store, keys in candidates.partitionings for key in keys)
    z_base = n_orders + len(steps)
    z_col = {pair: z_base + i for i, pair in enumerate(partitions)}
    maintenance = candidates.maintenance
    rows = _choice_rows(candidates, offsets)

    for i, choice in enumerate(sets):
        by_step: dict[Step, list[int]] = {}
        by_label: dict[tuple[Store, Column | None], list[int]] = {}
        by_mir: dict[Store, list[int]] = {}
        for k, order in enumerate(choice.orders):
            x = offsets[i] + k
            for step in order.steps:
                if step in y_col:
                    by_step.setdefault(step, []).append(x)
            for label in order.targets:
                by_label.setdefault((label.store, label.key), []).append(x)
            for mir in order.mirs:
                by_mir.setdefault(mir, []).append(x)
        for step, xs in by_step.items():
            rows.append(_at_most("cost", f"cost {choice.name} y{y_col[step]}", xs, [y_col[step]]))
        for (store, key), xs in by_label.items():
            name = f"partition {choice.name} {store.name}[{'*' if key is None else key}]"
            rows.append(_at_most("partition_link", name, xs, [z_col[(store, key)]]))
        for mir, xs in by_mir.items():
            for m in maintenance[mir]:
                sub = list(range(offsets[m], offsets[m] + len(sets[m].orders)))
                rows.append(_at_most("mir", f"mir {choice.name} needs {sets[m].name}", xs, sub))

    rows += _partition_rows(candidates, z_col)
    costs = tuple(cost_of[step] for step in steps)
    return IlpModel(candidates, "tight", tuple(order_costs), steps, costs, partitions, tuple(rows))


def _at_most(kind: RowKind, name: str, lhs: list[int], rhs: list[int]) -> Row:
    """``Σ lhs <= Σ rhs`` as a row."""
    coefs = (1.0,) * len(lhs) + (-1.0,) * len(rhs)
    return Row(kind, name, (*lhs, *rhs), coefs, -math.inf, 0.0)
