"""Two-way joins under a partitioning scheme: each row's units, and the rows each unit received."""

from __future__ import annotations
