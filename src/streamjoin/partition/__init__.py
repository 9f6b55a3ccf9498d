"""Partitioning schemes and their cost formulas (Squall's join matrix, BiStream's join biclique)."""

from __future__ import annotations

from streamjoin.partition.cost import ilf, matrix_shapes, optimal_shape

__all__ = ["ilf", "matrix_shapes", "optimal_shape"]
