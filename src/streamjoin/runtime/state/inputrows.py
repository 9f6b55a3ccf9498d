"""Spark's count of a micro-batch's input rows (`StreamingQueryProgress.numInputRows`, per
source too), made true whichever way the engine read the batch.

`foreachBatch` hands over one RDD of the micro-batch's plan: every Spark job that reads the
batch's DataFrame runs that plan's scans again, and each run adds its rows to the same scan
metrics, which Spark then reports as the batch's input rows. A batch whose statistics come from
its files' footers reads none for them (`count_input_rows` sets them); one whose state job reads
it once may read it again (its joins, for a stream not read back from its files, and its dead
letters), as may an index probe of the batch's own rows (`runtime.batch.indexed`), and
`settle_input_rows` sets the count back to the rows the batch read.

Both are called on the thread `foreachBatch` calls, whose query they find by Spark's local
property, with the session that started the query (a batch's DataFrame has a clone, whose
query manager does not list it). Where Spark's plan is not as they expect (a Spark whose
internals differ), they change nothing.
"""

from __future__ import annotations

import typing as t
from urllib.parse import unquote

from streamjoin.runtime.state.sourcefiles import bare_path

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import SparkSession

    from streamjoin.plan import JobPlan
    from streamjoin.runtime.state.nextmanifest import StreamStats


def _batch_leaves(spark: SparkSession) -> list[t.Any] | None:
    """The leaves (JVM objects) of the running micro-batch's executed plan, in plan order, but
    an empty relation's (the branch of the engine's observation: `with_observation`)."""
    query_id = spark.sparkContext.getLocalProperty("sql.streaming.queryId")
    query = spark.streams.get(query_id) if query_id else None
    if query is None:
        return None
    leaves = query._jsq.streamingQuery().lastExecution().executedPlan().collectLeaves()
    found = [leaves.apply(i) for i in range(leaves.size())]
    return [leaf for leaf in found if leaf.nodeName() != "LocalTableScan"]


def count_input_rows(spark: SparkSession, rows: Mapping[str, int]) -> bool:
    """Add each file's `rows` to the count of output rows of the scan that reads it in the
    running micro-batch's plan, which no job of the batch runs; False, changing nothing, when
    that plan's scans do not read exactly these files."""
    try:
        leaves = _batch_leaves(spark)
        if leaves is None:
            return False
        wanted = {bare_path(f): n for f, n in rows.items()}
        scans = []
        for leaf in leaves:
            if not leaf.nodeName().startswith("Scan"):
                continue
            # (Spark's names are URIs, percent-encoded; the logs' are decoded.)
            files = [bare_path(unquote(f)) for f in leaf.relation().location().inputFiles()]
            if any(f not in wanted for f in files):
                return False
            scans.append((leaf, files))
        if sorted(f for _, files in scans for f in files) != sorted(wanted):
            return False
        # Every metric first: a failure half-way would leave rows that the job then counts again.
        counts = [(leaf.metrics().apply("numOutputRows"), files) for leaf, files in scans]
        for metric, files in counts:
            metric.add(sum(wanted[f] for f in files))
    except Exception:  # (any py4j or JVM error: Spark's internals differ)
        return False
    return True


def settle_input_rows(spark: SparkSession, rows: Sequence[int]) -> bool:
    """Set the count of output rows of each scan of the running micro-batch's plan to `rows`
    (the input rows of each stream the batch read, in the order of the plan's union of
    streams), after the batch's jobs read it once or more; False, changing nothing, unless
    the plan has one scan per stream, each counting rows, and each read at least its rows."""
    try:
        leaves = _batch_leaves(spark)
        if leaves is None or len(leaves) != len(rows):
            return False
        metrics = []
        for leaf in leaves:
            found = leaf.metrics().get("numOutputRows")
            if not found.isDefined():
                return False
            metrics.append(found.get())
        counted = [int(m.value()) for m in metrics]
        if any(c < n for c, n in zip(counted, rows, strict=True)):
            return False  # (some read is not the one Spark counts: leave its figures alone)
        for metric, c, n in zip(metrics, counted, rows, strict=True):
            if c != n:
                metric.set(n)  # (a metric's `add` ignores a negative amount)
    except Exception:  # (any py4j or JVM error: Spark's internals differ)
        return False
    return True


def settle_reads(
    spark: SparkSession,
    plan: JobPlan,
    files: Mapping[str, Sequence[str]],
    stats: Mapping[str, StreamStats],
    *,
    reads: int,
) -> None:
    """After a batch whose state job or index probes read its DataFrame whole (`reads` times,
    a failed attempt's reads too; a probe's where its footers left the count to it): a second
    read, or the joins of a stream not read back from its `files` and the dead letters, count
    its rows again in Spark's input; set the count back to the rows the batch read (`stats`).
    One read alone is Spark's count already."""
    copied = any(sp.name not in files for sp in plan.streams)
    if reads > 1 or copied or any(s.late + s.malformed for s in stats.values()):
        read = [stats[sp.name] for sp in plan.streams]
        settle_input_rows(spark, [s.ok + s.late + s.malformed for s in read])
