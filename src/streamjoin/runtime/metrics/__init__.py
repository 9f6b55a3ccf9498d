"""Every batch's figures: kept in memory and under the checkpoint, served as Prometheus text and
JSON, drawn by the dashboard and `Serving.plot` (``docs/metrics.md``)."""

from __future__ import annotations

from streamjoin.runtime.metrics.history import MetricsHistory, read_history
from streamjoin.runtime.metrics.record import BatchFigures, figures_of

__all__ = ["BatchFigures", "MetricsHistory", "figures_of", "read_history"]
