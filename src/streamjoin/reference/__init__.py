"""The brute-force reference executor: the oracle every engine test compares with.

See `streamjoin.reference.executor` for the semantics contract (late and malformed rows, the
global watermark, the result of a query) and `streamjoin.reference.evaluate` for how Spark SQL
expressions are evaluated in Python. Pure Python: never imports Spark.
"""

from __future__ import annotations

from streamjoin.reference.canonical import normalize
from streamjoin.reference.evaluate import compile_expression
from streamjoin.reference.executor import ReferenceResult, reference_join, run_reference
from streamjoin.reference.values import event_time_us

__all__ = [
    "ReferenceResult",
    "compile_expression",
    "event_time_us",
    "normalize",
    "reference_join",
    "run_reference",
]
