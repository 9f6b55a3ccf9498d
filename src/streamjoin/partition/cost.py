"""Cost formulas of the partitioning schemes, from the Squall and BiStream papers.

Sizes are in any unit (tuples, or bytes when tuple sizes are given); every formula is linear in
them, so the unit carries through.

**Naming.** Our :class:`~streamjoin.partition.scheme.MatrixScheme` follows Squall: an (n, m)
matrix has n rows (partitions of R, the left side) and m columns (partitions of S), so an R tuple
is stored m times and an S tuple n times. BiStream (SIGMOD 2015, §4) names the matrix the other
way round: its m×n matrix has m partitions of R and n of S, and R is replicated **n** times. Every
function here takes OUR convention; the BiStream equations are rewritten accordingly:

==================  ==========================  ==================================
quantity            BiStream                    here
==================  ==========================  ==================================
R partitions        m                           n (matrix), left_units (biclique)
S partitions        n                           m (matrix), right_units (biclique)
W_mat (Eq. 2)       χ_R·n·|R| + χ_S·m·|S|       m·χ_R·|R| + n·χ_S·|S|
B_mat (Eq. 6)       n·Σ_R + m·Σ_S               m·Σ_R + n·Σ_S
B_bi (Eq. 5)        (n/e+1)·Σ_R + (m/d+1)·Σ_S   (right_units/e+1)·Σ_R + (left_units/d+1)·Σ_S
==================  ==========================  ==================================
"""

from __future__ import annotations

from typing import Literal


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


def memory_matrix(
    r: float, s: float, n: int, m: int, size_r: float = 1.0, size_s: float = 1.0
) -> float:
    """Total state of an (n, m) join matrix, replicas included: ``m·size_r·|R| + n·size_s·|S|``.

    Squall's total replicated storage J·ILF (§3.3: Fig. 2 gives 520 GB on (8, 8) and 128 GB on
    (1, 64) for |R| = 1 GB, |S| = 64 GB); the same quantity is BiStream's W_mat (Eq. 2), with
    BiStream's n and m swapped into our naming (see the module docstring).
    """
    return m * size_r * r + n * size_s * s


def memory_biclique(
    r: float,
    s: float,
    size_r: float = 1.0,
    size_s: float = 1.0,
    *,
    left_units: int = 1,
    right_units: int = 1,
    d: int = 1,
    e: int = 1,
    rate_r: float = 0.0,
    rate_s: float = 0.0,
    delay: float = 0.0,
) -> float:
    """Memory of a join biclique, BiStream's W_bi with its probe-buffer terms.

    ``W_bi = χ_R·(|R| + (right_units/e)·φ_R·D) + χ_S·(|S| + (left_units/d)·φ_S·D)``
    (BiStream §4, the unnumbered formula before Eq. 1): every tuple is stored once; the D terms
    count probe copies buffered for the maximum network delay D (rates φ in tuples per time
    unit). With ``delay = 0`` (the micro-batch runtime has no in-flight probe buffer) it is
    Eq. 1, ``W_bi ≈ χ_R·|R| + χ_S·|S|``, whatever the partitioning.
    """
    buffered_r = right_units / e * rate_r * delay
    buffered_s = left_units / d * rate_s * delay
    return size_r * (r + buffered_r) + size_s * (s + buffered_s)


def sgr_matrix(
    r: float,
    s: float,
    n: int,
    m: int,
    capacity: float,
    add: Literal["row", "column"] = "row",
    size_r: float = 1.0,
    size_s: float = 1.0,
) -> float:
    """Scaling gain ratio of growing an (n, m) join matrix by one row or column (BiStream Def. 4).

    The fraction of a new unit's capacity C left for new input. A new **row** (a new R partition)
    must first receive a copy of its column's S partition, ``|S|/m`` tuples: SGR = 1 −
    χ_S·(|S|/m)/C (BiStream Eq. 3, SGR_mat,R, whose |S|/n is our |S|/m). A new **column** needs
    ``|R|/n``: SGR = 1 − χ_R·(|R|/n)/C (Eq. 4). Clamped at 0 (the copy does not even fit).
    """
    if add == "row":
        used = size_s * s / m
    elif add == "column":
        used = size_r * r / n
    else:
        msg = f"add must be 'row' or 'column', got {add!r}"
        raise ValueError(msg)
    return max(0.0, 1.0 - used / capacity)


def sgr_biclique() -> float:
    """Scaling gain ratio of adding a unit to a join biclique: 1 (BiStream §4, SGR_bi = 1).

    Nothing is replicated, so a new unit's whole capacity holds new input.
    """
    return 1.0


def bandwidth_matrix(sigma_r: float, sigma_s: float, n: int, m: int) -> float:
    """Bytes routed per time unit (or batch) into an (n, m) matrix: ``m·Σ_R + n·Σ_S``.

    BiStream Eq. 6 (``B_mat = n·Σ_R + m·Σ_S`` in its naming, R replicated n times), where
    ``Σ_R = χ_R·φ_R`` is R's input bytes per time unit; each R tuple goes to the m cells of its
    row, each S tuple to the n cells of its column, and those copies both store and probe.
    """
    return m * sigma_r + n * sigma_s


def bandwidth_biclique(
    sigma_r: float, sigma_s: float, left_units: int, right_units: int, d: int = 1, e: int = 1
) -> float:
    """Bytes routed into a join biclique: ``(right_units/e + 1)·Σ_R + (left_units/d + 1)·Σ_S``.

    BiStream Eq. 5 (``(n/e+1)·Σ_R + (m/d+1)·Σ_S`` in its naming, m = R units, n = S units): each
    R tuple sends one store copy plus one probe to every unit of an S subgroup (right_units/e
    units on average), and symmetrically. Random routing is ``d = e = 1``; pure hash routing is
    ``d = left_units, e = right_units`` (``2·Σ_R + 2·Σ_S``).
    """
    return (right_units / e + 1) * sigma_r + (left_units / d + 1) * sigma_s
