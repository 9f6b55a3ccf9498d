"""Spark's analysis of a job's queries on empty inputs, before its stream starts: a mistake only
Spark can see (an unknown function, say) is reported at the query's line of the job file."""

from __future__ import annotations

import typing as t

from streamjoin.errors import JobError
from streamjoin.plan.aggregate import plan_aggregate
from streamjoin.plan.physical import window_lag
from streamjoin.plan.rollup import RollupPlan
from streamjoin.runtime.sources import empty_relation

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.model import GroupQuery, Job, Query
    from streamjoin.plan import JobPlan
    from streamjoin.plan.groups import GroupQueryPlan

__all__ = ["check_job", "check_query"]


def check_job(spark: SparkSession, job: Job, plan: JobPlan) -> None:
    """Let Spark analyse every query of `job` (planned as `plan`) on empty inputs.

    Raises:
        JobError: Spark rejects a query, at its INSERT INTO in the job's file.
    """
    for q in job.queries:
        check_query(spark, job, q)
    for gp in plan.group_queries:
        _analyse(spark, _group_query_sql(job, gp), gp.query.name, gp.query, job.source)


def check_query(spark: SparkSession, job: Job, q: Query, source: str | None = None) -> None:
    """Let Spark analyse query `q` of `job` on empty inputs.

    Raises:
        JobError: Spark rejects it, at the query's INSERT INTO in `source` (default: the
            job's file).
    """
    # Each input is an empty relation of the stream's declared columns, inline in the one
    # SQL text: one analysis, no temp views.
    inputs = ", ".join(
        f"({empty_relation(job.stream(side.stream))}) AS {side.alias}" for side in q.sides
    )
    windowed = None
    if q.windowed is not None:  # (its join, then its groups over the join's columns)
        windowed = plan_aggregate(q, window_lag(job, q), job.source)
    join = windowed.join_query() if windowed else q
    select = ", ".join(f"{i.sql} AS `{i.alias}`" for i in join.select)
    sql = f"SELECT {select} FROM {inputs} WHERE ({q.predicate})"
    if windowed is not None:
        sql = windowed.group_sql(f"({sql})", None, None)
    if q.rollup is not None:  # (its partials of the groups, merged, then its values)
        rp = RollupPlan(q)
        items = ", ".join(f"`{i.alias}`" for i in q.select)  # (not the window's end)
        groups = f"(SELECT {items} FROM ({sql}))"
        partial = f"({rp.partial_sql(groups)})"
        sql = rp.output_sql(f"({rp.merge_sql(None, partial)})", partial)
    _analyse(spark, sql, q.name, q, source or job.source)


def _analyse(spark: SparkSession, sql: str, name: str, q: Query | GroupQuery, source: str) -> None:
    """Let Spark analyse `sql`, query `name`'s SQL over empty inputs.

    Raises:
        JobError: Spark rejects it, at the query's INSERT INTO in `source`.
    """
    try:
        spark.sql(sql).schema  # noqa: B018 - forces analysis
    except Exception as err:  # Spark's AnalysisException and friends
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        msg = f"Spark rejects query {name}: {first}"
        text = "INSERT INTO " + q.sink
        raise JobError(msg, line=q.line, col=1, text=text, source=source) from None


def _group_query_sql(job: Job, gp: GroupQueryPlan) -> str:
    """A group query's SQL over empty inputs: each input's buffered rows, their groups, then
    the query's rows (with its stream's, when it joins them)."""
    groups = []
    for i, group in enumerate(gp.query.inputs):
        rows = gp.rows_sql(i, f"({empty_relation(job.stream(group.stream))})")
        grouped = gp.inputs[i].group_sql(f"({rows})", None, None)
        items = ", ".join(f"`{i.alias}`" for i in group.select)  # (not the window's end)
        groups.append(f"(SELECT {items} FROM ({grouped}))")
    mine = gp.query.rows
    stream = None if mine is None else f"({empty_relation(job.stream(mine.stream))})"
    return gp.output_sql(tuple(groups), stream)
