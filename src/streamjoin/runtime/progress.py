"""The live progress line and the end-of-run summary."""

from __future__ import annotations

import sys
import time
import typing as t
from dataclasses import dataclass, field
from datetime import datetime, timedelta

if t.TYPE_CHECKING:
    from streamjoin.runtime.batch.processor import BatchReport
    from streamjoin.runtime.state.manifest import Manifest


_EPOCH = datetime(1970, 1, 1)


def format_watermark(us: int | None) -> str:
    """An epoch-microsecond watermark as UTC text ("-" while there is none)."""
    if us is None:
        return "-"
    try:
        # Exact in integers: a float of seconds rounds 9999-12-31 23:59:59.999999 into year 10000.
        return (_EPOCH + timedelta(microseconds=us)).isoformat(" ", "milliseconds")
    except OverflowError:
        # An event time near 0001-01-01 less the delay is before Python's first year.
        return f"{us} µs since 1970"


@dataclass
class Summary:
    """What a run did, in total over the checkpoint's life (counters survive restarts)."""

    checkpoint: str
    batches: int = 0
    rows_in: dict[str, int] = field(default_factory=dict)
    late: dict[str, int] = field(default_factory=dict)
    malformed: dict[str, int] = field(default_factory=dict)
    out: dict[str, int] = field(default_factory=dict)
    state_rows: dict[str, int] = field(default_factory=dict)
    watermark: int | None = None
    seconds: float = 0.0
    batches_this_run: int = 0
    schemes: dict[str, str] = field(default_factory=dict)
    shedding: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per query that sheds probes: its allowances now and the probes it skipped in all."""

    @property
    def rows_joined(self) -> int:
        """Result rows over all queries."""
        return sum(self.out.values())

    @staticmethod
    def from_manifest(
        m: Manifest, checkpoint: str, seconds: float, batches_this_run: int
    ) -> Summary:
        """The summary a committed manifest implies."""
        return Summary(
            checkpoint=checkpoint,
            batches=m.totals.batches,
            rows_in=dict(m.totals.rows_in),
            late=dict(m.totals.late),
            malformed=dict(m.totals.malformed),
            out=dict(m.totals.out),
            state_rows=m.state_rows(),
            watermark=m.global_wm,
            seconds=seconds,
            batches_this_run=batches_this_run,
            schemes={name: _scheme_text(r) for name, r in m.routing.items()},
            shedding={name: dict(o) for name, o in m.overload.items()},
        )

    def render(self) -> str:
        """Multi-line text for the terminal."""
        lines = [
            f"streamjoin summary ({self.batches} batches in total, {self.batches_this_run} in this "
            f"run, {self.seconds:.1f}s)",
            f"  rows in:     {sum(self.rows_in.values())}  "
            + " ".join(f"{k}={v}" for k, v in self.rows_in.items()),
            f"  rows joined: {self.rows_joined}",
            f"  late:        {sum(self.late.values())}  "
            + " ".join(f"{k}={v}" for k, v in self.late.items() if v),
            f"  malformed:   {sum(self.malformed.values())}  "
            + " ".join(f"{k}={v}" for k, v in self.malformed.items() if v),
            f"  state rows:  {sum(self.state_rows.values())}  "
            + " ".join(f"{k}={v}" for k, v in self.state_rows.items()),
            f"  watermark:   {format_watermark(self.watermark)}",
            "  output per query:",
        ]
        lines += [
            f"    {name}: {n}" + (f"  [{self.schemes[name]}]" if name in self.schemes else "")
            for name, n in self.out.items()
        ] or ["    (none)"]
        for name, o in self.shedding.items():
            ways = [k.removeprefix("shed.") for k in o if k.startswith("shed.")]
            skipped = int(sum(o[f"shed.{d}"] for d in ways))
            missed = int(sum(o.get(f"missed.{d}", 0) for d in ways))
            how = "" if o.get("counted") else "about "
            lines.append(
                f"  {name} sheds probes under overload: {skipped} new rows did not probe ("
                + ", ".join(f"{d} {int(o[f'shed.{d}'])}" for d in ways)
                + f"), missing {how}{missed} pairs; allowances now "
                + ", ".join(f"{d} {o.get(d, 1.0):.2f}" for d in ways)
                + ("; its output is a subset of the exact result" if skipped else "")
                + ("; its freshness cannot be met within the budget" if o.get("fresh") == 0 else "")
            )
        if sum(self.late.values()) + sum(self.malformed.values()):
            lines.append(
                f"  dead letters under {self.checkpoint}/deadletter/ (or each stream's "
                "deadletter option)"
            )
        return "\n".join(lines)


class ProgressLine:
    """One line rewritten in place after each batch, when the output is a terminal."""

    def __init__(self, stream: t.TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.started = time.monotonic()
        self.rows_in = 0
        self.rows_out = 0
        self.batches = 0

    def __call__(self, report: BatchReport) -> None:
        """Count `report`'s batch and redraw the line."""
        self.batches += 1
        self.rows_in += report.rows_in
        self.rows_out += sum(report.out.values())
        if not self.enabled:
            return
        rate = self.rows_in / max(time.monotonic() - self.started, 1e-9)
        for name, note in report.routing.items():
            if "->" in note:  # a scheme or probe-order change: worth a line of its own
                what = "" if note.startswith("probe orders") else "partitioning "
                self.stream.write(f"\r{name}: {what}{note}\n")
        skew = max((u.skew for u in report.units.values()), default=None)
        unit_bytes = max((max(u.store_bytes, default=0) for u in report.units.values()), default=0)
        shed = sum(n for s in report.shed.values() for k, n in s.items() if "." not in k)
        self.stream.write(
            f"\rbatch {report.batch}  in {self.rows_in}  out {self.rows_out}  {rate:,.0f} rows/s"
            f"  state {report.state_rows}  late {report.late}  watermark "
            f"{format_watermark(report.watermark)}  ({report.seconds:.2f}s/batch)"
            + (f"  units max/mean {skew:.2f}" if skew is not None else "")
            + (f", state read {unit_bytes / 1e6:.1f} MB/unit max" if unit_bytes else "")
            + (f"  shed {shed} probes" if shed else "")
            + "   "
        )
        self.stream.flush()

    def close(self) -> None:
        """End the line so the summary starts on its own."""
        if self.enabled and self.batches:
            self.stream.write("\n")
            self.stream.flush()


GROWING_FLOOR_S = 1.0
"""Under a zero trigger, a batch this short or shorter is caught up, never behind: back-to-back
batches of a job that keeps up vary by more than they grow."""


class FallingBehind:
    """One warning line when batches keep taking longer than the trigger: an exact job's
    overload shows as lag and this line, never as work left undone (`docs/overload.md`). Under
    a zero trigger (Spark's default: each batch starts as the last ends and takes what arrived
    meanwhile) no batch is within a trigger; a job that cannot keep up shows instead as each
    batch longer than the last, with more input, and that is what counts there."""

    def __init__(self, trigger_seconds: float, stream: t.TextIO | None = None, streak: int = 3):
        self.trigger = trigger_seconds
        self.stream = stream or sys.stderr
        self.streak = streak
        self.behind = 0
        self.warned = False
        self._last: BatchReport | None = None

    def __call__(self, report: BatchReport) -> None:
        """Count a batch slower than the trigger (under a zero trigger: over `GROWING_FLOOR_S`,
        longer and with more input than the one before); warn on the `streak`-th in a row
        (again after the job has caught up and fallen behind once more)."""
        last, self._last = self._last, report
        if report.seconds <= (self.trigger or GROWING_FLOOR_S):
            self.behind, self.warned = 0, False
            return
        grew = last is not None and last.seconds < report.seconds and last.rows_in < report.rows_in
        if not self.trigger and not grew:
            return  # (a long batch that did not grow: the streak neither grows nor ends)
        self.behind += 1
        if self.behind >= self.streak and not self.warned:
            self.warned = True
            shedding = " (queries with overload = 'shed' skip probes to keep up)"
            if self.trigger:
                what = f"took longer than the {self.trigger:g}s trigger"
            else:
                what = "each took longer than the one before, with more input, back to back"
            self.stream.write(
                f"\rstreamjoin: {self.behind} batches in a row {what} (the last "
                f"{report.seconds:.2f}s): input arrives faster than the job joins it, and latency "
                "grows; a query may shed probes instead with WITH (overload = 'shed')"
                f"{shedding if report.shed else ''}\n"
            )
            self.stream.flush()


def trigger_seconds(trigger: str) -> float | None:
    """Seconds of a processing-time trigger (``'1 second'``, ``'500 milliseconds'``)."""
    from streamjoin.model.intervals import unit_micros

    parts = trigger.split()
    micros = unit_micros(parts[1]) if len(parts) == 2 else None
    try:
        return None if micros is None else float(parts[0]) * micros / 1e6
    except ValueError:
        return None


def _scheme_text(saved: dict[str, t.Any]) -> str:
    """A query's scheme, as its saved routing state describes it."""
    from streamjoin.adapt.schemestate import scheme_from_params

    params = saved.get("params", {})
    scheme = scheme_from_params(params)
    text = f"hash on {params.get('units', '?')} units" if scheme is None else scheme.describe()
    return text + (", keyed by event-time bucket too" if params.get("time_bucket") else "")
