"""Cost formulas of the partitioning schemes, from the Squall and BiStream papers.

Sizes are in any unit (tuples, or bytes when tuple sizes are given); every formula is linear in
them, so the unit carries through.
"""

from __future__ import annotations


def ilf(r: float, s: float, n: int, m: int, size_r: float = 1.0, size_s: float = 1.0) -> float:
    """Input-load factor of an (n, m) join matrix: ``size_r·|R|/n + size_s·|S|/m`` (Squall §3.3).

    It is both the input and the storage of one cell, and the only cost that depends on the shape.
    """
    return size_r * r / n + size_s * s / m


def matrix_shapes(units: int) -> list[tuple[int, int]]:
    """The allowed (n, m) shapes of `units` cells: every power-of-two n with n·m = units."""
    if units < 1 or units & (units - 1):
        msg = f"a join matrix needs a power-of-two number of units, got {units}"
        raise ValueError(msg)
    shapes, n = [], 1
    while n <= units:
        shapes.append((n, units // n))
        n *= 2
    return shapes


def optimal_shape(
    r: float, s: float, units: int, size_r: float = 1.0, size_s: float = 1.0
) -> tuple[int, int]:
    """The (n, m) of least ILF for |R| = r and |S| = s over `units` cells (ties: the squarer)."""
    return min(
        matrix_shapes(units),
        key=lambda nm: (ilf(r, s, nm[0], nm[1], size_r, size_s), abs(nm[0] - nm[1])),
    )
