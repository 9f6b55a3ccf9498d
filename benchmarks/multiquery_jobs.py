"""The queries of the ``multiquery`` benchmark: TPC-H streams, templates, job texts, exact counts.

Streams: ``customer``, ``orders``, ``lineitem``, ``part``, ``partsupp`` and ``supplier`` of
DuckDB's dbgen (`benchmarks.tpch.tpch_tables`), each with event time ``ts`` and a watermark 2 s
behind it, written as a backlog of aligned Parquet files (`benchmarks.data.write_backlog`; file
i of every stream is micro-batch i).

Queries: N three-relation joins from four templates whose sub-joins overlap:

- ``col``: customer ⋈ orders ⋈ lineitem, filtered on ``c.acctbal``;
- ``olp``: orders ⋈ lineitem ⋈ partsupp, filtered on ``ps.availqty``;
- ``ols``: orders ⋈ lineitem ⋈ supplier, filtered on ``s.acctbal``;
- ``lpp``: lineitem ⋈ partsupp ⋈ part, filtered on ``p.size``.

orders ⋈ lineitem is common to three templates and lineitem ⋈ partsupp to two. Every pair of
inputs is joined on its TPC-H key and on a time range ``y.ts BETWEEN x.ts - W AND x.ts + W``,
written the same way (same aliases, same order) in every template, so that equal sub-joins are
equal predicates to the optimizer. Query i uses template ``i mod 4`` and variant ``v = i // 4``:
the filter on the template's third relation keeps a fraction of its value range that differs
for each of the first 25 variants, and the select list alternates between two, so no two
queries are the same; the filter sits on the relation outside the shared sub-join.

Each query writes its own Parquet sink ``mq<i>``. The exact result size of each query is a
batch join of the whole backlog in DuckDB (the backlog has no late rows).
"""

from __future__ import annotations

import os
import typing as t
from dataclasses import dataclass

from benchmarks.data import write_backlog
from benchmarks.tpch import KEYED_TABLES, LINEITEM_SCHEMA, ORDERS_SCHEMA, stream_ddl

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pyarrow as pa

    from benchmarks.data import Backlog


@dataclass(frozen=True)
class Size:
    """One size of the benchmark: TPC-H scale factor, event-time span, files (= batches), the
    time-range half-width W of every pair, and the query counts run by default."""

    sf: float
    span_seconds: float
    files: int
    window_seconds: int
    queries: tuple[int, ...]


SIZES = {
    "tiny": Size(0.001, 30.0, 2, 10, (3,)),
    "quick": Size(0.01, 60.0, 4, 10, (10,)),
    "full": Size(0.01, 120.0, 6, 10, (10, 50, 100)),
}
STREAMS = ("customer", "orders", "lineitem", "part", "partsupp", "supplier")
ALIASES = {"customer": "c", "orders": "o", "lineitem": "l", "part": "p", "partsupp": "ps"}
ALIASES |= {"supplier": "s"}
_SCHEMAS: dict[str, pa.Schema] = {"orders": ORDERS_SCHEMA, "lineitem": LINEITEM_SCHEMA}
_SCHEMAS |= {name: spec[0] for name, spec in KEYED_TABLES.items()}


@dataclass(frozen=True)
class Template:
    """A three-relation join: its streams (in written order), the ON clause of the second and
    third (``{W}`` is the window), the filtered column of the third, its value range and the
    decimals of its bounds, and two select lists."""

    name: str
    streams: tuple[str, str, str]
    on: tuple[str, str]
    column: str
    low: float
    high: float
    digits: int
    selects: tuple[str, str]


def _w(x: str, y: str) -> str:
    return f"{y}.ts BETWEEN {x}.ts - INTERVAL '{{W}}' SECOND AND {x}.ts + INTERVAL '{{W}}' SECOND"


_OL = f"l.orderkey = o.orderkey AND {_w('o', 'l')}"
_LPS = f"ps.partkey = l.partkey AND ps.suppkey = l.suppkey AND {_w('l', 'ps')}"
TEMPLATES = (
    Template(
        "col",
        ("customer", "orders", "lineitem"),
        (f"o.custkey = c.custkey AND {_w('c', 'o')}", _OL),
        "c.acctbal",
        -999.99,
        9999.99,
        2,
        (
            "c.custkey AS custkey, o.orderkey AS orderkey, l.linenumber AS linenumber",
            "c.mktsegment AS segment, o.totalprice AS totalprice, l.extendedprice AS price",
        ),
    ),
    Template(
        "olp",
        ("orders", "lineitem", "partsupp"),
        (_OL, _LPS),
        "ps.availqty",
        1,
        9999,
        0,
        (
            "o.orderkey AS orderkey, l.linenumber AS linenumber, ps.suppkey AS suppkey",
            "o.orderdate AS orderdate, l.quantity AS quantity, ps.supplycost AS cost",
        ),
    ),
    Template(
        "ols",
        ("orders", "lineitem", "supplier"),
        (_OL, f"s.suppkey = l.suppkey AND {_w('l', 's')}"),
        "s.acctbal",
        -999.99,
        9999.99,
        2,
        (
            "o.orderkey AS orderkey, l.linenumber AS linenumber, s.suppkey AS suppkey",
            "o.orderpriority AS priority, l.discount AS discount, s.nationkey AS nation",
        ),
    ),
    Template(
        "lpp",
        ("lineitem", "partsupp", "part"),
        (_LPS, f"p.partkey = ps.partkey AND {_w('ps', 'p')}"),
        "p.size",
        1,
        50,
        0,
        (
            "l.orderkey AS orderkey, l.linenumber AS linenumber, p.partkey AS partkey",
            "l.shipmode AS shipmode, ps.availqty AS availqty, p.brand AS brand",
        ),
    ),
)


@dataclass(frozen=True)
class QuerySpec:
    """Query `index` of a run: its sink (``mq<index>``), template, streams and SQL parts."""

    index: int
    template: str
    streams: tuple[str, ...]
    joins: str
    filter: str
    select: str

    @property
    def sink(self) -> str:
        """The name of the query's sink, which also names it in every report."""
        return f"mq{self.index:03d}"

    def insert(self) -> str:
        """``INSERT INTO mq<i> SELECT ... FROM ... WHERE <filter>``."""
        return (
            f"INSERT INTO {self.sink}\nSELECT {self.select}\nFROM {self.joins}\n"
            f"WHERE {self.filter};"
        )


def query_specs(n: int, window_seconds: int) -> list[QuerySpec]:
    """The first `n` queries (see the module docstring)."""
    specs = []
    for i in range(n):
        tpl, v = TEMPLATES[i % len(TEMPLATES)], i // len(TEMPLATES)
        # 7 is prime to 25: the first 25 variants keep 25 distinct fractions, 1.0 down to 0.23.
        keep = 1.0 - ((v * 7) % 25) / 31
        bound = tpl.high - keep * (tpl.high - tpl.low)
        value = f"{bound:.{tpl.digits}f}"
        a, b, c = (ALIASES[s] for s in tpl.streams)
        on1, on2 = (x.replace("{W}", str(window_seconds)) for x in tpl.on)
        joins = (
            f"{tpl.streams[0]} {a} JOIN {tpl.streams[1]} {b} ON {on1} "
            f"JOIN {tpl.streams[2]} {c} ON {on2}"
        )
        specs.append(
            QuerySpec(
                i, tpl.name, tpl.streams, joins, f"{tpl.column} >= {value}", tpl.selects[v % 2]
            )
        )
    return specs


def make_backlog(root: str, size: str) -> Backlog:
    """The TPC-H streams at `size`, written under `root` (one folder per stream)."""
    from benchmarks.tpch import tpch_tables

    s = SIZES[size]
    extra = [name for name in STREAMS if name in KEYED_TABLES]
    tables = tpch_tables(s.sf, span_seconds=s.span_seconds, extra=extra)
    return write_backlog(os.path.join(root, "data"), tables, dict.fromkeys(tables, "ts"), s.files)


def job_text(specs: Sequence[QuerySpec], paths: Mapping[str, str], out: str) -> str:
    """One job running `specs`: the streams they read (one file per batch), one Parquet sink
    per query under directory `out`."""
    used = [s for s in STREAMS if any(s in spec.streams for spec in specs)]
    options = {"maxFilesPerTrigger": "1"}
    ddl = [stream_ddl(s, _SCHEMAS[s], "ts", paths[s], options) for s in used]
    sinks = [
        f"CREATE SINK {spec.sink} WITH (format = 'parquet', path = "
        f"'{os.path.join(out, spec.sink)}');"
        for spec in specs
    ]
    title = f"-- multiquery: {len(specs)} three-relation joins over TPC-H streams."
    return "\n".join([title, *ddl, *sinks, "", *(spec.insert() for spec in specs), ""])


def exact_counts(specs: Sequence[QuerySpec], paths: Mapping[str, str]) -> dict[str, int]:
    """Each query's result size by a batch join of the whole backlog in DuckDB, by sink."""
    import duckdb
    import sqlglot

    counts = {}
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        for name, path in paths.items():
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/*.parquet')")
        for spec in specs:
            sql = f"SELECT count(*) FROM {spec.joins} WHERE {spec.filter}"
            duck = sqlglot.transpile(sql, read="spark", write="duckdb")[0]
            row = con.execute(duck).fetchone()
            counts[spec.sink] = int(row[0]) if row else 0
    return counts


def probe_loads(
    specs: Sequence[QuerySpec], paths: Mapping[str, str], rates: Mapping[str, float]
) -> dict[str, t.Any]:
    """CLASH's predicted probe load (tuples sent per batch) of the N queries: the global plan,
    the same orders with nothing shared, and each query planned alone (summed).

    ``default``: the statistics the engine starts with (every stream the same rate), i.e. the
    plan `plan_job` gives and the engine runs until an epoch's rates re-plan it; ``backlog``:
    the backlog's rows per batch as rates.
    """
    from streamjoin.plan import plan_job
    from streamjoin.plan.clash import plan_clash
    from streamjoin.plan.multiway import pair_parts
    from streamjoin.sql import parse_job

    def parse(chosen: Sequence[QuerySpec]) -> t.Any:
        return parse_job(job_text(chosen, paths, "/dev/null"), "<multiquery>")

    job = parse(specs)
    out: dict[str, t.Any] = {}
    for label, given in (("default", None), ("backlog", rates)):
        queries = list(job.queries)
        whole = plan_clash(job, queries, {q.name: pair_parts(job, q) for q in queries}, rates=given)
        alone = 0.0
        for spec in specs:
            one = parse([spec])
            q = one.queries[0]
            planned = plan_clash(one, [q], {q.name: pair_parts(one, q)}, rates=given)
            alone += planned.plan.load if planned is not None else 0.0
        if whole is None:
            continue
        report = whole.plan.report
        out[label] = {
            "global": round(whole.plan.load, 1),
            "unshared": round(whole.plan.unshared_load, 1),
            "alone": round(alone, 1),
            "alone_over_global": round(alone / whole.plan.load, 2) if whole.plan.load else None,
            "shared_steps": len(whole.plan.shared),
            "left_out": dict(whole.left_out),
            "ilp": None
            if report is None
            else {
                "variables": report.variables,
                "constraints": report.constraints,
                "status": report.status,
                "solve_seconds": round(report.solve_seconds, 3),
            },
        }
    # What the engine plans by itself at start (must equal "default").
    clash = plan_job(job).clash
    out["engine_start_load"] = round(clash.plan.load, 1) if clash is not None else None
    return out
