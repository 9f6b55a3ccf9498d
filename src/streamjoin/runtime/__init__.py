"""The Spark side: the only package that imports pyspark."""

from __future__ import annotations
