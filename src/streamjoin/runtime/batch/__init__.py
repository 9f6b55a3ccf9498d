"""One micro-batch, step by step: intake, state, joins, sinks, dead letters, commit."""

from __future__ import annotations
