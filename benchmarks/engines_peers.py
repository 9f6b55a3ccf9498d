"""The peers a benchmark measures our engine against (`benchmarks.engines`): Spark's native
stream-stream join (``spark-native``) and a foreachBatch join against kept rows
(``spark-foreach``), both on the job's own streams and sinks."""

from __future__ import annotations

import os
import typing as t

from benchmarks.engines_live import _await, _await_live, _trigger

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from benchmarks.engines_live import Live
    from streamjoin.model import GroupQuery, Job, Query, StreamDef
    from streamjoin.plan.outer import OuterPlan


def _out_path(job: Job, q: Query | GroupQuery) -> str:
    path = job.sink(q.sink).option("path")
    assert path is not None
    return path if len(job.outputs) == 1 else f"{path}/{q.name}"


def _stream_frame(spark: SparkSession, s: StreamDef) -> DataFrame:
    from streamjoin.runtime.sources import reader_options, schema_ddl

    df = (
        spark.readStream.format(s.format)
        .options(**reader_options(s))
        .schema(schema_ddl(s))
        .load(s.option("path"))
    )
    if s.watermark is not None:
        df = df.withWatermark(s.watermark.column, f"{s.watermark.delay_us} microseconds")
    return df


def _query_sql(q: Query, views: t.Mapping[str, str], *, outer: bool = False) -> str:
    """Spark SQL of query `q` over `views` (by alias); a multi-way join as chained joins in
    written order, each conjunct in the ON of the first join that binds its inputs (Spark's
    chained stream-stream joins). With `outer`, an outer join as one (Spark's native join);
    else its pairs only (the foreachBatch join adds the rows without a partner itself)."""
    import sqlglot

    from streamjoin.plan.classify import conjuncts

    select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
    sides = q.sides
    if len(sides) == 2:
        left, right = sides
        kind, on, where = "", q.predicate, ""
        if outer and q.outer is not None:
            kind, on = f"{q.outer.kind.upper()} OUTER ", q.outer.on
            where = f" WHERE {q.outer.where}" if q.outer.where else ""
        return (
            f"SELECT {select} FROM {views[left.alias]} AS {left.alias} "
            f"{kind}JOIN {views[right.alias]} AS {right.alias} ON ({on}){where}"
        )
    position = {s.alias.lower(): i for i, s in enumerate(sides)}
    ons: list[list[str]] = [[] for _ in sides]
    for node in conjuncts(sqlglot.parse_one(q.predicate, dialect="spark")):
        named = [position[c.table.lower()] for c in node.find_all(sqlglot.exp.Column)]
        ons[max([1, *named])].append(f"({node.sql(dialect='spark')})")
    joins = "".join(
        f" JOIN {views[s.alias]} AS {s.alias} ON {' AND '.join(ons[i]) or 'TRUE'}"
        for i, s in enumerate(sides)
        if i > 0
    )
    return f"SELECT {select} FROM {views[sides[0].alias]} AS {sides[0].alias}{joins}"


def _unmatched_sql(op: OuterPlan, before: int | None, now: int) -> list[str]:
    """The foreachBatch peer's rows without a partner: per preserved side, its kept and new
    rows that the watermark moving from `before` to `now` decides, anti-joined with the other
    side's kept and new rows, the other side's columns NULL."""
    q, out = op.query, []
    for i in (0, 1):
        if not op.outer.preserves(i):
            continue
        lo, hi = op.dead_below(i, before), op.dead_below(i, now)
        assert hi is not None
        mine, other = q.sides[i], q.sides[1 - i]
        m, o = mine.alias, other.alias
        ts = f"unix_micros({m}.ts)"
        bounds = f"{ts} < {hi}" + (f" AND {ts} >= {lo}" if lo is not None else "")
        rows = f"(SELECT * FROM old_{mine.stream} UNION ALL SELECT * FROM new_{mine.stream})"
        partners = f"(SELECT * FROM old_{other.stream} UNION ALL SELECT * FROM new_{other.stream})"
        select = ", ".join(f"{item.sql} AS `{item.alias}`" for item in q.select)
        sql = (
            f"SELECT {select} FROM (SELECT {m}.* FROM {rows} AS {m} LEFT ANTI JOIN {partners} "
            f"AS {o} ON ({op.outer.on}) WHERE {bounds}) AS {m} "
            f"LEFT JOIN (SELECT * FROM {partners} WHERE false) AS {o} ON false"
        )
        out.append(sql + (f" WHERE {op.outer.where}" if op.outer.where else ""))
    return out


def _run_native(
    spark: SparkSession, job: Job, workdir: str, time_limit: float | None, live: Live | None
) -> bool:
    from streamjoin.plan.groups import spark_sql

    queries = []
    for q in job.queries:
        views = {}
        for side in q.sides:
            view = f"native_{q.name}_{side.alias}"
            _stream_frame(spark, job.stream(side.stream)).createOrReplaceTempView(view)
            views[side.alias] = view
        out = spark.sql(_query_sql(q, views, outer=True))
        queries.append(_start_parquet(out, _out_path(job, q), workdir, q.name, live))
    for g in job.group_queries:
        views = {}
        for stream in g.streams:
            views[stream] = f"native_{g.name}_{stream}"
            _stream_frame(spark, job.stream(stream)).createOrReplaceTempView(views[stream])
        out = spark.sql(spark_sql(g, views))
        queries.append(_start_parquet(out, _out_path(job, g), workdir, g.name, live))
    return _await(queries, time_limit) if live is None else _await_live(queries, workdir, live)


def _start_parquet(
    out: DataFrame, path: str, workdir: str, name: str, live: Live | None
) -> StreamingQuery:
    """Spark's own streaming query writing `out` to the Parquet directory `path`."""
    writer = out.writeStream.format("parquet").option("path", path)
    writer = writer.option("checkpointLocation", os.path.join(workdir, "ckpt", name))
    return t.cast("StreamingQuery", _trigger(writer, live).start())


def _run_foreach(
    spark: SparkSession, job: Job, workdir: str, time_limit: float | None, live: Live | None
) -> bool:
    """The straightforward foreachBatch join: every batch's new rows joined with all kept rows
    (within the largest window any query needs), then appended to the kept rows."""
    from pyspark.sql import functions as F

    from streamjoin.plan import plan_job

    plan = plan_job(job)
    frames = []
    for i, sp in enumerate(plan.streams):
        df = _stream_frame(spark, sp.stream)
        cols = [F.col(c.name).alias(f"{sp.name}__{c.name}") for c in sp.stream.columns]
        frames.append(df.select(F.lit(i).alias("_src"), *cols))
    union = frames[0]
    for f in frames[1:]:
        union = union.unionByName(f, allowMissingColumns=True)
    kept = os.path.join(workdir, "kept")
    stream_wm: dict[str, int] = {}
    horizon: dict[str, int] = {}
    marks: list[int | None] = [None]
    """The global watermark after the last batch."""

    def batch(df: DataFrame, batch_id: int) -> None:
        s = df.sparkSession
        df.persist()
        new = {}
        for i, sp in enumerate(plan.streams):
            cols = [F.col(f"{sp.name}__{c.name}").alias(c.name) for c in sp.stream.columns]
            new[sp.name] = df.where(F.col("_src") == i).select(*cols)
            new[sp.name].createOrReplaceTempView(f"new_{sp.name}")
            path = os.path.join(kept, sp.name)
            old = (
                s.read.parquet(path)
                if os.path.exists(path)
                else s.createDataFrame([], new[sp.name].schema)
            )
            ts = sp.stream.event_time
            if sp.name in horizon and ts is not None:
                # Rows no future row can join are filtered out (the kept table only grows).
                old = old.where(F.col(ts) >= F.expr(f"timestamp_micros({horizon[sp.name]})"))
            old.createOrReplaceTempView(f"old_{sp.name}")
        for q in job.queries:
            (la, lv), (ra, rv) = ((x.alias, x.stream) for x in (q.left, q.right))
            both = f"(SELECT * FROM old_{rv} UNION ALL SELECT * FROM new_{rv})"
            parts = [
                _query_sql(q, {la: f"new_{lv}", ra: both}),
                _query_sql(q, {la: f"old_{lv}", ra: f"new_{rv}"}),
            ]
            s.sql(" UNION ALL ".join(f"({p})" for p in parts)).write.mode("append").parquet(
                _out_path(job, q)
            )
        for sp in plan.streams:
            new[sp.name].write.mode("append").parquet(os.path.join(kept, sp.name))
            wm = sp.stream.watermark
            if wm is not None:
                hi = new[sp.name].agg(F.max(F.unix_micros(F.col(wm.column)))).first()
                if hi is not None and hi[0] is not None:
                    mark = int(hi[0]) - wm.delay_us
                    stream_wm[sp.name] = max(stream_wm.get(sp.name, mark), mark)
        timed = [sp for sp in plan.streams if sp.stream.watermark is not None]
        if timed and all(sp.name in stream_wm for sp in timed):
            global_wm = max(min(stream_wm[sp.name] for sp in timed), marks[0] or -(2**62))
            for op in plan.outers:
                # The preserved rows the new watermark decides, without a partner.
                for sql in _unmatched_sql(op, marks[0], global_wm):
                    s.sql(sql).write.mode("append").parquet(_out_path(job, op.query))
            marks[0] = global_wm
            for sp in plan.streams:
                h = sp.horizon(global_wm)
                if h is not None:
                    horizon[sp.name] = h
        df.unpersist()

    query = _trigger(
        union.writeStream.foreachBatch(batch).option(
            "checkpointLocation", os.path.join(workdir, "ckpt", "foreach")
        ),
        live,
    ).start()
    return _await([query], time_limit) if live is None else _await_live([query], workdir, live)
