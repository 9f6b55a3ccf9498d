"""The exact answer to JAQPOT's fractional model, by linear programming (HiGHS): the oracle
the greedy controller (`adapt.jaqpot`) is measured against.

Variables: the resources x_I of each path, 0 <= x_I <= its capacity. The joint problem
maximises the root output Σ ρ_p,I·x_I subject to Σ x_I <= μ and, for each susceptible state j,
Σ_I a_jI·x_I >= R_j (a_jI: rows path I stores into j per unit of resource). `min_cover` is the
freshness step alone: the least Σ x_I meeting the refresh rates. Both are linear programs in
the continuous model, so they are solved exactly (the digest's note on §5.2: the set cover is
NP-hard only for whole multiples, which the continuous model does not have).
"""

from __future__ import annotations

import typing as t

from streamjoin.adapt.jaqpot import Allocation, InputPath, allocation

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def optimum(
    paths: Sequence[InputPath],
    budget: float,
    needed: Mapping[str, float] | None = None,
    floor: Mapping[str, float] | None = None,
) -> Allocation:
    """The allocation of most output within `budget` that meets `needed`, each path given at
    least its `floor` (infeasible: the most output without freshness, marked so)."""
    solved = _solve(paths, needed or {}, budget, maximise_output=True, floor=floor)
    if solved is None:
        plain = _solve(paths, {}, budget, maximise_output=True)
        assert plain is not None  # (x = 0 is always feasible without freshness)
        return allocation(paths, plain, feasible=False)
    return allocation(paths, solved, reserved=_least(paths, needed or {}) or 0.0)


def min_cover(paths: Sequence[InputPath], needed: Mapping[str, float]) -> float | None:
    """The least resources that meet `needed` (None: the capacities cannot)."""
    return _least(paths, needed)


def _least(paths: Sequence[InputPath], needed: Mapping[str, float]) -> float | None:
    solved = _solve(paths, needed, None, maximise_output=False)
    return None if solved is None else sum(solved.values())


def _solve(
    paths: Sequence[InputPath],
    needed: Mapping[str, float],
    budget: float | None,
    *,
    maximise_output: bool,
    floor: Mapping[str, float] | None = None,
) -> dict[str, float] | None:
    import highspy

    inf = highspy.kHighsInf
    n = len(paths)
    supplies = [p.refresh() for p in paths]
    rows: list[tuple[list[int], list[float], float, float]] = []
    if budget is not None:
        rows.append((list(range(n)), [1.0] * n, -inf, budget))
    for state, rate in needed.items():
        cols = [i for i in range(n) if supplies[i].get(state, 0.0) > 0]
        rows.append((cols, [supplies[i][state] for i in cols], rate, inf))
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = len(rows)
    sign = -1.0 if maximise_output else 1.0  # (HiGHS minimises)
    lp.col_cost_ = [sign * p.productivity if maximise_output else 1.0 for p in paths]
    lp.col_lower_ = [min((floor or {}).get(p.stream, 0.0), p.capacity) for p in paths]
    lp.col_upper_ = [p.capacity for p in paths]
    lp.row_lower_ = [r[2] for r in rows]
    lp.row_upper_ = [r[3] for r in rows]
    starts, index, value = [0], [], []
    for cols, coefs, _, _ in rows:
        index += cols
        value += coefs
        starts.append(len(index))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = len(rows)
    lp.a_matrix_.start_ = starts
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = value
    highs = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy's __init__ is untyped
    highs.setOptionValue("output_flag", False)
    highs.passModel(lp)
    highs.run()
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    values = highs.getSolution().col_value
    return {p.stream: max(float(v), 0.0) for p, v in zip(paths, values, strict=True)}
