"""The exact answer a workload's results are checked against (`benchmarks.harness`): a batch
join of the whole backlog in DuckDB, its size per query or its rows."""

from __future__ import annotations

import glob
import os
import re
import typing as t

if t.TYPE_CHECKING:
    from benchmarks.workloads import Case


def expected_counts(case: Case) -> dict[str, int] | None:
    """The exact result size of each query, from a batch join of the whole backlog in DuckDB;
    None for an outer join (a batch join writes every row without a partner; a stream, only
    those the watermark has passed when its input ends), and where DuckDB would join by a
    nested loop over billions of pairs, for hours (`_counted_without_a_nested_loop`). Such
    queries are checked by their peer, the foreachBatch join, which is itself a nested loop
    evaluating the predicate as written and decides outer rows as the stream does, and by the
    reference at tiny size."""
    from streamjoin.plan import plan_job
    from streamjoin.sql import parse_job

    job = parse_job(case.job.replace("{out}", "/dev/null"), case.name)
    if any(qp.query.outer is not None for qp in plan_job(job).queries):
        return None
    if job.group_queries or any(q.windowed is not None for q in job.queries):
        return None  # (groups: their rows are not the join's pairs)
    con = _over({s.name: str(s.option("path")) for s in job.streams})
    counts = {}
    for q in job.queries:
        tables = f"{q.left.stream} AS {q.left.alias} JOIN {q.right.stream} AS {q.right.alias}"
        n = _counted_without_a_nested_loop(con, tables, q.predicate)
        if n is None:
            return None
        counts[q.name] = n
    return counts


_NESTED_LOOPS = ("NESTED_LOOP_JOIN", "BLOCKWISE_NL_JOIN", "CROSS_PRODUCT")
COUNT_SECONDS = 600.0
"""A count given up (the query unchecked) past this long: a join DuckDB runs by ranges or by a
hash of few keys can still meet billions of pairs."""


def _counted_without_a_nested_loop(con: t.Any, tables: str, predicate: str) -> int | None:
    """The size of `tables` joined on `predicate` (Spark's SQL), or None where DuckDB would
    join some part of it by a nested loop, or its count takes over `COUNT_SECONDS`. So that
    it need not loop: a band ``abs(a - b) <= c`` is joined by the range of ``b`` around ``a``
    (`_ranged`), and an OR of conditions is counted by inclusion and exclusion, each part a
    join of its own (``|A ∨ B| = |A| + |B| − |A ∧ B|``)."""
    import threading

    import duckdb

    total = 0
    for sign, on in _signed_terms(_ranged(_parsed(predicate))):
        sql = f"SELECT count(*) FROM {tables} ON {_duckdb(on)}"
        plan = "\n".join(str(row[1]) for row in con.execute(f"EXPLAIN {sql}").fetchall())
        if any(op in plan for op in _NESTED_LOOPS):
            return None
        timer = threading.Timer(COUNT_SECONDS, con.interrupt)
        timer.start()
        try:
            row = con.execute(sql).fetchone()
        except duckdb.InterruptException:
            return None
        finally:
            timer.cancel()
        total += sign * (int(row[0]) if row else 0)
    return total


def _parsed(predicate: str) -> t.Any:
    import sqlglot

    return sqlglot.parse_one(predicate, read="spark")


def _duckdb(on: t.Any) -> str:
    text = str(on.sql(dialect="duckdb"))
    # sqlglot renders unix_seconds(t) as CAST(EPOCH(t) AS BIGINT), and DuckDB's cast rounds
    # where Spark's unix_seconds floors (measured: 83 of 112,913 Nexmark q8 pairs moved).
    return re.sub(r"CAST\(EPOCH\(([^()]*)\) AS BIGINT\)", r"CAST(FLOOR(EPOCH(\1)) AS BIGINT)", text)


def _ranged(on: t.Any) -> t.Any:
    """`on` with each ``abs(a - b) <= c`` (``<`` alike) kept, behind a range of ``b`` around
    ``a`` that DuckDB joins by: ``a - c`` and ``a + c`` widened by a billionth of the operands'
    size, since they round otherwise than ``a - b`` does for a pair on the band's edge (the
    band itself still decides it)."""
    from sqlglot import exp

    def band(node: exp.Expression) -> exp.Expression | exp.Condition:
        if isinstance(node, (exp.LTE, exp.LT)) and isinstance(node.this, exp.Abs):
            inner = node.this.this
            while isinstance(inner, exp.Paren):
                inner = inner.this
            if isinstance(inner, exp.Sub):
                a, b, c = inner.this, inner.expression, node.expression
                slack = exp.Mul(
                    this=exp.paren(
                        exp.Add(this=exp.Abs(this=a.copy()), expression=exp.Abs(this=c.copy()))
                    ),
                    expression=exp.Literal.number("1e-9"),
                )
                reach = exp.paren(exp.Add(this=c.copy(), expression=slack))
                return exp.and_(
                    exp.GTE(this=b.copy(), expression=exp.Sub(this=a.copy(), expression=reach)),
                    exp.LTE(
                        this=b.copy(), expression=exp.Add(this=a.copy(), expression=reach.copy())
                    ),
                    node.copy(),
                )
        return node

    return on.transform(band)


def _signed_terms(on: t.Any) -> list[tuple[int, t.Any]]:
    """`on` as conjunctions without OR, each with a sign: the sum of their counts, signed, is
    `on`'s count (inclusion and exclusion over the first OR among its conjuncts, then the
    parts' own)."""
    import itertools

    from sqlglot import exp

    conjuncts = list(on.flatten()) if isinstance(on, exp.And) else [on]
    conjuncts = [c.unnest() for c in conjuncts]
    ors = [c for c in conjuncts if isinstance(c, exp.Or)]
    if not ors:
        return [(1, on)]
    rest = [c for c in conjuncts if c is not ors[0]]
    parts = [p.unnest() for p in ors[0].flatten()]
    terms = []
    for size in range(1, len(parts) + 1):
        for chosen in itertools.combinations(parts, size):
            sign = 1 if size % 2 else -1
            term = exp.and_(*(c.copy() for c in [*chosen, *rest]))
            terms += [(sign * s, x) for s, x in _signed_terms(term)]
    return terms


_BAND = re.compile(r"abs\(l\.x - r\.x\) <= ([0-9.]+)")
"""A band on ``x`` in a two-stream job's ON condition (`workloads._predicates`), its width."""


def outer_exact(join: str, on: str, items: str) -> str:
    """DuckDB SQL of the whole answer of outer join `join` (``LEFT JOIN`` or ``FULL JOIN``) of
    streams ``a l`` and ``b r`` ON `on`, SELECT `items`, each stream's ``id`` unique: the pairs
    of the inner join, then each preserved row that no pair has, the other side's columns NULL.
    What a stream's run writes once its input is declared finished (``--final``), where every
    row still without a partner is written. The pairs of a band ``abs(l.x - r.x) <= c`` are
    found by buckets of width c, a left row in its bucket's neighbours too (DuckDB's plan of
    the band and the window's inequalities ran for more than 5 minutes on 300,000 rows a side);
    a band spelled otherwise is left to DuckDB's plan (right, but slow)."""
    inner = f"a l JOIN b r ON {on}"
    if band := _BAND.search(on):
        c = band.group(1)
        near = f"[floor(x / {c}) - 1, floor(x / {c}), floor(x / {c}) + 1]"
        inner = (
            f"(SELECT *, unnest({near}) AS _bk FROM a) l "
            f"JOIN (SELECT *, floor(x / {c}) AS _bk FROM b) r ON l._bk = r._bk AND {on}"
        )
    alone = [("a", "l", "b", "r", "_lid")]
    if join.upper().startswith("FULL"):
        alone.append(("b", "r", "a", "l", "_rid"))
    parts = ["SELECT * EXCLUDE (_lid, _rid) FROM _pairs"]
    for mine, m, other, o, paired in alone:
        parts.append(
            f"SELECT {items} FROM {mine} {m} LEFT JOIN (SELECT * FROM {other} WHERE false) {o} "
            f"ON false WHERE {m}.id NOT IN (SELECT {paired} FROM _pairs)"
        )
    pairs = f"SELECT l.id AS _lid, r.id AS _rid, {items} FROM {inner}"
    return f"WITH _pairs AS ({pairs}) " + " UNION ALL ".join(parts)


def exact_differences(
    exact: str,
    streams: t.Mapping[str, str],
    outs: t.Mapping[str, str],
    latest_by: t.Sequence[str] = (),
) -> tuple[int, dict[str, tuple[int, int]]]:
    """The size of DuckDB's answer to `exact` over the Parquet directories of `streams`, and per
    engine of `outs` (its output directory) the rows it lacks and the rows it has in excess,
    compared as multisets (``EXCEPT ALL`` both ways). With `latest_by`, the output is an
    updating result: only each key's row of the newest batch counts."""
    con = _over(streams)
    con.execute(f"CREATE TABLE exact AS {exact}")
    row = con.execute("SELECT count(*) FROM exact").fetchone()
    size = int(row[0]) if row else 0
    columns = _types(con, "exact")
    diffs = {}
    for engine, out in outs.items():
        files = glob.glob(os.path.join(out, "**", "*.parquet"), recursive=True)
        source = f"read_parquet({files!r}, hive_partitioning = {'true' if latest_by else 'false'})"
        got = f"SELECT * FROM {source}"
        if latest_by:
            newest = f"PARTITION BY {', '.join(latest_by)} ORDER BY batch DESC"
            ranked = f"SELECT *, row_number() OVER ({newest}) AS _rank FROM {source}"
            got = f"SELECT * EXCLUDE (batch, _rank) FROM ({ranked}) WHERE _rank = 1"
        if not files:
            got = "SELECT * FROM exact LIMIT 0"
        # By position, in the exact answer's column types (Spark may write other ones).
        con.execute(f"CREATE OR REPLACE TABLE got AS {got}")
        got_cols = [r[0] for r in con.execute("DESCRIBE got").fetchall()]
        if len(got_cols) != len(columns):
            diffs[engine] = (size, -1)
            continue
        cast = ", ".join(
            f'CAST("{g}" AS {kind}) AS "{c}"'
            for g, (c, kind) in zip(got_cols, columns, strict=True)
        )
        want, have = "SELECT * FROM exact", f"SELECT {cast} FROM got"
        counts = []
        for x, y in ((want, have), (have, want)):
            r = con.execute(f"SELECT count(*) FROM ({x} EXCEPT ALL {y})").fetchone()
            counts.append(int(r[0]) if r else 0)
        diffs[engine] = (counts[0], counts[1])
    con.close()
    return size, diffs


def counted(sql: str, streams: t.Mapping[str, str]) -> int:
    """DuckDB's one number `sql` over the Parquet directories of `streams`."""
    con = _over(streams)
    row = con.execute(sql).fetchone()
    con.close()
    return int(row[0]) if row else 0


def _over(streams: t.Mapping[str, str]) -> t.Any:
    """A DuckDB connection with each stream of `streams` a view of its Parquet directory."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    for name, path in streams.items():
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/*.parquet')")
    return con


def _types(con: t.Any, table: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in con.execute(f"DESCRIBE {table}").fetchall()]
