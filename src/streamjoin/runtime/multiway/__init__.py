"""Multi-way joins: chains of levels on the join operator; on the cached slices, probe-order
terms and shared steps; measured selectivities."""

from __future__ import annotations
