"""Controllers that turn per-batch statistics into new plan epochs — pure, no Spark.

- `MatrixController`: Squall's doubling rule for the (n, m) shape of a join matrix.
- `ElasticController`: BiStream's two-phase scaling of a group of store units.
- `ReorderController`: CLASH's epochs for multi-way probe orders (statistics of epoch e, new
  orders from epoch e + 2); `probes.Reorderer` holds a job's multi-way plans through them.
- `schemes.next_scheme`: a two-way query's partitioning policies (reshape the matrix, scale the
  biclique, move the range bounds, leave hash on skew and come back), fed with each batch's
  unit counts.
- `skewcheck.checks_skew`: which batches count the automatic hash path's rows per unit.
"""

from __future__ import annotations

from streamjoin.adapt.elastic import ElasticController, ScaleStep, Verdict
from streamjoin.adapt.matrix import (
    DEFAULT_WARMUP,
    Decision,
    MatrixController,
    Reshape,
    Shape,
    default_shape,
)
from streamjoin.adapt.reorder import Orders, ReorderController

__all__ = [
    "DEFAULT_WARMUP",
    "Decision",
    "ElasticController",
    "MatrixController",
    "Orders",
    "ReorderController",
    "Reshape",
    "ScaleStep",
    "Shape",
    "Verdict",
    "default_shape",
]
