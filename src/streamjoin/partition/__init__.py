"""Partitioning schemes and their cost formulas (Squall's join matrix, BiStream's join biclique).

Pure: no Spark. A scheme (:mod:`.scheme`) says, as Spark SQL over a row, where the row is stored
and where it probes; :mod:`.cost` holds the papers' formulas; :mod:`.estimate` predicts a batch's
cost under each scheme and ranks them.
"""

from __future__ import annotations

from streamjoin.partition.cost import (
    bandwidth_biclique,
    bandwidth_matrix,
    ilf,
    matrix_shapes,
    memory_biclique,
    memory_matrix,
    optimal_shape,
    sgr_biclique,
    sgr_matrix,
)
from streamjoin.partition.estimate import Estimate, Stats, candidates, estimate
from streamjoin.partition.ranges import RangeScheme, range_bounds, range_index_sql, range_of
from streamjoin.partition.scheme import (
    BicliqueScheme,
    ContRandScheme,
    HashScheme,
    MatrixScheme,
    Places,
    RowSql,
    Scheme,
    Side,
)

__all__ = [
    "BicliqueScheme",
    "ContRandScheme",
    "Estimate",
    "HashScheme",
    "MatrixScheme",
    "Places",
    "RangeScheme",
    "RowSql",
    "Scheme",
    "Side",
    "Stats",
    "bandwidth_biclique",
    "bandwidth_matrix",
    "candidates",
    "estimate",
    "ilf",
    "matrix_shapes",
    "memory_biclique",
    "memory_matrix",
    "optimal_shape",
    "range_bounds",
    "range_index_sql",
    "range_of",
    "sgr_biclique",
    "sgr_matrix",
]
