"""Multi-way joins: probe-order terms, shared steps, MIR stores and measured selectivities."""

from __future__ import annotations
