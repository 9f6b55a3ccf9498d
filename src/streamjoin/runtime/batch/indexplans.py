"""What the join operator's probes plan once per query (`indexed`, ``BatchInput.java``): the
input of a probe made from the rows Spark planned for the batch, and the expressions applied to
the pairs a probe finds (the query's predicate and SELECT; an outer join's ON condition, which
marks the rows it matches). Each is analysed and optimised once per query and layout, then
applied in the probe's tasks: such a batch plans nothing for them."""

from __future__ import annotations

import hashlib
import json
import typing as t
import warnings
from functools import partial

from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import DataFrame

from streamjoin.errors import StreamJoinWarning
from streamjoin.runtime.batch.indexouter import alone_sql, marker_sql
from streamjoin.runtime.batch.indexsql import input_parts, output_sql
from streamjoin.runtime.batch.intake import status_sql
from streamjoin.runtime.sources import prefixed

if t.TYPE_CHECKING:
    from streamjoin.plan import QueryPlan, StreamPlan
    from streamjoin.plan.outer import OuterPlan
    from streamjoin.runtime.batch.context import BatchContext


class ProbePlans:
    """The plans of one processor's probes, by query and layout."""

    def __init__(self) -> None:
        self._inputs: dict[str, t.Any] = {}
        """Query and placement → its `BatchInput`s (False: its plans could not make one)."""
        self._decided: dict[tuple[int, str], tuple[t.Any, t.Any] | None] = {}
        """(Batch, query) → what `batch_input` decided for it."""
        self._outputs: dict[str, t.Any] = {}
        """Query and probe layout → the `BatchInput` of its output or of its ON condition
        (None: planned each batch)."""

    def end_batch(self) -> None:
        """The batch ended: its decisions go."""
        self._decided = {}

    def batch_input(
        self, ctx: BatchContext, qp: QueryPlan, fits: bool
    ) -> tuple[t.Any, t.Any] | None:
        """`qp`'s `BatchInput` for this batch (its probe's input made from the rows Spark
        planned for the batch, in one task) and the one of its output (None: its SELECT and
        predicate are planned each batch), or None: the batch does not `fit` one task, or its
        rows are not rows Spark planned, or the query's plans cannot be made once (a scheme's
        or time buckets' copies are no projection of the batch's rows). Decided once a
        batch."""
        # (A scheme's copies are not a projection of the batch's rows: the placement is part
        # of what was decided.)
        placement = ctx.routers[qp.query.name].placement
        key = f"{query_key(qp)}@{json.dumps(placement, sort_keys=True)}"
        if (ctx.batch_id, key) not in self._decided:
            self._decided[ctx.batch_id, key] = self._decide(ctx, key, qp, fits)
        return self._decided[ctx.batch_id, key]

    def _decide(
        self, ctx: BatchContext, key: str, qp: QueryPlan, fits: bool
    ) -> tuple[t.Any, t.Any] | None:
        if not fits:
            return None

        def make() -> tuple[t.Any, t.Any] | None:
            try:
                return self._batch_input(ctx, qp)
            except PLAN_ERRORS as err:  # (the batch plans its input instead)
                planned_each_batch(f"query {qp.query.name}: its probe's input", err)
                return None

        made = planned_once(self._inputs, key, ctx, make, lambda m: m[0])
        return t.cast("tuple[t.Any, t.Any] | None", made)

    def _batch_input(self, ctx: BatchContext, qp: QueryPlan) -> tuple[t.Any, t.Any] | None:
        """`qp`'s `BatchInput`s of its probe's input, planned over rows in the layout of the
        batch's (each side's on-time test without the watermark, which the probe applies to
        each row's event time), and of its output (the query's predicate and SELECT over the
        candidate pairs; None where they cannot be planned once); None where Spark's plans of
        the input do not have its shape."""
        jvm = ctx.spark.sparkContext._jvm
        assert jvm is not None
        inputs = jvm.streamjoin.operator.BatchInput
        q = qp.query
        rows = batch_rows(ctx)
        rels = [rows(ctx.plan.stream(q.left.stream)), rows(ctx.plan.stream(q.right.stream))]
        # (Each side's rows, or an OR's copy of them for each table: one plan each.)
        read = (ctx.plan.stream(q.left.stream).index, ctx.plan.stream(q.right.stream).index)
        made = batch_input(ctx, input_parts(ctx, qp, *rels, late=True), read)
        if made is None:
            return None
        pairs = DataFrame(made.pairs(ctx.rows._jdf), ctx.spark)
        found = ctx.scratch.view(pairs, f"_sj_pairs_{len(ctx.scratch.views)}")
        return made, inputs.output(ctx.spark.sql(output_sql(qp, found))._jdf)

    def output(self, ctx: BatchContext, qp: QueryPlan, delta: DataFrame) -> t.Any:
        """`qp`'s `BatchInput` of its output over the candidate pairs of a probe of `delta`'s
        layout (its predicate and SELECT, applied in the probe's tasks: the candidates never
        leave them), planned once per query and layout; None where they cannot be planned
        once (the current time, a subquery, a Python function: planned each batch)."""
        try:
            return self.over_pairs(ctx, query_key(qp), delta, lambda p: output_sql(qp, p))
        except PLAN_ERRORS as err:  # (the pairs go to Spark SQL instead)
            planned_each_batch(f"query {qp.query.name}: its predicate and SELECT", err)
            self._outputs[f"{query_key(qp)}@{delta.schema.json()}"] = None
            return None

    def marker(self, ctx: BatchContext, op: OuterPlan, rows: DataFrame) -> t.Any:
        """The `BatchInput` of outer join `op`'s ON condition over the pairs of a probe of
        `rows`'s layout (`indexouter.marker_sql`), planned once per query and layout."""
        marker = self.over_pairs(ctx, f"{op.query.name}@on", rows, lambda p: marker_sql(op, p))
        if marker is None:  # (an ON condition planned each batch: the slices decide)
            msg = f"query {op.query.name}: its ON condition cannot be evaluated in the operator"
            raise ValueError(msg)
        return marker

    def alone(self, ctx: BatchContext, op: OuterPlan, rows: DataFrame) -> t.Any:
        """The `BatchInput` of outer join `op`'s rows without a partner (`indexouter.alone_sql`:
        its WHERE and SELECT over pairs whose other side is NULL) over a probe of `rows`'s
        layout, planned once per query and layout; None where it cannot be planned once."""
        try:
            return self.over_pairs(ctx, f"{op.query.name}@alone", rows, partial(alone_sql, op))
        except PLAN_ERRORS as err:  # (decided after the probe instead: `ProbeReads.unmatched`)
            planned_each_batch(f"query {op.query.name}: its rows without a partner", err)
            self._outputs[f"{op.query.name}@alone@{rows.schema.json()}"] = None
            return None

    def over_pairs(
        self, ctx: BatchContext, name: str, rows: DataFrame, sql: t.Callable[[str], str]
    ) -> t.Any:
        """The `BatchInput` of `sql` (of a relation of pairs) over the candidate pairs of a
        probe of `rows`'s layout, planned once per `name` and layout."""
        key = f"{name}@{rows.schema.json()}"
        if key not in self._outputs:
            jvm = ctx.spark.sparkContext._jvm
            assert jvm is not None
            none = DataFrame(jvm.streamjoin.operator.JoinIndex.nopairs(rows._jdf), ctx.spark)
            found = ctx.scratch.view(none, f"_sj_pairs_{len(ctx.scratch.views)}")
            planned = ctx.spark.sql(sql(found))._jdf
            self._outputs[key] = jvm.streamjoin.operator.BatchInput.output(planned)
        return self._outputs[key]


PLAN_ERRORS = (Py4JJavaError, CapturedException)
"""What Spark raises where a plan cannot be made once over a placeholder."""


def planned_each_batch(subject: str, err: Exception) -> None:
    """Warn that `subject` is planned each batch, slower, because its plan could not be made
    once (`err`, Spark's reason): a fast path not taken is never silent."""
    reason = spark_reason(err)
    msg = f"{subject} is planned each batch (its plan could not be made once: {reason})"
    warnings.warn(msg, StreamJoinWarning, stacklevel=3)


def spark_reason(err: Exception) -> str:
    """The first line of Spark's reason for `err`: a Java error's own message (py4j's first
    line only names the call), else the error's."""
    text = str(err).strip()
    if isinstance(err, Py4JJavaError):
        text = str(err.java_exception.toString()).strip() or text
    return text.splitlines()[0] if text else type(err).__name__


def planned_once(
    made: dict[str, t.Any],
    key: str,
    ctx: BatchContext,
    make: t.Callable[[], t.Any],
    input_of: t.Callable[[t.Any], t.Any] = lambda m: m,
) -> t.Any:
    """What `made` keeps for `key`, a plan over the batch's rows (its ``BatchInput``:
    `input_of` it), where the batch's rows fit it (one call); else, where they are rows Spark
    planned, `make`'s, kept (None: it cannot be made once, kept as False and not tried
    again); None where there is none."""
    kept = made.get(key)
    if kept and input_of(kept).fits(ctx.rows._jdf):  # (rows Spark planned, in the layout)
        return kept
    jvm = ctx.spark.sparkContext._jvm
    assert jvm is not None
    if kept is False or not jvm.streamjoin.operator.BatchInput.planned(ctx.rows._jdf):
        return None
    # (First use, or the batch's layout changed: planned again.)
    fresh = make()
    made[key] = fresh or False
    return fresh


def batch_rows(ctx: BatchContext) -> t.Callable[[StreamPlan], str]:
    """SQL of a stream's on-time rows (the status test without the watermark, which a probe
    applies to each row's event time) under their own names, of a relation in the layout of
    the batch's rows with none of them: what a `BatchInput` is planned over."""
    jvm = ctx.spark.sparkContext._jvm
    assert jvm is not None
    placeholder = DataFrame(
        jvm.streamjoin.operator.BatchInput.placeholder(ctx.rows._jdf), ctx.spark
    )
    view = ctx.scratch.view(placeholder, f"_sj_rows_{len(ctx.scratch.views)}")
    on_time = status_sql([sp.index for sp in ctx.plan.streams if sp.stream.watermark], None)

    def rows(sp: StreamPlan) -> str:
        cols = ", ".join(f"`{prefixed(sp.index, c.name)}` AS `{c.name}`" for c in sp.stream.columns)
        return f"(SELECT {cols} FROM {view} WHERE _sj_src = {sp.index} AND ({on_time}) = 'ok')"

    return rows


def batch_input(
    ctx: BatchContext, sides: t.Sequence[str], streams: t.Iterable[int] | None = None
) -> t.Any:
    """The ``BatchInput`` of `sides` (SQL of each side's rows, over `batch_rows`'s relations),
    or None where a side's plan has not its shape (`BatchInput.of`). With `streams` (the
    indexes of the streams the sides read), it reads only those streams' partitions of a
    batch whose partitions are known by stream (``BatchStreams``: the engine's own loop)."""
    spark = ctx.spark
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    assert jvm is not None and gateway is not None
    planned = [spark.sql(side)._jdf for side in sides]
    parts = gateway.new_array(jvm.org.apache.spark.sql.classic.Dataset, len(planned))
    for i, part in enumerate(planned):
        parts[i] = part
    made = jvm.streamjoin.operator.BatchInput.of(parts)
    if made is not None and streams is not None:
        read = sorted(set(streams))
        indexes = gateway.new_array(jvm.int, len(read))
        for i, index in enumerate(read):
            indexes[i] = index
        made.reading(indexes)
    return made


def query_key(qp: QueryPlan) -> str:
    """A query's name and a digest of its definition (a served job may give the name to
    another query): what its operator and plans are kept by."""
    digest = hashlib.sha256(repr(qp.query).encode()).hexdigest()[:12]
    return f"{qp.query.name}#{digest}"
