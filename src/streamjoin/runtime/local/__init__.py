"""Speed-ups for a driver in Spark's local mode only; nothing here runs on a cluster."""

from __future__ import annotations
