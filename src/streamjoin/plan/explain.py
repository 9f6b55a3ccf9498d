"""Render a `JobPlan` as the text ``streamjoin explain`` prints."""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    from streamjoin.plan.physical import JobPlan, QueryPlan, StreamPlan


def _duration(us: int) -> str:
    return f"{us / 1e6:g}s"


def _stream_line(sp: StreamPlan) -> str:
    s = sp.stream
    wm = (
        f"event time {s.watermark.column}, watermark delay {_duration(s.watermark.delay_us)}"
        if s.watermark
        else "no watermark (never late; its partners keep full history)"
    )
    if sp.retain_us is None:
        keep = "full history (nothing expires)"
    else:
        keep = (
            f"kept while ts >= watermark - {_duration(sp.retain_us)}; each batch's rows are "
            "one unit, dropped whole once all its rows are older"
        )
    return f"  stream {s.name} [{s.format}]: {wm}; state {keep}"


def _query_lines(qp: QueryPlan) -> list[str]:
    q, parts = qp.query, qp.parts
    a, b = q.left, q.right
    lines = [
        f"query {q.name} (line {q.line}): INSERT INTO {q.sink}",
        f"  left  {a.alias} = {a.stream}    right {b.alias} = {b.stream}",
        f"  predicate: {q.predicate}",
        "  classification:",
        "    equality keys: "
        + (", ".join(f"{k.left_sql} = {k.right_sql}" for k in parts.equi) or "none"),
        "    bands:         "
        + (
            ", ".join(f"{x.right_sql} - {x.left_sql} in [{x.lo:g}, {x.hi:g}]" for x in parts.bands)
            or "none"
        ),
        "    window:        "
        + (
            f"{b.alias}.{qp.right_time} - {a.alias}.{qp.left_time} in {parts.window.describe()}"
            if parts.window
            else "none (full-history join)"
        ),
        "    residual:      " + (" AND ".join(parts.residual) or "none"),
    ]
    if qp.strategy == "hash":
        how = (
            "hash join on the equality keys (Spark SQL extracts them); "
            "the rest of the predicate is checked on each key match"
        )
        if qp.band is not None:
            how += (
                f"; the band {qp.band.right_sql} - {qp.band.left_sql} in "
                f"[{qp.band.lo:g}, {qp.band.hi:g}] adds a bucket key floor(v / {qp.band.width:g})"
            )
    elif qp.strategy == "band" and qp.band is not None:
        band = qp.band
        unit = "us" if band.temporal else ""
        how = (
            f"band join by bucket equality: bucket = floor(v / {band.width:g}{unit}) with "
            f"v = {band.right_sql} on the right and {band.left_sql} on the left; the delta side "
            "is exploded to the buckets its band overlaps, the state side is hashed on its "
            "bucket; the whole predicate is rechecked"
        )
    else:
        how = "nested loop: the delta is broadcast and the whole predicate is checked per pair"
    lines += [
        f"  execution: {how}",
        f"  per batch: Δ{a.stream} ⋈ {b.stream}(state + Δ)  ∪  {a.stream}(state) ⋈ Δ{b.stream}"
        " — each pair exactly once",
    ]
    return lines


def explain_plan(plan: JobPlan) -> str:
    """Every stream's state layout and every query's classification and strategy."""
    out = ["streams:"]
    out += [_stream_line(sp) for sp in plan.streams]
    for qp in plan.queries:
        out.append("")
        out += _query_lines(qp)
    return "\n".join(out)
