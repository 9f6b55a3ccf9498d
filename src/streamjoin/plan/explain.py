"""Render a `JobPlan` as the text ``streamjoin explain`` prints."""

from __future__ import annotations

import typing as t

from streamjoin.model.aggregate import POINT_US, EventWindow, TopN
from streamjoin.optimizer.sharing import cost
from streamjoin.plan.multiway import MultiwayPlan, core_groups
from streamjoin.plan.shared import candidate
from streamjoin.plan.shared_multiway import multiway_candidate

if t.TYPE_CHECKING:
    from streamjoin.optimizer.sharing import Candidate
    from streamjoin.plan.aggregate import AggregatePlan
    from streamjoin.plan.groups import GroupQueryPlan
    from streamjoin.plan.outer import OuterPlan
    from streamjoin.plan.physical import JobPlan, QueryPlan
    from streamjoin.plan.streams import StreamPlan


def _duration(us: int) -> str:
    return f"{us / 1e6:g}s"


def _stream_line(sp: StreamPlan) -> str:
    s = sp.stream
    wm = (
        f"event time {s.watermark.column}, watermark delay {_duration(s.watermark.delay_us)}"
        if s.watermark
        else "no watermark (never late; its partners keep full history)"
    )
    e = sp.expiry
    if sp.retain_us is None and e is not None:
        timed = "" if e.retain_us is None else f" and ts < watermark - {_duration(e.retain_us)}"
        keep = (
            f"each batch's rows are one unit, dropped whole once the watermark passes every "
            f"row's {e.column} + {_duration(e.offset_us)}{timed}"
        )
    elif sp.retain_us is None:
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
        "    equality keys: " + (", ".join(k.describe() for k in parts.equi) or "none"),
        "    bands:         " + (", ".join(x.describe() for x in parts.bands) or "none"),
        "    window:        "
        + (
            f"{b.alias}.{qp.right_time} - {a.alias}.{qp.left_time} in {parts.window.describe()}"
            if parts.window
            else "none (full-history join)"
        ),
        "    residual:      " + (" AND ".join(parts.residual) or "none"),
    ]
    for side, bound in zip((a, b), qp.expiry, strict=True):
        if bound is not None:
            lines.append(
                f"    expiry:        {side.alias}'s rows leave the join's index once the "
                f"watermark passes {bound.column} + {_duration(bound.offset_us)}"
            )
    if qp.strategy == "hash":
        how = (
            "hash join on the equality keys (Spark SQL extracts them); "
            "the rest of the predicate is checked on each key match"
        )
        if qp.band is not None:
            how += f"; the band {qp.band.describe()} adds a bucket key floor(v / {qp.band.width:g})"
        elif qp.time_band is not None:
            mode = q.option("time_buckets") or "auto"
            width = f"floor(unix_micros(ts) / {qp.time_band.width:g})"
            how += {
                "auto": f"; once a few keys carry most rows, the window's time bucket {width} "
                "joins the keys (time_buckets = auto)",
                "true": f"; the window's time bucket {width} joins the keys (time_buckets = true)",
                "false": "; the window's time bucket never joins the keys (time_buckets = false)",
            }[mode]
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
    return lines + _partitioning_lines(qp)


EXPLAIN_UNITS = 4
"""Units assumed by explain when the query names none (the engine uses Spark's shuffle
partitions, 4 in its local session)."""


def _partitioning_lines(qp: QueryPlan) -> list[str]:
    """Every scheme that fits the query with its predicted cost, for even keys and for one hot
    key, and the scheme the engine starts with."""
    from streamjoin.partition import Stats, candidates

    q = qp.query
    forced = q.option("partitioning", "auto") or "auto"
    units = int(q.option("units") or EXPLAIN_UNITS)
    adapt = q.option("adapt", "true") == "true"
    if forced == "auto":
        start = (
            "auto: the engine's own join (hash on the keys, or bucket / broadcast as above); "
            + (
                "the rows per unit are watched and a skewed key moves it to the cheapest "
                "scheme below"
                if qp.parts.equi and adapt
                else "adaptation off"
                if qp.parts.equi
                else "no key to be skewed on"
            )
        )
    else:
        start = f"forced '{forced}' on {units} units" + (
            "; the matrix shape follows Squall's doubling rule"
            if forced == "matrix" and adapt
            else ""
        )
    band = (qp.band.lo, qp.band.hi) if qp.band is not None else None
    lines = [f"  partitioning: {start}"]
    for title, share in (("even keys", 0.0), ("one key in half the rows", 0.5)):
        if share and not qp.parts.equi:
            continue
        stats = Stats(1e6, 1e6, 1e4, 1e4, units=units, top_key_share=share)
        lines.append(
            f"    predicted per batch ({title}; 1,000,000 rows in state and 10,000 new per side):"
        )
        chosen = forced if forced != "auto" else "hash" if qp.parts.equi else None
        for e in candidates(bool(qp.parts.equi), band, stats):
            mark = "->" if e.scheme.name == chosen else "  "
            lines.append(
                f"    {mark}{e.scheme.describe():<44} busiest unit {e.max_unit_input:>10,.0f}"
                f"  stored {e.stored_bytes:>10,.0f}  moved {e.moved_bytes:>8,.0f} rows  "
                f"({e.reason})"
            )
    lines.append("    (-> the scheme the query starts with; costs in rows, tuple size 1)")
    return lines


def explain_plan(plan: JobPlan) -> str:
    """Every stream's state layout and every query's classification and strategy."""
    out = ["streams:"]
    out += [_stream_line(sp) for sp in plan.streams]
    grouped = {m.name: g.name for g in plan.cores for m in g.members}
    aggregates = {a.name: a for a in plan.aggregates}
    outers = {o.name: o for o in plan.outers}
    for p in plan.plans():
        out.append("")
        out += _multiway_lines(p) if isinstance(p, MultiwayPlan) else _query_lines(p)
        if p.query.name in outers:
            out += _outer_lines(outers[p.query.name])
        if p.query.name in aggregates:
            out += _aggregate_lines(aggregates[p.query.name])
        if p.query.name in grouped:
            out.append(
                f"  runs in the shared join {grouped[p.query.name]} (below): the orders above "
                "are what it would run alone"
            )
    for gp in plan.group_queries:
        out += ["", *_group_query_lines(gp)]
    if plan.clash is not None:
        title = "multi-way queries, planned together (CLASH's ILP; MIR stores join two streams):"
        out += ["", title]
        out += [f"  {line}" for line in plan.clash.plan.describe()]
        out += [f"  {name}: greedy orders ({why})" for name, why in plan.clash.left_out.items()]
    out += _core_lines(plan.multiway)
    out += _shared_lines(plan)
    return "\n".join(out)


def _outer_lines(op: OuterPlan) -> list[str]:
    """When an outer join emits its rows without a partner, and what it keeps for them."""
    out = [f"  {op.outer.kind} outer join: matching is the ON condition {op.outer.on}"]
    for i in (0, 1):
        if op.outer.preserves(i):
            mine, other = op.query.sides[i], op.query.sides[1 - i]
            out.append(
                f"    a row of {mine.alias} without a partner is emitted once, with "
                f"{other.alias}'s columns NULL, when its event time falls below watermark - "
                f"{_duration(op.lag(i))}: it is then anti-joined with {other.alias}'s rows its "
                f"window covers ({other.stream} kept {_duration(op.width)} behind it)"
            )
    if op.outer.where is not None:
        out.append(f"    WHERE {op.outer.where} filters the pairs and the rows without a partner")
    return out


def _window_kind(window: EventWindow) -> str:
    if window.size_us == POINT_US:
        return "each instant"
    if window.tumbling:
        return f"tumbling {_duration(window.size_us)}"
    return f"hopping {_duration(window.size_us)} every {_duration(window.slide_us)}"


def _group_query_lines(gp: GroupQueryPlan) -> list[str]:
    """A query over windowed groups of single streams: each input's groups, then their join."""
    q = gp.query
    out = [f"query {q.name} (line {q.line}): INSERT INTO {q.sink}"]
    for g, buffer in zip(q.inputs, gp.inputs, strict=True):
        agg = g.aggregation
        where = f" WHERE {g.where}" if g.where else ""
        having = f"; HAVING {agg.having}" if agg.having else ""
        out += [
            f"  {g.name}: stream {g.stream} AS {g.alias}{where}: buffer "
            f"{', '.join(sql for sql, _ in buffer.columns)} of each row",
            f"    -> GROUP BY window({agg.window.time}) {_window_kind(agg.window)}; keys: "
            f"{', '.join(agg.keys) or 'none'}{having}",
            f"    -> SELECT {', '.join(f'{s.sql} AS {s.alias}' for s in g.select)}",
        ]
    rows, select = gp.rows, f"    -> SELECT {', '.join(f'{s.sql} AS {s.alias}' for s in q.select)}"
    if q.rows is not None and rows is not None:
        (g,) = q.inputs
        span = f"[{_duration(rows.lo_us)}, {_duration(rows.hi_us)}]"
        out += [
            f"  then: stream {q.rows.stream} AS {q.rows.alias} JOIN {g.name}'s groups ON {q.on}, "
            "in the batch that closes their window",
            f"    a row pairs with the windows ending at e where {q.rows.alias}.{q.rows.time} - e "
            f"in {span}: a window is emitted {_duration(rows.lag_us)} after its end, and "
            f"{q.rows.stream} keeps its rows for {_duration(rows.retain_us)} behind the watermark",
            select,
        ]
    elif q.on is not None:
        a, b = q.inputs
        out += [
            f"  then: {a.name}'s groups JOIN {b.name}'s ON {q.on}, in the batch that closes "
            "their window (the condition matches the windows: no state beyond them)",
            select,
        ]
    out.append(
        "  a window is emitted once, when the watermark passes its end; state: the buffered "
        "rows of the open windows, a unit per batch"
    )
    return out


def _rollup_lines(ap: AggregatePlan) -> list[str]:
    rollup = ap.query.rollup
    if rollup is None:
        return []
    return [
        f"  then, over every row above as {rollup.alias}: GROUP BY {', '.join(rollup.keys) or '()'}"
        " (no window)",
        f"    -> SELECT {', '.join(f'{s.sql} AS {s.alias}' for s in rollup.select)}",
        "  an updating result: each batch writes the new values of the groups its rows touched "
        "(a reader keeps each group's newest row); state: running partials per group",
    ]


def _aggregate_lines(ap: AggregatePlan) -> list[str]:
    """The operators after a GROUP BY or top-N query's join, and the state they keep."""
    agg, window = ap.windowed, ap.window
    kind = _window_kind(window)
    keys = ", ".join(agg.keys) or "none"
    items = ", ".join(f"{s.sql} AS {s.alias}" for s in ap.query.select)
    if isinstance(agg, TopN):
        then = [
            f"    -> per window of {window.time} ({kind}) and keys ({keys}): the first "
            f"{agg.limit} by {', '.join(agg.order)} (ROW_NUMBER)",
            f"    -> SELECT {items}",
        ]
    else:
        having = f"; HAVING {agg.having}" if agg.having else ""
        then = [
            f"    -> GROUP BY window({window.time}) {kind}; keys: {keys}{having}",
            f"    -> SELECT {items}",
        ]
    return [
        f"  then: buffer {', '.join(sql for sql, _ in ap.columns)} of each joined row",
        *then,
        f"  a window is emitted once, when watermark - {_duration(ap.lag_us)} passes its end "
        f"({window.time} trails the watermark by up to {_duration(ap.lag_us)} in a result "
        "still to come); state: the buffered rows of the open windows, a unit per batch",
        *_rollup_lines(ap),
    ]


def _candidate(plan: JobPlan, name: str) -> Candidate | None:
    qp = next((x for x in plan.queries if x.query.name == name), None)
    if qp is not None:
        return candidate(qp)
    q = next((q for q in plan.job.queries if q.name == name), None)
    return None if q is None else multiway_candidate(plan.job, q)


def _why(plan: JobPlan, names: t.Sequence[str]) -> list[str]:
    members = [c for n in names if (c := _candidate(plan, n)) is not None]
    if len(members) != len(names):
        return []
    together = cost(members, {})
    apart = sum(cost([c], {}) for c in members)
    return [
        f"    why: cost {together:,.0f} per batch together against {apart:,.0f} apart "
        "(a join's fixed cost, plus the rows it indexes at the default rate)"
    ]


def _shared_lines(plan: JobPlan) -> list[str]:
    """Queries that run as one join (`plan.shared`, `plan.shared_multiway`)."""
    title = "joins (AJoin: one join per batch, a query-set bit per query):"
    out = ["", f"shared two-way {title}"] if plan.shared else []
    for g in plan.shared:
        qp = g.plan
        names = ", ".join(f"{m.name} (bit {m.bit})" for m in g.members)
        window = qp.parts.window.describe() if qp.parts.window else "none (full history)"
        keys = ", ".join(k.describe() for k in qp.parts.equi) or "none"
        out.append(f"  {g.name}: {names}")
        out += _why(plan, [m.name for m in g.members])
        streams = f"{qp.query.left.stream} JOIN {qp.query.right.stream}"
        out.append(f"    {streams} on {keys}; widest window {window}")
        out.append("    selections and other conditions become the bits; each sink keeps its bit")
    if plan.cores:
        out += ["", f"shared multi-way {title}"]
    for core in plan.cores:
        mp = core.plan
        names = ", ".join(f"{m.name} (bit {m.bit})" for m in core.members)
        out.append(f"  {core.name}: {names}")
        out += _why(plan, [m.name for m in core.members])
        joined = " JOIN ".join(side.stream for side in mp.query.sides)
        out.append(f"    {joined} on {mp.query.predicate}")
        out.append(f"    probe orders: {'; '.join(o.describe(mp.aliases) for o in mp.orders)}")
        out.append("    each query's own windows, selections and conditions become its bit")
    return out


def _core_lines(plans: t.Sequence[MultiwayPlan]) -> list[str]:
    """Queries that join alike and differ only in selections: one run of the core serves all."""
    shared = [g for g in core_groups(plans) if len(g) > 1]
    if not shared:
        return []
    out = ["", "shared join cores (each run once per batch, unfiltered; each query filters it):"]
    for members in shared:
        names = ", ".join(m.query.name for m in members)
        out.append(f"  {names}: probe orders of {members[0].query.name}, selections after")
    return out


def _multiway_lines(mp: MultiwayPlan) -> list[str]:
    q, aliases = mp.query, mp.aliases
    inputs = "  ".join(f"{s.alias} = {s.stream}" for s in q.sides)
    lines = [
        f"query {q.name} (line {q.line}): INSERT INTO {q.sink}",
        f"  {len(aliases)}-way join of  {inputs}",
        f"  predicate: {q.predicate}",
        "  delta rule: each new combination once, in the term of its first input (as written)",
        "  that holds a new row; later inputs are probed with their new rows, earlier ones without",
        "  probe orders (Δ = the input's new rows):",
    ]
    lines += [f"    {order.describe(aliases)}" for order in mp.orders]
    keep = ", ".join(
        f"{a}: {'full history' if r is None else f'ts >= watermark - {_duration(r)}'}"
        for a, r in zip(aliases, mp.retain_us, strict=True)
    )
    lines.append(f"  state needed: {keep}")
    return lines
