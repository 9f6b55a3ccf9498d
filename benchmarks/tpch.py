"""TPC-H tables as event streams (DuckDB's dbgen), and the equi and band join jobs.

TPC-H has no event time, so one is made up: orders arrive in o_orderkey order, evenly spread over
`span_seconds`, and each line item arrives ``l_linenumber`` milliseconds after its order. The
other tables (``customer``, ``part``, ``partsupp``, ``supplier``, on request) arrive in key order,
evenly spread over the same span: a row of one meets the orders or line items of its key only
where their times fall within a query's window. Dates become INT days since 1970-01-01 and
decimals DOUBLE, types every engine under test reads alike.

The job-file helpers (`schema`, `stream_ddl`, `job_text`) and `duckdb_count` live here and are
shared with `benchmarks.nexmark`; this module imports DuckDB only when it generates or counts.
"""

from __future__ import annotations

import glob
import os
import re
import typing as t
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)
WATERMARK_DELAY_SECONDS = 2
TS = pa.timestamp("us", tz="UTC")
ARROW_TYPES = {"BIGINT": pa.int64(), "INT": pa.int32(), "DOUBLE": pa.float64()}
ARROW_TYPES |= {"STRING": pa.string(), "BOOLEAN": pa.bool_(), "TIMESTAMP": TS}
_DDL_TYPES = {arrow: name for name, arrow in ARROW_TYPES.items()}
QuerySpec = tuple[tuple[str, ...], str, str]
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def schema(columns: str) -> pa.Schema:
    """An Arrow schema from ``"name TYPE, ..."`` in the job dialect's types."""
    pairs = (c.split() for c in columns.split(","))
    return pa.schema([(name, ARROW_TYPES[kind]) for name, kind in pairs])


def epoch_us(base_time: datetime | None) -> int:
    """Microseconds since 1970 of `base_time` (default `BASE_TIME`; naive means UTC), exactly."""
    base = base_time or BASE_TIME
    base = base if base.tzinfo else base.replace(tzinfo=UTC)
    return (base - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def stream_ddl(
    name: str,
    columns: pa.Schema,
    time_column: str,
    path: str,
    options: Mapping[str, str] | None = None,
    delay_seconds: int = WATERMARK_DELAY_SECONDS,
    key: Sequence[str] = (),
) -> str:
    """``CREATE STREAM`` of a Parquet directory with Arrow schema `columns` and a watermark
    (and ``PRIMARY KEY (key) NOT ENFORCED``, if given)."""
    parts = [f"{f.name} {_DDL_TYPES[f.type]}" for f in columns]
    parts.append(
        f"WATERMARK FOR {time_column} AS {time_column} - INTERVAL '{delay_seconds}' SECOND"
    )
    if key:
        parts.append(f"PRIMARY KEY ({', '.join(key)}) NOT ENFORCED")
    with_ = [("format", "parquet"), ("path", path), *(options or {}).items()]
    rendered = ", ".join(f"{_key(k)} = {_quote(v)}" for k, v in with_)
    return f"CREATE STREAM {name} ({', '.join(parts)})\n  WITH ({rendered});"


def job_text(title: str, ddl: Sequence[str], out: str, select: str) -> str:
    """A whole job: the streams, the Parquet sink ``out`` at directory `out`, one INSERT."""
    sink = f"CREATE SINK out WITH (format = 'parquet', path = {_quote(out)});"
    return "\n".join([f"-- {title}.", *ddl, sink, "", f"INSERT INTO out\n{select};", ""])


def duckdb_count(join: str, tables: Mapping[str, pa.Table]) -> int:
    """``SELECT count(*) FROM <join>`` in DuckDB, with the Arrow `tables` named as the streams."""
    import duckdb

    with duckdb.connect() as con:
        for name, table in tables.items():
            con.register(name, table)
        return int(con.execute(f"SELECT count(*) FROM {join}").fetchall()[0][0])


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _quote(key)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


ORDERS_SCHEMA = schema(
    "orderkey BIGINT, custkey BIGINT, orderstatus STRING, totalprice DOUBLE, orderdate INT,"
    " orderpriority STRING, ts TIMESTAMP"
)
LINEITEM_SCHEMA = schema(
    "orderkey BIGINT, partkey BIGINT, suppkey BIGINT, linenumber INT, quantity DOUBLE,"
    " extendedprice DOUBLE, discount DOUBLE, shipdate INT, shipmode STRING, shipinstruct STRING,"
    " ts TIMESTAMP"
)
ORDERS_SQL = """
SELECT o_orderkey::BIGINT AS orderkey, o_custkey::BIGINT AS custkey,
       o_orderstatus AS orderstatus, o_totalprice::DOUBLE AS totalprice,
       (o_orderdate - DATE '1970-01-01')::INTEGER AS orderdate, o_orderpriority AS orderpriority
FROM orders ORDER BY o_orderkey
"""
LINEITEM_SQL = """
SELECT l_orderkey::BIGINT AS orderkey, l_partkey::BIGINT AS partkey,
       l_suppkey::BIGINT AS suppkey, l_linenumber::INTEGER AS linenumber,
       l_quantity::DOUBLE AS quantity, l_extendedprice::DOUBLE AS extendedprice,
       l_discount::DOUBLE AS discount, (l_shipdate - DATE '1970-01-01')::INTEGER AS shipdate,
       l_shipmode AS shipmode, l_shipinstruct AS shipinstruct
FROM lineitem ORDER BY l_orderkey, l_linenumber
"""
# The other tables as streams: (schema, query in key order).
KEYED_TABLES: dict[str, tuple[pa.Schema, str]] = {
    "customer": (
        schema("custkey BIGINT, nationkey INT, acctbal DOUBLE, mktsegment STRING, ts TIMESTAMP"),
        "SELECT c_custkey::BIGINT AS custkey, c_nationkey::INTEGER AS nationkey,"
        " c_acctbal::DOUBLE AS acctbal, c_mktsegment AS mktsegment FROM customer"
        " ORDER BY c_custkey",
    ),
    "part": (
        schema("partkey BIGINT, brand STRING, size INT, retailprice DOUBLE, ts TIMESTAMP"),
        "SELECT p_partkey::BIGINT AS partkey, p_brand AS brand, p_size::INTEGER AS size,"
        " p_retailprice::DOUBLE AS retailprice FROM part ORDER BY p_partkey",
    ),
    "partsupp": (
        schema("partkey BIGINT, suppkey BIGINT, availqty BIGINT, supplycost DOUBLE, ts TIMESTAMP"),
        "SELECT ps_partkey::BIGINT AS partkey, ps_suppkey::BIGINT AS suppkey,"
        " ps_availqty::BIGINT AS availqty, ps_supplycost::DOUBLE AS supplycost FROM partsupp"
        " ORDER BY ps_partkey, ps_suppkey",
    ),
    "supplier": (
        schema("suppkey BIGINT, nationkey INT, acctbal DOUBLE, ts TIMESTAMP"),
        "SELECT s_suppkey::BIGINT AS suppkey, s_nationkey::INTEGER AS nationkey,"
        " s_acctbal::DOUBLE AS acctbal FROM supplier ORDER BY s_suppkey",
    ),
}


def tpch_connection(sf: float) -> t.Any:
    """A DuckDB connection holding the TPC-H tables at scale factor `sf`, generated offline."""
    import duckdb

    try:
        import duckdb_extension_tpch  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        found: list[str] = []
    else:
        where = os.path.dirname(duckdb_extension_tpch.__file__)
        found = glob.glob(os.path.join(where, "extensions", "*", "tpch.duckdb_extension"))
    if not found:
        msg = (
            "DuckDB's tpch extension is missing: install the package duckdb-extension-tpch "
            f"(pip install duckdb-extension-tpch=={duckdb.__version__})"
        )
        raise RuntimeError(msg)
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute("SET enable_progress_bar = false")  # dbgen draws one on stdout otherwise
    con.execute(f"LOAD '{found[0]}'")
    con.execute(f"CALL dbgen(sf={float(sf)!r})")
    return con


def tpch_tables(
    sf: float,
    *,
    span_seconds: float,
    base_time: datetime | None = None,
    extra: Sequence[str] = (),
) -> dict[str, pa.Table]:
    """``orders`` and ``lineitem`` at scale factor `sf`, each with the event-time column ``ts``,
    and the `extra` tables of `KEYED_TABLES` likewise.

    Order k (0-based, in o_orderkey order) of n happens at ``base + k / n * span_seconds``; its
    line items 1-7 ms later. Rows are in (order key, line number) order, so lineitem's ts is out
    of order by at most 7 ms. Row k of n of an extra table happens at ``base + k / n * span``.
    """
    if span_seconds <= 0:
        msg = "span_seconds must be > 0"
        raise ValueError(msg)
    unknown = [name for name in extra if name not in KEYED_TABLES]
    if unknown:
        msg = f"unknown TPC-H tables {unknown}; extra tables are {', '.join(KEYED_TABLES)}"
        raise ValueError(msg)
    with tpch_connection(sf) as con:
        orders = con.sql(ORDERS_SQL).to_arrow_table()
        lineitem = con.sql(LINEITEM_SQL).to_arrow_table()
        others = {name: con.sql(KEYED_TABLES[name][1]).to_arrow_table() for name in extra}
    order_ts = _spread(orders.num_rows, span_seconds, base_time)
    item_order = np.searchsorted(np.asarray(orders["orderkey"]), np.asarray(lineitem["orderkey"]))
    item_ts = order_ts[item_order] + np.asarray(lineitem["linenumber"]).astype(np.int64) * 1000
    tables = {
        "orders": orders.append_column("ts", pa.array(order_ts, TS)),
        "lineitem": lineitem.append_column("ts", pa.array(item_ts, TS)),
    }
    for name, table in others.items():
        ts = _spread(table.num_rows, span_seconds, base_time)
        tables[name] = table.append_column("ts", pa.array(ts, TS))
    return tables


def _spread(n: int, span_seconds: float, base_time: datetime | None) -> np.ndarray[t.Any, t.Any]:
    """Epoch microseconds of `n` events evenly spread over the span, the k-th at k / n of it."""
    # Multiply before dividing, so the last event stays below base + span.
    rank_us = np.arange(n, dtype=np.float64) * (span_seconds * 1e6) / max(n, 1)
    return epoch_us(base_time) + np.floor(rank_us).astype(np.int64)


# The band job's filters, tuned so that at sf=0.01 over 60 s its output is ~0.3x its input
# (with quantity > 45 it is ~0.04x). The output grows with the square of the rate (sf / span).
BAND_SHIPMODE = "TRUCK"
BAND_SHIPINSTRUCT = "NONE"
BAND_MIN_QUANTITY = 20
BAND_DAYS = 1
BAND_SECONDS = 5
EQUI_SECONDS = 10

# The join clauses serve both the job files and DuckDB's expected counts: INTERVAL arithmetic on
# timestamps and abs() mean the same in Spark SQL and DuckDB.
_QUERIES: dict[str, QuerySpec] = {
    # Items follow their order within 7 ms: the window is implied, and lets state expire.
    "equi": (
        ("orders", "lineitem"),
        "o.orderkey AS orderkey, o.totalprice AS totalprice, l.linenumber AS linenumber,"
        " l.extendedprice AS extendedprice",
        f"""orders o JOIN lineitem l
  ON l.orderkey = o.orderkey
 AND l.ts BETWEEN o.ts - INTERVAL '{EQUI_SECONDS}' SECOND
              AND o.ts + INTERVAL '{EQUI_SECONDS}' SECOND""",
    ),
    # A self-join, two aliases of one stream: items shipped within a day of each other.
    "band": (
        ("lineitem",),
        "l1.orderkey AS okey1, l1.linenumber AS line1, l2.orderkey AS okey2,"
        " l2.linenumber AS line2",
        f"""lineitem l1 JOIN lineitem l2
  ON abs(l1.shipdate - l2.shipdate) <= {BAND_DAYS}
 AND l2.ts BETWEEN l1.ts - INTERVAL '{BAND_SECONDS}' SECOND
               AND l1.ts + INTERVAL '{BAND_SECONDS}' SECOND
 AND l1.shipmode = '{BAND_SHIPMODE}' AND l2.shipinstruct = '{BAND_SHIPINSTRUCT}'
 AND l1.quantity > {BAND_MIN_QUANTITY}""",
    ),
}
QUERIES = tuple(_QUERIES)
_SCHEMAS = {"orders": ORDERS_SCHEMA, "lineitem": LINEITEM_SCHEMA}


def tpch_job(
    query: str,
    paths: Mapping[str, str],
    out: str,
    options: Mapping[str, str] | None = None,
) -> str:
    """The job file of TPC-H join `query` (``equi`` or ``band``) over Parquet directories.

    Args:
        query: which query.
        paths: directory of each stream the query reads (``orders``, ``lineitem``).
        out: directory of the Parquet sink ``out``.
        options: extra WITH options of every stream, e.g. ``{"maxFilesPerTrigger": "1"}``.
    """
    return query_job(f"TPC-H {query} join", _query(query), _SCHEMAS, "ts", paths, out, options)


def expected_count(query: str, tables: Mapping[str, pa.Table]) -> int:
    """The output rows of `query` over all of `tables`, by a batch join in DuckDB."""
    return duckdb_count(_query(query)[2], tables)


def _query(query: str) -> tuple[tuple[str, ...], str, str]:
    return lookup_query("TPC-H", _QUERIES, query)


def lookup_query(family: str, queries: Mapping[str, QuerySpec], query: str) -> QuerySpec:
    """(streams read, SELECT list, FROM … ON …) of `query`; ValueError naming the choices."""
    if query not in queries:
        msg = f"unknown {family} query {query!r}; expected one of {', '.join(queries)}"
        raise ValueError(msg)
    return queries[query]


def query_job(
    title: str,
    spec: QuerySpec,
    schemas: Mapping[str, pa.Schema],
    time_column: str,
    paths: Mapping[str, str],
    out: str,
    options: Mapping[str, str] | None,
) -> str:
    """The job file of one query `spec` over Parquet directories (shared with Nexmark)."""
    streams, select, join = spec
    ddl = [stream_ddl(s, schemas[s], time_column, paths[s], options) for s in streams]
    return job_text(title, ddl, out, f"SELECT {select}\nFROM {join}")
