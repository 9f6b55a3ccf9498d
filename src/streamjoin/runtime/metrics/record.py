"""`BatchFigures`: one committed batch's figures, built from its `BatchReport` with no Spark job.

Every figure is one the batch already computed (its counts, phases, manifest and routers'
notes); the record only adds the wall-clock time it was committed at, from which the
watermark's lag and the batch's latency follow.
"""

from __future__ import annotations

import time
import typing as t
from dataclasses import asdict, dataclass, field

from streamjoin.adapt.schemestate import COUNTERS

if t.TYPE_CHECKING:
    from streamjoin.runtime.batch.context import BatchReport


@dataclass(frozen=True)
class BatchFigures:
    """What one batch did, as plain JSON-able data (one line of the history file)."""

    batch: int
    time: float
    """Wall-clock seconds since the epoch when the batch was committed."""
    seconds: float
    """The batch's time in the engine, from its start to its commit."""
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds per phase: ``join`` (joins and sinks), ``state``, ``deadletters``, ``commit``."""
    rows_in: dict[str, int] = field(default_factory=dict)
    """Per stream: the batch's rows, on time, late and malformed."""
    late: dict[str, int] = field(default_factory=dict)
    malformed: dict[str, int] = field(default_factory=dict)
    out: dict[str, int] = field(default_factory=dict)
    """Per query that wrote in the batch: the result rows it wrote."""
    queries: list[str] = field(default_factory=list)
    """The queries the batch ran."""
    watermark: int | None = None
    """The global watermark the batch left (epoch microseconds; None: none yet)."""
    newest: int | None = None
    """The newest on-time event time among the batch's rows (epoch microseconds)."""
    state_rows: dict[str, int] = field(default_factory=dict)
    """Per stream: live state rows after the batch."""
    state_bytes: dict[str, int] = field(default_factory=dict)
    """Per stream: bytes of its live state's files (0 where a unit's size was not measured)."""
    units: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    """Per routed query: rows each unit of its join received, as ``probe`` and ``store``, and
    ``store_bytes``: the stored rows at the mean bytes of a stored row of its streams."""
    schemes: dict[str, str] = field(default_factory=dict)
    """Per query with a router or probe orders: what the batch ran under, in words."""
    shapes: dict[str, dict[str, t.Any]] = field(default_factory=dict)
    """Per routed query: its scheme's parameters for the next batch (``name``, ``n``, ``m``,
    ``units``), as the manifest keeps them: the shape of the dashboard's heatmap."""
    shed: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per shedding query and direction: new rows that did not probe (``left``, ``right``, or a
    multi-way query's aliases) and the pairs they would have found (``left.pairs``, …)."""
    totals: dict[str, t.Any] = field(default_factory=dict)
    """The run's counters over the checkpoint's life (``batches``, ``rows_in``, ``out``,
    ``late``, ``malformed`` per stream or query), as the manifest keeps them."""
    parallelism: int = 0
    """The shuffle partitions (parallel tasks) the batch's joins ran with."""
    events: list[str] = field(default_factory=list)
    """What changed at this batch: schemes, probe orders, queries added or dropped, dead
    letters written."""

    @property
    def watermark_lag(self) -> float | None:
        """Seconds the watermark trails the wall clock at the commit."""
        return None if self.watermark is None else self.time - self.watermark / 1e6

    @property
    def latency(self) -> float | None:
        """Seconds from the newest event time in the batch to the commit of its results: the
        end-to-end latency of the batch's freshest row when event time is arrival time (a
        source's own delay is included; a backlog shows as a large value)."""
        return None if self.newest is None else self.time - self.newest / 1e6

    def to_dict(self) -> dict[str, t.Any]:
        """The record as written to the history file, with the derived figures."""
        return {
            **asdict(self),
            "watermark_lag": self.watermark_lag,
            "latency": self.latency,
        }

    @staticmethod
    def of(raw: t.Mapping[str, t.Any]) -> BatchFigures:
        """Inverse of `to_dict` (the derived figures are recomputed)."""
        names = BatchFigures.__dataclass_fields__
        return BatchFigures(**{k: v for k, v in raw.items() if k in names})

    def flat(self) -> dict[str, t.Any]:
        """One row of `Serving.history`'s table: totals over streams and queries, then a
        column per stream, query and phase (``rows_in.A``, ``out.q1``, ``phase.join``)."""
        row: dict[str, t.Any] = {
            "batch": self.batch,
            "time": self.time,
            "seconds": self.seconds,
            "rows_in": sum(self.rows_in.values()),
            "rows_out": sum(self.out.values()),
            "late": sum(self.late.values()),
            "malformed": sum(self.malformed.values()),
            "state_rows": sum(self.state_rows.values()),
            "state_bytes": sum(self.state_bytes.values()),
            "watermark": self.watermark,
            "watermark_lag": self.watermark_lag,
            "latency": self.latency,
            "rows_per_second": sum(self.rows_in.values()) / self.seconds if self.seconds else None,
        }
        for prefix, values in (
            ("phase", self.phases),
            ("rows_in", self.rows_in),
            ("out", self.out),
            ("state_rows", self.state_rows),
        ):
            row |= {f"{prefix}.{k}": v for k, v in values.items()}
        return row


def figures_of(
    report: BatchReport,
    queries: t.Sequence[str],
    before: BatchFigures | None = None,
    now: float | None = None,
) -> BatchFigures:
    """The figures of `report`'s batch, which ran `queries`, committed at `now` (default: the
    wall clock now); `before`, the batch ahead of it, tells which queries came and went."""
    m = report.manifest
    streams = report.streams
    state_bytes: dict[str, int] = {}
    for u in m.units:
        state_bytes[u.stream] = state_bytes.get(u.stream, 0) + u.bytes
    newest = [s.max_ts for s in streams.values() if s.max_ts is not None]
    schemes = {q: note.split(" -> ")[0] for q, note in report.routing.items()}
    events = [f"{q}: {note}" for q, note in report.routing.items() if " -> " in note]
    events += report.events
    if before is not None:
        events += [f"query {q} added" for q in queries if q not in before.queries]
        events += [f"query {q} dropped" for q in before.queries if q not in queries]
    rejected = report.late + report.malformed
    if rejected:
        events.append(
            f"{report.late} late and {report.malformed} malformed rows to the dead letters"
        )
    for q, d in report.shed.items():
        skipped = sum(n for k, n in d.items() if "." not in k)
        if skipped:
            how = "" if m.overload.get(q, {}).get("counted") else "about "
            pairs = sum(n for k, n in d.items() if k.endswith(".pairs"))
            events.append(
                f"{q}: {skipped} new rows did not probe (overload), missing {how}{pairs} pairs"
            )
    totals = m.totals
    return BatchFigures(
        batch=report.batch,
        time=time.time() if now is None else now,
        seconds=report.seconds,
        phases=dict(report.phases),
        rows_in={n: s.ok + s.late + s.malformed for n, s in streams.items()},
        late={n: s.late for n, s in streams.items()},
        malformed={n: s.malformed for n, s in streams.items()},
        out=dict(report.out),
        queries=list(queries),
        watermark=report.watermark,
        newest=max(newest) if newest else None,
        state_rows=m.state_rows(),
        state_bytes=state_bytes,
        units={
            q: {"probe": list(u.probe), "store": list(u.store), "store_bytes": list(u.store_bytes)}
            for q, u in report.units.items()
        },
        schemes=schemes,
        shapes={
            q: {k: v for k, v in r.get("params", {}).items() if k not in COUNTERS}
            for q, r in m.routing.items()
        },
        shed={q: dict(d) for q, d in report.shed.items()},
        totals={
            "batches": totals.batches,
            "rows_in": dict(totals.rows_in),
            "out": dict(totals.out),
            "late": dict(totals.late),
            "malformed": dict(totals.malformed),
        },
        parallelism=report.parallelism,
        events=events,
    )
