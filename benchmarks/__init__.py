"""Benchmarks: workloads, side-by-side runs of streamjoin and its Spark peers, reports."""

from __future__ import annotations
