"""Each batch's figures in Spark's own progress: `StreamingQueryProgress.observedMetrics`.

Spark reports a micro-batch's observed metrics from the `observe` nodes of the batch's plan,
after `foreachBatch` returns. The engine's figures are not aggregates of the input rows (it
reads a batch's input several times, or not at all, and computes its figures in jobs of its
own), so the stream carries one `observe` named ``streamjoin`` whose columns are typed NULLs
(`observed_columns`), on a branch of the stream that no row reaches where the driver has
streamjoin's jar (`with_observation`); once the batch is committed, `publish` sets that
node's accumulator to the batch's figures, and Spark's progress, its listeners and anything
that reads them report the figures with the batch.

`publish` runs on the thread `foreachBatch` calls, whose query it finds by Spark's local
property (as `runtime.state.inputrows` does). Where Spark's plan or accumulator is not as it
expects (a Spark whose internals differ), it changes nothing and says so once.

Where the driver has streamjoin's jar, `publish` also sets the figures' numbers as the gauges of
a source named ``streamjoin`` in Spark's metrics system (``FiguresSource.java``), in the
engine's own loop too, so that Spark's metrics sinks (JMX, its Prometheus servlet, ...) report
them.
"""

from __future__ import annotations

import json
import struct
import sys
import typing as t

from py4j.java_gateway import JavaClass
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamjoin.runtime.jvm.statics import StaticMethods

if t.TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

    from streamjoin.runtime.metrics.record import BatchFigures

OBSERVED = "streamjoin"
"""The name of the figures in `StreamingQueryProgress.observedMetrics`."""

_LONGS = (
    "batch",
    "rows_in",
    "rows_out",
    "late",
    "malformed",
    "state_rows",
    "state_bytes",
    "shed_rows",
)
_DOUBLES = ("seconds", "latency", "watermark_lag")
FIELDS = (*_LONGS, *_DOUBLES, "figures")
"""The columns of the observed row, in order; ``figures`` is the batch's whole record as JSON
(one line of ``batches.jsonl``)."""
KINDS = ",".join(f"{f}:{'L' if f in _LONGS else 'D' if f in _DOUBLES else 'S'}" for f in FIELDS)
"""`FIELDS` with their kinds, as ``FiguresSource.java`` takes them: its gauges in Spark's
metrics system (the numbers)."""


def observed_columns() -> list[Column]:
    """The aggregates of the stream's ``streamjoin`` observation: NULL whatever rows pass (the
    greatest of NULLs), set by `publish`."""
    types = {**dict.fromkeys(_LONGS, "bigint"), **dict.fromkeys(_DOUBLES, "double")}
    types["figures"] = "string"
    return [F.expr(f"max(CAST(NULL AS {types[f]}))").alias(f) for f in FIELDS]


def figures_class(spark: SparkSession) -> t.Any | None:
    """The JVM's `ProgressFigures` class where the driver has streamjoin's jar, else None."""
    jvm = spark.sparkContext._jvm
    found = jvm.streamjoin.loop.ProgressFigures if jvm is not None else None
    return found if isinstance(found, JavaClass) else None  # (py4j: a package, if no class)


def with_observation(stream: DataFrame) -> DataFrame:
    """`stream` with the ``streamjoin`` observation in its plan. Where the driver has
    streamjoin's jar it is on a branch of a union that no row reaches (a stream of no rows):
    the rows that pass an observation each update its aggregates, and each task generates their
    code again (a tenth of a small batch's task), for values that `publish` replaces anyway."""
    helper = figures_class(stream.sparkSession)
    if helper is None:
        return stream.observe(OBSERVED, *observed_columns())
    empty = DataFrame(helper.emptyStream(stream._jdf), stream.sparkSession)
    return stream.unionByName(empty.observe(OBSERVED, *observed_columns()))


def values(figures: BatchFigures) -> dict[str, t.Any]:
    """The observed row of `figures`, by field: the totals of `BatchFigures.flat`."""
    flat = figures.flat()
    shed = sum(n for per in figures.shed.values() for d, n in per.items() if "." not in d)
    own = {
        "shed_rows": shed,
        "seconds": float(figures.seconds),
        "figures": json.dumps(figures.to_dict(), sort_keys=True),
    }
    return {f: own[f] if f in own else flat[f] for f in FIELDS}


class ProgressPublisher:
    """Puts each batch's figures into its `StreamingQueryProgress` (`publish`): in one call
    into the JVM where the driver has streamjoin's jar (`runtime.jvm`), else in about 15."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        """The session that starts the stream (a batch's clone does not list the query)."""
        self.failed: str | None = None
        """Why the figures are not published (None: they are)."""
        self._streams: dict[str, t.Any] = {}
        """Spark's `StreamExecution` of each query id seen."""
        self._classes: tuple[t.Any, t.Any] | None = None
        self._last_attempt: bool | None = None
        """Whether Spark's accumulators keep each read's value (None: not known yet)."""
        self._figures: t.Any = None
        """The JVM's `ProgressFigures` class (False: not on the driver's class path)."""

    def publish(self, figures: BatchFigures) -> bool:
        """Set the ``streamjoin`` observation of the running micro-batch's plan (the query this
        thread runs) to `figures`; False when it could not be."""
        if self.failed is not None:
            return False
        try:
            encoded = unsafe_row(values(figures))
            helper = self._helper()
            if helper is not None:  # (one call into the JVM)
                session = self.spark._jsparkSession
                return bool(helper.publish(session, OBSERVED, encoded, len(FIELDS), KINDS))
            return self._publish(encoded)
        except Exception as err:  # (any py4j or JVM error: Spark's internals differ)
            self.failed = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
            print(
                f"streamjoin: the figures are not put in Spark's progress ({self.failed})",
                file=sys.stderr,
            )
            return False

    def _helper(self) -> t.Any | None:
        """The JVM's `ProgressFigures` class where the driver has streamjoin's jar, else None;
        looked up once."""
        if self._figures is None:
            found = figures_class(self.spark)
            self._figures = False if found is None else StaticMethods(found)
        return self._figures or None

    def _publish(self, encoded: bytes) -> bool:
        """`publish`'s steps from Python, for a driver without streamjoin's jar."""
        node = self._observation()
        if node is None:
            return False
        if self._classes is None:
            # (Each step of a dotted name is a call into the JVM: looked up once.)
            jvm = self.spark.sparkContext._jvm
            assert jvm is not None  # (a classic session's driver)
            self._classes = (
                jvm.org.apache.spark.util.AccumulatorContext,
                jvm.org.apache.spark.sql.catalyst.expressions.UnsafeRow,
            )
        accumulators, unsafe = self._classes
        found = accumulators.get(node.accumulatorId())
        if not found.isDefined():
            return False
        accumulator = found.get()
        row = unsafe(len(FIELDS))
        row.pointTo(encoded, len(encoded))
        if self._last_attempt is None:
            kind = accumulator.getClass().getSimpleName()
            self._last_attempt = kind == "LastAttemptAggregatingAccumulator"
        if self._last_attempt:
            # (Spark 4.1 on: the value of the batch's last read of its plan wins over a
            # value set on the driver, unless the reads' values are dropped first.)
            accumulator.resetLastAttemptAccumulator()
            accumulator.setValueIfOnDriverSide(row)
        else:
            accumulator.reset()
            accumulator.mergeBuffer(row)  # (`max`'s buffer is its value)
        return True

    def _observation(self) -> t.Any | None:
        """The ``streamjoin`` observe node (a JVM object) of the running micro-batch's plan:
        the plan's root, as the engine's stream ends with it, or found below it."""
        query_id = self.spark.sparkContext.getLocalProperty("sql.streaming.queryId")
        if not query_id:
            return None
        stream = self._streams.get(query_id)
        if stream is None:
            query = self.spark.streams.get(query_id)
            if query is None:
                return None
            stream = self._streams[query_id] = query._jsq.streamingQuery()
        execution = stream.lastExecution()
        if execution is None:
            return None
        nodes = [execution.executedPlan()]
        while nodes:
            node = nodes.pop()
            if node.nodeName() == "CollectMetrics" and node.name() == OBSERVED:
                return node
            children = node.children()
            nodes += [children.apply(i) for i in range(children.size())]
        return None


def unsafe_row(row: dict[str, t.Any]) -> bytes:
    """`row` in Spark's `UnsafeRow` format, handed to the JVM as one byte array: a word of
    null bits, a word per field (a long, a double, or a string's offset and size), then the
    string's bytes padded to a word. (Boxed one by one, each value would be a call into the
    JVM, and py4j would box a small int as an Integer where Spark wants a Long.)"""
    assert len(FIELDS) <= 64  # (one word of null bits)
    nulls, words = 0, []
    text = str(row["figures"]).encode("utf-8")
    fixed = 8 * (1 + len(FIELDS))
    for i, f in enumerate(FIELDS):
        v = row[f]
        if v is None:
            nulls |= 1 << i
            words.append(struct.pack("=q", 0))
        elif f in _LONGS:
            words.append(struct.pack("=q", int(v)))
        elif f in _DOUBLES:
            words.append(struct.pack("=d", float(v)))
        else:
            words.append(struct.pack("=q", (fixed << 32) | len(text)))
    padding = b"\0" * (-len(text) % 8)
    return struct.pack("=q", nulls) + b"".join(words) + text + padding
