"""SQL text for values that change from batch to batch (watermarks, the state's lower bounds).

Spark writes an integer or timestamp literal into the Java code it generates for a stage, so a
new value means a new class to compile for each of the batch's stages (Spark's
``CodegenMetrics`` counts them). A decimal literal is passed to the code by reference
instead, and the classes compiled for one batch serve the next.
"""

from __future__ import annotations

_TYPE = "DECIMAL(18, 0)"
"""Holds any event time in microseconds (Spark's timestamps end in year 9999: 2.5e17)."""


def batch_constant(value: int) -> str:
    """`value` as a literal that stays out of the generated code."""
    return f"CAST({value} AS {_TYPE})"


def as_decimal(expr: str) -> str:
    """`expr` (a BIGINT) in the type of `batch_constant`, to be compared with one."""
    return f"CAST({expr} AS {_TYPE})"
