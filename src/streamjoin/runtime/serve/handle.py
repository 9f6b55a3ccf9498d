"""`Serving`: a served job running in the background, whose queries change while it runs."""

from __future__ import annotations

import threading
import time
import typing as t

from streamjoin.runtime.failure import close
from streamjoin.runtime.metrics.history import MetricsHistory, local_dir
from streamjoin.runtime.progress import Summary, format_watermark
from streamjoin.runtime.restart import history_gaps
from streamjoin.runtime.serve.queries import QuerySet

if t.TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd
    from matplotlib.figure import Figure
    from pyspark.sql.streaming.query import StreamingQuery

    from streamjoin.runtime.batch.processor import BatchProcessor, BatchReport
    from streamjoin.runtime.metrics.sparkprogress import ProgressPublisher
    from streamjoin.runtime.serve.queries import ServedQueries


class Serving:
    """The handle `Engine.start` returns. Changes apply at the next batch boundary; each call
    returns plain JSON-able data (the HTTP endpoint sends it as it is).

    >>> handle = Engine(spark).start(job, checkpoint="ckpt")        # doctest: +SKIP
    >>> handle.add_query(open("alerts.sql").read())                 # doctest: +SKIP
    {'name': 'alerts', 'sink': 'alerts', 'state': 'starting', 'change': 1, 'warnings': []}
    >>> handle.wait(1)                                              # doctest: +SKIP
    >>> handle.drop_query("alerts")                                 # doctest: +SKIP
    >>> handle.history().tail()                                     # doctest: +SKIP
    """

    def __init__(
        self,
        served: ServedQueries,
        on_batch: Callable[[BatchReport], None] | None = None,
        metrics: MetricsHistory | None = None,
        publisher: ProgressPublisher | None = None,
    ) -> None:
        self.served = served
        self._publisher = publisher
        """Puts each batch's figures in Spark's progress (None: not put)."""
        self._on_batch = on_batch
        folder = local_dir(served.checkpoint.path("metrics"))
        self.metrics = metrics or MetricsHistory(folder)
        """Every batch's figures (`runtime.metrics`): ``/metrics``, ``/history``, `history`."""
        self._query: StreamingQuery | None = None
        self._processor: BatchProcessor | None = None
        self._last: BatchReport | None = None
        self._batches = 0
        self._applied = threading.Condition()
        self._started = time.monotonic()

    def started(self, query: StreamingQuery, processor: BatchProcessor) -> None:
        """The stream the handle controls, once it runs."""
        self._query, self._processor = query, processor

    def batch_done(self, report: BatchReport) -> None:
        """`BatchProcessor`'s call after each committed batch."""
        ran = self.served.job_of(QuerySet.of(report.manifest.served)).queries
        figures = self.metrics.record(report, [q.name for q in ran])
        if self._publisher is not None:
            self._publisher.publish(figures)
        with self._applied:
            self._last, self._batches = report, self._batches + 1
            self._applied.notify_all()
        if self._on_batch is not None:
            self._on_batch(report)

    def add_query(self, sql: str, source: str = "<query>") -> dict[str, t.Any]:
        """Check the query file `sql` (one ``CREATE SINK`` and its ``INSERT INTO``) and have it
        start at the next batch; it is named after its sink.

        Raises:
            JobError: the query is wrong (line, column and text in `sql`); nothing changes.
            StreamJoinError: its name or sink is taken.
        """
        change, job = self.served.add(sql, source)
        latest = self.served.checkpoint.latest()
        gaps = history_gaps(self.served.plan(job, groups=()), latest)
        return {
            "name": change.name,
            "sink": next(q.sink for q in job.queries if q.name == change.name),
            "state": "starting",
            "change": change.seq,
            "warnings": [m for m in gaps if m.startswith(f"query {change.name} ")],
        }

    def drop_query(self, name: str) -> dict[str, t.Any]:
        """Have query `name` (or the query of sink `name`) stop at the next batch: its sink gets
        nothing from that batch on.

        Raises:
            StreamJoinError: no such query.
        """
        change = self.served.drop(name)
        return {"name": change.name, "state": "stopping", "change": change.seq}

    def wait(self, change: int, timeout: float | None = None) -> bool:
        """Wait until a committed batch has applied change number `change` (False at the
        timeout, or if the stream stopped first)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._applied:
            while self.served.current.seq < change:
                if not self.active:
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._applied.wait(0.5 if left is None else min(left, 0.5))
        return True

    def queries(self) -> list[dict[str, t.Any]]:
        """Every query running or about to run or stop: name, sink, streams, state
        (``running``, ``starting``, ``stopping``), the batch it started in (None: from the job
        file's start), rows written so far, the queries it shares a join with, and its text if
        it was added."""
        now_set = self.served.current  # (read once: a batch may commit meanwhile)
        current = self.served.job_of(now_set)
        planned = self.served.planned_job()
        since = dict(now_set.since)
        texts = dict(now_set.added) | {
            c.name: c.text for c in self.served.pending() if c.kind == "add"
        }
        last = self._last
        out = last.manifest.totals.out if last is not None else {}
        groups = now_set.groups or ()
        group = {n: i for i, g in enumerate(groups) for n in g}
        now = {q.name for q in current.queries}
        rows = []
        for q in [*current.queries, *(q for q in planned.queries if q.name not in now)]:
            state = "running" if q.name in now else "starting"
            if q.name in now and q.name not in {p.name for p in planned.queries}:
                state = "stopping"
            rows.append(
                {
                    "name": q.name,
                    "sink": q.sink,
                    "streams": [side.stream for side in q.sides],
                    "state": state,
                    "since": since.get(q.name),
                    "rows_out": out.get(q.name, 0),
                    "shares_with": [n for n in groups[group[q.name]] if n != q.name]
                    if q.name in group
                    else [],
                    "sql": texts.get(q.name),
                }
            )
        return rows

    @property
    def query(self) -> StreamingQuery | None:
        """Spark's streaming query behind the handle (None before it starts); its progress
        carries each batch's figures (``docs/metrics.md``)."""
        return self._query

    @property
    def active(self) -> bool:
        """Whether the stream runs."""
        return self._query is not None and self._query.isActive

    def status(self) -> dict[str, t.Any]:
        """The service at a glance: running or not, its last batch, the queries' count."""
        last = self._last
        error = self._processor.error if self._processor is not None else None
        return {
            "active": self.active,
            "uptime_seconds": round(time.monotonic() - self._started, 3),
            "batches": self._batches,
            "last_batch": None if last is None else last.batch,
            "last_batch_seconds": None if last is None else round(last.seconds, 3),
            "rows_in": None if last is None else last.rows_in,
            "state_rows": None if last is None else last.state_rows,
            "watermark": format_watermark(None if last is None else last.watermark),
            "queries": len(self.served.job_of(self.served.current).queries),
            "shared_joins": [list(g) for g in self.served.current.groups or ()],
            "pending_changes": len(self.served.pending()),
            # (per shedding query: allowances and the run's skipped probes and missed pairs)
            "shedding": {} if last is None else dict(last.manifest.overload),
            "error": None if error is None else f"{type(error).__name__}: {error}",
        }

    def history(self) -> pd.DataFrame:
        """The figures of the batches kept in memory, a row each (`BatchFigures.flat`): rows
        in and out, late, malformed, batch time and its phases, latency, watermark and its lag,
        state rows; and a column per stream, query and phase."""
        import pandas as pd

        return pd.DataFrame([r.flat() for r in self.metrics.records()])

    def plot(self) -> Figure:
        """A matplotlib figure of `history`: throughput, latency, batch time by phase and
        state rows per stream, against the batch id (needs matplotlib)."""
        from streamjoin.runtime.metrics.plots import plot_history

        return plot_history(self.metrics.records())

    def plan(self) -> str:
        """The running plan, as ``streamjoin explain`` shows it."""
        processor = self._processor
        if processor is None:
            return ""
        return processor.plan.explain()

    def stop(self) -> Summary:
        """Stop the stream after the batch in progress, release the checkpoint's lock, and
        return the run's summary."""
        if self._query is not None and self._query.isActive:
            self._query.stop()
        store = self.served.checkpoint
        try:
            if self._processor is not None:
                close(self._processor)
        finally:
            with self._applied:
                self._applied.notify_all()
            if store.lock is not None:
                store.lock.release()
        seconds = time.monotonic() - self._started
        return Summary.from_manifest(store.latest(), store.root, seconds, self._batches)

    def raise_failure(self) -> None:
        """Raise what stopped the stream, if a failure did (`engine.raise_failure`)."""
        from streamjoin.runtime.engine import raise_failure

        if self._query is not None and self._processor is not None:
            raise_failure(self._query, self._processor)

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait for the stream to stop (True) or `timeout` seconds (False)."""
        if self._query is None:
            return True
        # Seconds as a float work at runtime; pyspark's hint says int.
        return bool(self._query.awaitTermination(timeout))  # type: ignore[arg-type]
