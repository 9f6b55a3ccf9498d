"""Controllers that turn per-batch statistics into new plan epochs — pure, no Spark.

- `MatrixController`: Squall's doubling rule for the (n, m) shape of a join matrix.
- `ElasticController`: BiStream's two-phase scaling of a group of store units.
- `EpochLog`: the epochs (scheme and parameters from a batch on) that both feed.
- `ReorderController`: CLASH's epochs for multi-way probe orders (statistics of epoch e, new
  orders from epoch e + 2).
"""

from __future__ import annotations

from streamjoin.adapt.elastic import ElasticController, ScaleStep, Verdict
from streamjoin.adapt.epochs import Epoch, EpochLog, ParamValue
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
    "Epoch",
    "EpochLog",
    "MatrixController",
    "Orders",
    "ParamValue",
    "ReorderController",
    "Reshape",
    "ScaleStep",
    "Shape",
    "Verdict",
    "default_shape",
]
