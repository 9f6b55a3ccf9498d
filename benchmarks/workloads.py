"""The benchmark workloads: backlogs, job texts and the peer each is measured against.

Every workload has three sizes: ``tiny`` (the correctness test), ``quick`` (development, well
under three minutes) and ``full`` (the record in RESULTS.md). A workload expands into cases; each
case is one job run by our engine and by its peer on the same backlog.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass, replace

import pyarrow.compute as pc

from benchmarks.data import two_streams, write_backlog
from benchmarks.harness_exact import outer_exact

if t.TYPE_CHECKING:
    from collections.abc import Callable

    from benchmarks.data import Backlog

SIZES = ("tiny", "quick", "full")


@dataclass(frozen=True)
class Case:
    """One job measured by our engine and `peer`; `{out}` in the job is the result directory."""

    name: str
    job: str
    peer: str | None
    """The engine measured beside ours (None: no engine runs the query; `why_no_peer` says why)."""
    backlog: Backlog
    window_seconds: float | None = None
    predicate: str = ""
    warmup_batches: int | None = None
    """Batches of JVM warm-up before the steady state (`harness_figures.steady_figures`); None:
    the case reports no steady-state figures."""
    final: bool = False
    """Our run declares its input finished (`--final`), so every group still open is written."""
    exact: str | None = None
    """DuckDB SQL of the whole result over the backlog (its streams as views): the engines'
    rows must equal it as a multiset. None: the result size of a batch join is compared."""
    why_no_peer: str = ""
    latest_by: tuple[str, ...] = ()
    """An updating result's key (`harness_exact.exact_differences`)."""
    flink_exact: str | None = None
    """DuckDB SQL of Flink's answer, where Flink's SQL means another thing than `exact`'s."""
    floor: bool = False
    """Also run ``spark-floor`` (Spark's micro-batch loop alone) over the case's streams: the
    part of each batch that no engine in Spark's loop can cut."""
    alone: bool = False
    """Ours alone, Flink too left out (peer None says only that Spark runs no such query)."""
    shed: bool = False
    """Ours sheds probes under a budget (``shed_count = 'exact'``): its rows must be rows of the
    exact result (`exact`), and those it lacks as many as its skipped probes counted
    (`harness._checked`)."""
    reached: str | None = None
    """DuckDB SQL counting the pairs the window reaches (its streams as views): what our
    operator evaluates, at least, for a predicate it runs as the window's buckets with the rest
    tested on each pair (`harness._checked`: ``reached_pairs``)."""


@dataclass(frozen=True)
class Shape:
    """Size of a two-stream backlog: rows per stream, event-time span, number of files."""

    rows: int
    span_seconds: float
    files: int

    @property
    def rate(self) -> float:
        """Rows per second of event time, per stream."""
        return self.rows / self.span_seconds


# Full: 10,000 rows per second of event time per stream, 100,000 per stream per batch; a 10 s
# window then holds about 200,000 live rows per stream, the regime of ANCHORS' Spark figure
# (A9: 200k rows per batch, 1.2M state rows).
TWO_STREAM_SHAPES = {
    "tiny": Shape(1_500, 30.0, 3),
    "quick": Shape(200_000, 40.0, 4),
    "full": Shape(1_000_000, 100.0, 10),
}
X_RANGE = 1_000_000.0
MATCHES_PER_ROW = 1.0
WATERMARK_SECONDS = 2

_STREAM = """CREATE STREAM {name} (id BIGINT, k BIGINT, x DOUBLE, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '{wm}' SECOND)
  WITH (format = 'parquet', path = '{path}', maxFilesPerTrigger = '1');
"""


TWO_STREAM_ITEMS = "l.id AS lid, r.id AS rid, l.k AS k, r.x - l.x AS dx"
"""The SELECT of a two-stream job (`two_stream_job`)."""


def two_stream_job(backlog: Backlog, on: str, join: str = "JOIN") -> str:
    """A job joining streams ``a l`` and ``b r`` of `backlog` on `on` (with `join`: ``LEFT
    JOIN``, say), into ``{out}``."""
    streams = "".join(
        _STREAM.format(name=n, wm=WATERMARK_SECONDS, path=backlog.streams[n]) for n in ("a", "b")
    )
    return (
        streams
        + "CREATE SINK out WITH (format = 'parquet', path = '{out}');\n"
        + f"INSERT INTO out SELECT {TWO_STREAM_ITEMS}\nFROM a l {join} b r ON {on};\n"
    )


def _window(seconds: float) -> str:
    s = int(seconds)
    return f"r.ts BETWEEN l.ts - INTERVAL '{s}' SECOND AND l.ts + INTERVAL '{s}' SECOND"


def _keys(shape: Shape, window: float | None) -> int:
    """Key space giving `MATCHES_PER_ROW` matches per row: each row meets rate × 2W rows, or,
    without a window (None), every row of the other stream."""
    reach = shape.span_seconds if window is None else 2 * window
    return max(1, round(shape.rate * reach / MATCHES_PER_ROW))


BAND_KEYS = 8
"""Keys of the ``bandkey`` shape: few, as instruments are (the demo's shape)."""


def _predicates(kind: str, keys: int) -> str:
    # One pair in `keys` matches, whichever the predicate: the same selectivity as equi.
    if kind == "equi":
        return "l.k = r.k"
    if kind == "or":  # (a row's own id in the other stream, or one in `keys` by its key)
        return "(l.k = r.k OR l.id = r.id)"
    if kind == "bandkey":  # (one pair in `keys` over `BAND_KEYS` keys and a band within each)
        return f"l.k = r.k AND abs(l.x - r.x) <= {X_RANGE * BAND_KEYS / keys / 2:.3f}"
    if kind == "band":
        return f"abs(l.x - r.x) <= {X_RANGE / keys / 2:.3f}"
    if kind == "theta":
        return f"l.x < r.x AND r.x < l.x + {X_RANGE / keys:.3f}"
    if kind == "product":  # (no band, no key: P(u·v > t) = 1 − t + t·ln t for uniform u, v)
        return f"l.x * r.x > {X_RANGE * X_RANGE * _product_bound(1 / keys):.1f}"
    msg = f"unknown predicate kind {kind!r}"
    raise ValueError(msg)


def _product_bound(share: float) -> float:
    """The t in [0, 1] above which a product of two uniform values in [0, 1) falls with
    probability `share` (bisection: 1 − t + t·ln t falls from 1 at 0 to 0 at 1)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if 1 - mid + mid * math.log(mid) > share:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


PEERS = {
    "equi": "spark-native",
    "bandkey": "spark-native",  # (the key as Spark's join key, the band as a residual)
    "band": "spark-foreach",
    "theta": "spark-foreach",
    "or": "spark-foreach",
    "product": "spark-foreach",
}


def two_stream_case(
    root: str,
    size: str,
    kind: str,
    window: float | None,
    name: str,
    shape: Shape | None = None,
    *,
    keys: int | None = None,
    warmup_batches: int | None = None,
    join: str = "JOIN",
) -> Case:
    """A `kind` join of two generated streams within `window` seconds (None: no time range at
    all), over `keys` keys (default `_keys`, about one match per row); `join`: its kind."""
    shape = shape or TWO_STREAM_SHAPES[size]
    keys = keys or _keys(shape, window)
    made = BAND_KEYS if kind == "bandkey" else keys
    tables = two_streams(
        shape.rows, span_seconds=shape.span_seconds, keys=made, x_range=X_RANGE, seed=7
    )
    backlog = write_backlog(f"{root}/{name}", tables, {"a": "ts", "b": "ts"}, shape.files)
    on = _predicates(kind, keys)
    if window is not None:
        on = f"{on} AND {_window(window)}"
    job = two_stream_job(backlog, on, join)
    # (Spark's native join runs an outer join only with an equality between the sides, and a
    # window: every outer case has one.)
    peer = PEERS[kind] if join == "JOIN" or kind == "equi" else "spark-foreach"
    return Case(name, job, peer, backlog, window, on, warmup_batches)


def _outer(root: str, size: str) -> list[Case]:
    # A band join within 10 s, left outer: half the rows' band partners fall outside it.
    return [two_stream_case(root, size, "band", 10.0, "outer-band", join="LEFT JOIN")]


def _simple(kind: str) -> Callable[[str, str], list[Case]]:
    def cases(root: str, size: str) -> list[Case]:
        return [two_stream_case(root, size, kind, 10.0, kind)]

    return cases


# Six cases: at quick size each gets fewer rows and batches than the single-case workloads (60k
# rows in 4 files took 217 s on a quiet machine, 40k rows in 3 files 194 s: over the 3 minutes
# of the acceptance). Two batches still probe state: the second meets the first's.
WINDOW_GROWTH_QUICK = Shape(40_000, 40.0, 2)


def _window_growth(root: str, size: str) -> list[Case]:
    shape = WINDOW_GROWTH_QUICK if size == "quick" else None
    return [
        two_stream_case(root, size, kind, w, f"{kind}-{int(w)}s", shape)
        for kind in ("equi", "band")
        for w in (1.0, 10.0, 100.0)
    ]


# `long`: a live stream is many small batches against a large state. The same generator and job
# shape as `equi`, `band` and `theta`, in batches of 5 s of event time: full, 120 batches of
# 2,500 rows per stream; quick, 100 of 500; tiny (the correctness test of its six cases), 3 of
# 200, since each batch of each engine and case adds to the test suite's time. Its quick size
# keeps 100 batches, the workload's point, so it runs longer than the others' quick sizes.
LONG_SHAPES = {
    "tiny": Shape(600, 15.0, 3),
    "quick": Shape(50_000, 500.0, 100),
    "full": Shape(300_000, 600.0, 120),
}
LONG_EQUI_WINDOWS: tuple[float | None, ...] = (10.0, 300.0, 3600.0, None)
LONG_NON_EQUI_WINDOW = 300.0
LONG_WARMUP_BATCHES = 10


def _long_case(
    root: str, size: str, kind: str, window: float | None, workload: str = "long"
) -> Case:
    """One `long` case; its keys give about one match per row over what its window reaches."""
    shape = LONG_SHAPES[size]
    # A row meets rate × min(2W, span) rows (edges aside): from half the run on, a window
    # meets as many rows as no window does.
    reach = None if window is None or 2 * window >= shape.span_seconds else window
    name = f"{workload}-{kind}-{'full' if window is None else f'{int(window)}s'}"
    outer, _, plain = kind.rpartition("-")
    join, kind = (f"{outer.upper()} JOIN", plain) if outer in ("left", "full") else ("JOIN", kind)
    case = two_stream_case(
        root,
        size,
        kind,
        window,
        name,
        shape,
        keys=_keys(shape, reach),
        warmup_batches=LONG_WARMUP_BATCHES,
        join=join,
    )
    if join != "JOIN":  # (input declared finished: each row without a partner is written)
        exact = outer_exact(join, case.predicate, TWO_STREAM_ITEMS)
        case = replace(case, final=True, exact=exact)
    return replace(case, floor=workload == "long")


def _long(root: str, size: str) -> list[Case]:
    return [
        *(_long_case(root, size, "equi", w) for w in LONG_EQUI_WINDOWS),
        *(_long_case(root, size, kind, LONG_NON_EQUI_WINDOW) for kind in ("band", "theta")),
        _long_three(root, size),
        _long_grouped(root, size),
    ]


def _long_grouped(root: str, size: str) -> Case:
    """`long-equi-300s`'s join, its results counted per 10-second window of ``l.ts``: measured
    against that join alone (the same stream, state and matches; `report_targets`)."""
    join = _long_case(root, size, "equi", LONG_NON_EQUI_WINDOW)
    head, _, _ = join.job.partition("INSERT INTO")
    items = "count(*) AS n, sum(r.id - l.id) AS d, max(r.id) AS hi"
    job = (
        head
        + f"INSERT INTO out SELECT window.start AS ws, {items}\n"
        + f"FROM a l JOIN b r ON {join.predicate}\nGROUP BY window(l.ts, '10 seconds');\n"
    )
    bucket = "time_bucket(INTERVAL '10 seconds', l.ts)"
    exact = (
        f"SELECT {bucket} AS ws, {items} FROM a l JOIN b r ON {join.predicate} GROUP BY {bucket}"
    )
    return replace(
        join,
        name=f"long-groupby-{int(LONG_NON_EQUI_WINDOW)}s",
        job=job,
        peer=None,
        why_no_peer="measured against long-equi-300s, the same join without its GROUP BY",
        final=True,
        exact=exact,
        floor=False,
    )


def _long_three(root: str, size: str) -> Case:
    """`long`'s stream, a third stream beside it, and a three-way equi join within 5 minutes
    (``a ⋈ b ⋈ c`` on the key, each pair of neighbours within the window): about one result
    per row, against Spark's chained stream-stream joins."""
    shape, window = LONG_SHAPES[size], LONG_NON_EQUI_WINDOW
    reach = None if 2 * window >= shape.span_seconds else window
    keys = _keys(shape, reach)
    names = ("a", "b", "c")
    tables = two_streams(
        shape.rows, span_seconds=shape.span_seconds, keys=keys, x_range=X_RANGE, seed=7, names=names
    )
    name = f"long-3way-{int(window)}s"
    backlog = write_backlog(f"{root}/{name}", tables, dict.fromkeys(names, "ts"), shape.files)
    streams = "".join(
        _STREAM.format(name=n, wm=WATERMARK_SECONDS, path=backlog.streams[n]) for n in names
    )
    w = int(window)
    near = "{0}.ts BETWEEN {1}.ts - INTERVAL '{2}' SECOND AND {1}.ts + INTERVAL '{2}' SECOND"
    on_b, on_c = (
        f"r.k = l.k AND {near.format('r', 'l', w)}",
        f"s.k = r.k AND {near.format('s', 'r', w)}",
    )
    job = (
        streams
        + "CREATE SINK out WITH (format = 'parquet', path = '{out}');\n"
        + "INSERT INTO out SELECT l.id AS lid, r.id AS rid, s.id AS sid\n"
        + f"FROM a l JOIN b r ON {on_b} JOIN c s ON {on_c};\n"
    )
    exact = (
        "SELECT l.id AS lid, r.id AS rid, s.id AS sid FROM a l "
        f"JOIN b r ON {on_b} JOIN c s ON {on_c}"
    )
    return Case(
        name,
        job,
        "spark-native",
        backlog,
        window,
        f"{on_b} AND {on_c}",
        LONG_WARMUP_BATCHES,
        exact=exact,
    )


# `shapes`: `long`'s stream over each two-way shape the join operator serves, within 5 minutes
# and over the full history; `bandkey` is a band within few keys (`BAND_KEYS`), which Spark runs
# as an equi join on the key with the band as a residual; `or` an OR of equalities; `left-…` and
# `full-…` LEFT and FULL outer joins (which need a window). A theta join over the full history
# is left out: each batch meets every stored row (its cost is the delta times the whole state).
SHAPE_KINDS = (
    "equi",
    "bandkey",
    "band",
    "theta",
    "or",
    "left-equi",
    "full-equi",
    "left-band",
    "full-band",
)
SHAPE_HISTORY_KINDS = ("equi", "bandkey", "band", "or")
# Each shape with an equality or a band also within 10 s and 1 h: how its batch grows with the
# window, ours alone, both in one run (the stream spans 10 minutes of event time: a 1 h window
# keeps the whole history, as the full-history cases do beside their peers).
SHAPE_GROWTH_KINDS = tuple(k for k in SHAPE_KINDS if k != "theta")
SHAPE_SHORT_WINDOW, SHAPE_LONG_WINDOW = 10.0, 3600.0
# `product`: a predicate with no band of values and no key, `l.x * r.x > c`, within 10 s (within 5
# minutes a row would meet about 3/4 of the other stream: some 67 billion pairs a run); its peer
# is the foreachBatch join, and its figure the pairs its window reaches per CPU second.
PRODUCT_WINDOW = 10.0
# `shed`: the equi shape within 5 minutes under `overload = 'shed'`, with a budget of 40 % of a
# batch's work at the stream's mean rate (a probe and a pair found cost one each). Its skipped
# probes are counted exactly (`shed_count = 'exact'`: they probe and count their pairs, which
# costs what shedding saves, so its batch is an upper bound on a shedding batch's): its rows are
# checked against the exact result, none extra and as many missing as it counted.
SHED_SHARE = 0.4


def _shed_case(root: str, size: str) -> Case:
    equi = _long_case(root, size, "equi", LONG_NON_EQUI_WINDOW, "shapes")
    shape = LONG_SHAPES[size]
    per_batch = shape.rows / shape.files  # (rows a stream brings a batch)
    budget = max(1, round(SHED_SHARE * per_batch * (2 + MATCHES_PER_ROW)))
    options = f"overload = 'shed', budget = '{budget}', shed_count = 'exact'"
    job = equi.job.removesuffix(";\n") + f"\nWITH ({options});\n"
    name = equi.name.replace("-equi-", "-shed-")
    exact = f"SELECT {TWO_STREAM_ITEMS} FROM a l JOIN b r ON {equi.predicate}"
    return replace(equi, name=name, job=job, shed=True, exact=exact)


def _shapes(root: str, size: str) -> list[Case]:
    why = "ours alone: how our batch grows with the window (peers: the 5-minute cases)"
    growth = [
        replace(_long_case(root, size, k, w, "shapes"), peer=None, why_no_peer=why, alone=True)
        for w in (SHAPE_SHORT_WINDOW, SHAPE_LONG_WINDOW)
        for k in SHAPE_GROWTH_KINDS
    ]
    product = _long_case(root, size, "product", PRODUCT_WINDOW, "shapes")
    reached = f"SELECT count(*) FROM a l JOIN b r ON {_window(PRODUCT_WINDOW)}"
    return [
        *(_long_case(root, size, k, LONG_NON_EQUI_WINDOW, "shapes") for k in SHAPE_KINDS),
        *(_long_case(root, size, k, None, "shapes") for k in SHAPE_HISTORY_KINDS),
        replace(product, reached=reached),
        _shed_case(root, size),
        *growth,
    ]


# TPC-H scale factor and event-time span per size; line items arrive 1-7 ms after their order.
TPCH_SIZES = {"tiny": (0.001, 30.0, 3), "quick": (0.01, 60.0, 4), "full": (0.1, 300.0, 10)}
TPCH_PEERS = {"equi": "spark-native", "band": "spark-foreach"}
TINY_TPCH_ORDERKEY = 1200


def _tpch(root: str, size: str) -> list[Case]:
    from benchmarks.tpch import tpch_job, tpch_tables

    sf, span, files = TPCH_SIZES[size]
    tables = tpch_tables(sf, span_seconds=span)
    if size == "tiny":
        # The reference executor compares all pairs: keep the first orders only (scale 0.001
        # is dbgen's smallest) and their line items.
        tables = {
            n: t.filter(pc.less(t["orderkey"], TINY_TPCH_ORDERKEY)) for n, t in tables.items()
        }
    backlog = write_backlog(f"{root}/tpch", tables, {n: "ts" for n in tables}, files)
    return [
        Case(
            f"tpch-{q}",
            tpch_job(q, backlog.streams, "{out}", _FILES_PER_TRIGGER),
            TPCH_PEERS[q],
            backlog,
        )
        for q in ("equi", "band")
    ]


# Nexmark events (person : auction : bid = 1 : 3 : 46), files, and events per second of event
# time: tiny spans 20 s, so two of q8's 10 s windows, and the first closes before the input ends.
NEXMARK_SIZES = {
    "tiny": (4_000, 3, 200.0),
    "quick": (200_000, 4, 10_000.0),
    "full": (2_000_000, 10, 10_000.0),
}


def _nexmark(root: str, size: str) -> list[Case]:
    from benchmarks.nexmark import TIME_COLUMN, nexmark_tables
    from benchmarks.nexmark_queries import QUERIES, nexmark_job

    events, files, rate = NEXMARK_SIZES[size]
    tables = nexmark_tables(events, seed=1, events_per_second=rate)
    backlog = write_backlog(f"{root}/nexmark", tables, dict.fromkeys(tables, TIME_COLUMN), files)
    cases = []
    for q in QUERIES.values():
        job = nexmark_job(q.name, backlog.streams, "{out}", _FILES_PER_TRIGGER)
        peer = None if q.spark else "spark-native"
        case = Case(
            f"nexmark-{q.name}",
            job,
            peer,
            backlog,
            final=q.final,
            exact=q.exact,
            why_no_peer=q.spark or "",
            latest_by=q.latest_by,
            flink_exact=q.flink_exact,
        )
        cases.append(case)
    return cases


_FILES_PER_TRIGGER = {"maxFilesPerTrigger": "1"}

WORKLOADS: dict[str, Callable[[str, str], list[Case]]] = {
    "equi": _simple("equi"),
    "band": _simple("band"),
    "theta": _simple("theta"),
    "window-growth": _window_growth,
    "tpch": _tpch,
    "nexmark": _nexmark,
    "long": _long,
    "shapes": _shapes,
    "outer": _outer,
}
