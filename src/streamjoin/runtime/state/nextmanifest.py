"""A batch's next manifest: new watermarks, live and expired state units, the run's totals, and
what the controllers carry to the next batch (see `runtime.state.manifest`)."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from streamjoin.runtime.state.manifest import Manifest, StateUnit, Totals

if t.TYPE_CHECKING:
    from streamjoin.plan import JobPlan, StreamPlan


@dataclass
class StreamStats:
    """One stream's rows in a batch: counts, on-time event-time range, its new state unit."""

    ok: int = 0
    late: int = 0
    malformed: int = 0
    min_ts: int | None = None
    max_ts: int | None = None
    unit: StateUnit | None = None


PAST_EVERY_ROW = 2**62
"""The watermark a last batch of an input declared finished (``--final``) leaves for its own
decisions: past every row's event time (microseconds), so that every window closes and every
outer join's row still waiting for a partner is decided, by the path that decides them in any
batch."""


def leaving_watermark(
    plan: JobPlan, prev: Manifest, stats: dict[str, StreamStats], *, final: bool = False
) -> int | None:
    """The global watermark a batch of `stats` leaves, as its windows and outer joins see it
    (`PAST_EVERY_ROW` in the last batch of a `final` input)."""
    return PAST_EVERY_ROW if final else next_watermarks(plan, prev, stats)[1]


def next_watermarks(
    plan: JobPlan, prev: Manifest, stats: dict[str, StreamStats]
) -> tuple[dict[str, int | None], int | None]:
    """Each stream's watermark and the global one after a batch of `stats` (see
    `streamjoin.reference` for the rule)."""
    stream_wm = dict(prev.stream_wm)
    for sp in plan.streams:
        s, wm = stats[sp.name], sp.stream.watermark
        if wm is not None and s.max_ts is not None:
            candidate = s.max_ts - wm.delay_us
            old = stream_wm.get(sp.name)
            stream_wm[sp.name] = candidate if old is None else max(old, candidate)
    timed = [sp.name for sp in plan.streams if sp.stream.watermark]
    marks = [stream_wm.get(name) for name in timed]
    global_wm = prev.global_wm
    if timed and all(m is not None for m in marks):
        new = min(t.cast("list[int]", marks))
        global_wm = new if global_wm is None else max(global_wm, new)
    return stream_wm, global_wm


def next_manifest(
    plan: JobPlan,
    prev: Manifest,
    batch_id: int,
    stats: dict[str, StreamStats],
    out: dict[str, int],
    carried: tuple[dict[str, dict[str, t.Any]], dict[str, t.Any]],
) -> Manifest:
    """The manifest after batch `batch_id`.

    Args:
        plan: the job's plan.
        prev: the manifest the batch started from.
        batch_id: the batch.
        stats: per stream, the batch's rows.
        out: per query, the rows the batch wrote.
        carried: the routers' state per query, and the multi-way re-planning state.
    """
    stream_wm, global_wm = next_watermarks(plan, prev, stats)
    live: list[StateUnit] = []
    dropped: list[str] = []
    expired, cuts = dict(prev.expired), dict(prev.column_cuts)
    new_units = [s.unit for s in stats.values() if s.unit is not None]
    for u in prev.units + new_units:
        sp = plan.stream(u.stream)
        if u.max_ts is not None and sp.dead(u.max_ts, (u.bound_of, u.bound), global_wm):
            if u.behind or not u.files:  # (a stream's own input files are not ours to delete)
                dropped.append(u.path)
            cuts = _column_cut(cuts, sp, u.stream in expired)
            expired[u.stream] = max(expired.get(u.stream, u.max_ts), u.max_ts)
        else:
            live.append(u)
    before = prev.totals
    totals = Totals(
        batches=before.batches + 1,
        rows_in=add_counts(
            before.rows_in, {k: s.ok + s.late + s.malformed for k, s in stats.items()}
        ),
        late=add_counts(before.late, {k: s.late for k, s in stats.items()}),
        malformed=add_counts(before.malformed, {k: s.malformed for k, s in stats.items()}),
        out=add_counts(before.out, out),
    )
    routing, multiway = carried
    return Manifest(
        batch_id,
        stream_wm,
        global_wm,
        live,
        dropped,
        totals,
        routing,
        multiway,
        streams=[sp.name for sp in plan.streams],
        expired=expired,
        column_cuts=cuts,
    )


def _column_cut(
    cuts: dict[str, list[t.Any]], sp: StreamPlan, dropped_before: bool
) -> dict[str, list[t.Any]]:
    """`cuts` (`Manifest.column_cuts`) after a unit of `sp` left: by its column, or by event
    time (then the stream has no entry: rows were dropped that a column does not tell)."""
    e, name = sp.expiry, sp.name
    old = cuts.get(name)
    if sp.retain_us is not None or e is None or (old is None and dropped_before):
        return {k: v for k, v in cuts.items() if k != name}
    if old is None:
        return cuts | {name: [e.column, e.offset_us]}
    if old[0].lower() != e.column.lower():
        return cuts | {name: ["", 0]}
    return cuts | {name: [old[0], min(int(old[1]), e.offset_us)]}


def add_counts(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """`a` and `b` added key by key."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in sorted(set(a) | set(b))}
