"""The newest batch's figures as Prometheus text, through prometheus-client's own registry.

The ``*_total`` counters are the run's over the checkpoint's life (they survive restarts, as
the manifest's totals do); every other metric is the newest batch's figure. Names and labels
are listed in ``docs/metrics.md``.
"""

from __future__ import annotations

import typing as t

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

if t.TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

    from prometheus_client.metrics_core import Metric

    from streamjoin.runtime.metrics.history import MetricsHistory

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The media type of Prometheus's text format."""


def _labelled(
    family: GaugeMetricFamily | CounterMetricFamily, values: Mapping[str, float]
) -> GaugeMetricFamily | CounterMetricFamily:
    for key, value in values.items():
        family.add_metric([key], value)
    return family


def _gauge(name: str, doc: str, label: str, values: Mapping[str, float]) -> Metric:
    return _labelled(GaugeMetricFamily(name, doc, labels=[label]), values)


def _counter(name: str, doc: str, label: str, values: Mapping[str, float]) -> Metric:
    return _labelled(CounterMetricFamily(name, doc, labels=[label]), values)


class HistoryCollector(Collector):
    """Collects the newest figures of `history` at each scrape (nothing before the first
    batch)."""

    def __init__(self, history: MetricsHistory) -> None:
        self.history = history

    def collect(self) -> Iterator[Metric]:
        """The metric families, computed from the newest batch's figures."""
        f = self.history.latest()
        if f is None:
            return
        totals = f.totals
        yield CounterMetricFamily(
            "streamjoin_batches", "Batches committed over the checkpoint's life", totals["batches"]
        )
        yield _counter("streamjoin_rows_in", "Rows read, by stream", "stream", totals["rows_in"])
        yield _counter("streamjoin_rows_out", "Result rows, by query", "query", totals["out"])
        yield _counter("streamjoin_late_rows", "Late rows, by stream", "stream", totals["late"])
        yield _counter(
            "streamjoin_malformed_rows", "Malformed rows, by stream", "stream", totals["malformed"]
        )
        yield GaugeMetricFamily("streamjoin_batch", "The newest committed batch's id", f.batch)
        yield GaugeMetricFamily(
            "streamjoin_batch_seconds", "The newest batch's time, start to commit", f.seconds
        )
        yield _gauge(
            "streamjoin_batch_phase_seconds", "The newest batch's time by phase", "phase", f.phases
        )
        yield _gauge(
            "streamjoin_batch_rows_in", "The newest batch's rows, by stream", "stream", f.rows_in
        )
        yield _gauge(
            "streamjoin_batch_rows_out", "The newest batch's result rows, by query", "query", f.out
        )
        yield _gauge("streamjoin_batch_late_rows", "The newest batch's late rows", "stream", f.late)
        yield _gauge(
            "streamjoin_batch_malformed_rows",
            "The newest batch's malformed rows",
            "stream",
            f.malformed,
        )
        yield GaugeMetricFamily(
            "streamjoin_batch_committed_seconds",
            "Wall-clock time the newest batch was committed (epoch seconds)",
            f.time,
        )
        yield from _optional(
            ("streamjoin_watermark_seconds", "The global watermark (epoch seconds)"),
            None if f.watermark is None else f.watermark / 1e6,
        )
        yield from _optional(
            ("streamjoin_watermark_lag_seconds", "Seconds the watermark trails the wall clock"),
            f.watermark_lag,
        )
        yield from _optional(
            (
                "streamjoin_latency_seconds",
                "Commit time of the newest batch minus its newest event time",
            ),
            f.latency,
        )
        yield _gauge("streamjoin_state_rows", "Live state rows, by stream", "stream", f.state_rows)
        yield _gauge(
            "streamjoin_state_bytes", "Live state files' bytes, by stream", "stream", f.state_bytes
        )
        yield from self._units(f.units)
        info = InfoMetricFamily(
            "streamjoin_scheme", "The scheme or probe orders a query ran under", labels=["query"]
        )
        for query, scheme in f.schemes.items():
            info.add_metric([query], {"scheme": scheme})
        yield info
        shed = GaugeMetricFamily(
            "streamjoin_shed_rows",
            "The newest batch's new rows that did not probe, by query and direction",
            labels=["query", "direction"],
        )
        missed = GaugeMetricFamily(
            "streamjoin_shed_pairs",
            "The pairs the newest batch's skipped probes would have found (estimated unless "
            "the query counts them), by query and direction",
            labels=["query", "direction"],
        )
        for query, directions in f.shed.items():
            for key, n in directions.items():
                direction, _, pairs = key.partition(".")
                (missed if pairs else shed).add_metric([query, direction], n)
        yield shed
        yield missed

    @staticmethod
    def _units(units: Mapping[str, Mapping[str, Iterable[int]]]) -> Iterator[Metric]:
        rows = GaugeMetricFamily(
            "streamjoin_unit_rows",
            "Rows each unit of a query's join received in the newest batch",
            labels=["query", "unit", "role"],
        )
        stored = GaugeMetricFamily(
            "streamjoin_unit_state_bytes",
            "State bytes each unit of a query's join read in the newest batch (estimated)",
            labels=["query", "unit"],
        )
        for query, roles in units.items():
            for role in ("probe", "store"):
                for i, n in enumerate(roles.get(role, ())):
                    rows.add_metric([query, str(i), role], n)
            for i, n in enumerate(roles.get("store_bytes", ())):
                stored.add_metric([query, str(i)], n)
        yield rows
        yield stored


def _optional(names: tuple[str, str], value: float | None) -> Iterator[Metric]:
    if value is not None:
        yield GaugeMetricFamily(names[0], names[1], value)


def render(history: MetricsHistory) -> bytes:
    """`history`'s newest figures in Prometheus's text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HistoryCollector(history))
    return generate_latest(registry)
