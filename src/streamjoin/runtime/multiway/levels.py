"""The join operator's indexes of the multi-way joins' levels (`plan.chain`): each a two-way
index (``JoinIndex.java``; on a cluster ``PlacedIndex.java``, each partition on one executor),
built from the streams' committed units when a run starts or its level is new, then probed and
extended by each batch's delta. A batch run again takes back what its failed attempt added (a
cluster's indexes are built again). Apart from the two-way queries' (`batch.indexed`): a
level is no query's, and its rows are combinations of several streams' rows."""

from __future__ import annotations

import itertools
import typing as t
import uuid

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame

from streamjoin.runtime.batch.placed import PlacedIndexes
from streamjoin.runtime.jvm.statics import StaticMethods

if t.TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import SparkSession

    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.indexplans import ProbePlans

_LEAST = -(2**63)
_names = itertools.count()


class LevelIndexes:
    """One processor's level indexes, by level key, and the batch each was committed at."""

    def __init__(self, plans: ProbePlans, on_cluster: Callable[[SparkSession], bool]) -> None:
        self._prefix = f"sj-levels-{uuid.uuid4().hex[:8]}-{next(_names)}"
        self._built: dict[str, tuple[int, int]] = {}
        """Level key → (batch committed into its index, its partitions)."""
        self._used: dict[str, tuple[int, int]] = {}
        self._made: set[str] = set()
        """Level keys built in the driver's JVM since the last commit (a failed batch's too)."""
        self._plans = plans
        self._on_cluster = on_cluster
        self.placed = PlacedIndexes(self._prefix)
        self._class: StaticMethods | None = None
        self._outputs: dict[str, t.Any] = {}
        """Level key → its output's `BatchInput` (None: made by Spark SQL after the probe)."""
        self.batch_reads = 0
        """Reads of a batch's rows as a whole (`probe_chain`) since the processor counted."""

    def probe(
        self,
        ctx: BatchContext,
        key: str,
        delta: DataFrame,
        stored: Callable[[], DataFrame | None],
        parts: int,
        least: tuple[int | None, int | None],
        output: Callable[[str], str],
        together: bool,
        shed: str = "",
    ) -> DataFrame:
        """The rows `output` (SQL over a relation of candidate pairs) makes of the pairs of
        level `key`'s `delta` (``JoinIndex``'s input layout), lazy: the job that reads them
        applies the batch to the index, which is first built from `stored` (its committed rows
        in that layout; None: none) where it is not at the batch before. Its rows below `least`
        (left, right; None: no bound) go first. `together`: the delta is few rows, probed in
        one task. `shed`: a shedding query's cuts (`indexfit.shed_cuts`; its pairs per side
        are then counted: `shed_counts`)."""
        spark, batch = ctx.spark, ctx.batch_id
        expiry = [_LEAST if x is None else x for x in least]
        made = self._output(ctx, key, delta, output)
        cluster = self._on_cluster(spark)
        fresh = self._built.get(key) not in {(batch - 1, parts), (batch, parts)}
        if cluster:
            if fresh or key not in self.placed:
                rows = stored()
                rows = delta.limit(0) if rows is None else rows
                at = (parts, batch - 1, None, (_LEAST, _LEAST))
                self.placed.build(spark, key, rows, *at, memory=ctx.settings.memory)
            found = self.placed.probe(spark, key, delta, batch, expiry, None, (made, shed, 0))
        else:
            name = self._ready(ctx, key, stored, parts, least)
            one = together or parts == 1
            jdf = self._jvm(spark).probe(delta._jdf, made, None, shed, name, parts, batch, 0, one)
            found = DataFrame(jdf, spark)
        self._used[key] = (batch, parts)
        if made is not None:
            return found
        view = ctx.scratch.view(found, f"_sj_level_{len(ctx.scratch.views)}")
        return spark.sql(output(view))

    def probe_chain(
        self,
        ctx: BatchContext,
        levels: Sequence[tuple[str, Callable[[], DataFrame | None], int]],
        least: tuple[int | None, int | None],
        planned: tuple[t.Any, t.Any],
        sheds: Sequence[str] | None = None,
    ) -> DataFrame:
        """The query's rows (lazy) of a chain of `levels` (each its key, its committed rows as
        `probe`'s `stored`, its partitions) probed with the batch's own rows in one task of the
        driver's JVM (``ChainProbe``), by `planned`'s inputs and outputs (one per level: the
        rows it takes from the batch, what it makes of its pairs); a shedding query's `sheds`
        (per level, as `probe`'s `shed`)."""
        spark, batch = ctx.spark, ctx.batch_id
        names = [self._ready(ctx, key, stored, parts, least) for key, stored, parts in levels]
        for key, _, parts in levels:
            self._used[key] = (batch, parts)
        gateway, jvm = spark.sparkContext._gateway, spark.sparkContext._jvm
        assert gateway is not None and jvm is not None
        operator = jvm.streamjoin.operator
        n = len(levels)
        inputs, outputs = (gateway.new_array(operator.BatchInput, n) for _ in range(2))
        texts, counts = gateway.new_array(jvm.java.lang.String, n), gateway.new_array(jvm.int, n)
        cuts = gateway.new_array(jvm.java.lang.String, n)
        for i, (name, (_, _, parts)) in enumerate(zip(names, levels, strict=True)):
            inputs[i], outputs[i] = planned[0][i], planned[1][i]
            texts[i], counts[i], cuts[i] = name, parts, sheds[i] if sheds else ""
        late = _LEAST if ctx.watermark is None else ctx.watermark
        rows = ctx.rows._jdf
        jdf = operator.ChainProbe.probe(rows, inputs, outputs, texts, counts, cuts, batch, late)
        self.batch_reads += 1
        return DataFrame(jdf, spark)

    def shed_counts(self, spark: SparkSession, key: str, batch: int) -> tuple[int, int]:
        """The pairs level `key`'s left and right rows wrote in batch `batch`, as its probe
        counted them for a shedding query (read once, after the job that ran it)."""
        name = self.placed.name(key) if key in self.placed else f"{self._prefix}/{key}"
        got = [int(x) for x in str(self._jvm(spark).unitCounts(name, batch, 4)).split(",")]
        return got[0], got[1]

    def on_cluster(self, spark: SparkSession) -> bool:
        """Whether the levels lie on a cluster's executors (`PlacedIndexes`)."""
        return self._on_cluster(spark)

    def _ready(
        self,
        ctx: BatchContext,
        key: str,
        stored: Callable[[], DataFrame | None],
        parts: int,
        least: tuple[int | None, int | None],
    ) -> str:
        """The name of level `key`'s index in the driver's JVM, built from `stored` where it
        is not at the batch before, its rows below `least` expired."""
        cls, name, batch = self._jvm(ctx.spark), f"{self._prefix}/{key}", ctx.batch_id
        if self._built.get(key) not in {(batch - 1, parts), (batch, parts)}:
            self._made.add(key)  # (dropped at a commit or close that does not keep it)
            cls.reset(name, parts, batch - 1, ctx.settings.memory)
            if (rows := stored()) is not None:
                cls.load(rows._jdf, name, parts, None, _LEAST, _LEAST)
        cls.expire(name, parts, *[_LEAST if x is None else x for x in least])
        return name

    def _output(
        self, ctx: BatchContext, key: str, delta: DataFrame, output: Callable[[str], str]
    ) -> t.Any:
        """`output` planned once over the pairs of `delta`'s layout, applied in the probe's
        tasks; None where it cannot be (then Spark SQL applies it to the pairs)."""
        # (Once per level: its key names its streams' columns, so its layout is one.)
        if key not in self._outputs:
            try:
                self._outputs[key] = self._plans.over_pairs(ctx, f"level:{key}", delta, output)
            except Py4JJavaError:
                self._outputs[key] = None
        return self._outputs[key]

    def committed(self, spark: SparkSession) -> None:
        """The batch committed: its levels are at its id; those it did not use go."""
        for key in (self._built.keys() | self._made | set(self.placed)) - self._used.keys():
            if key in self.placed:
                self.placed.drop(spark, key)
            else:
                self._jvm(spark).drop(f"{self._prefix}/{key}")
        self._built, self._used, self._made = self._used, {}, set()

    def failed(self) -> None:
        """The batch failed: a cluster's levels are built again (an executor may be gone)."""
        for key in self.placed:
            self._built.pop(key, None)
        self._used = {}

    def lost(self, err: BaseException) -> bool:
        """Whether `err` is a probe that found no partition of a level where it ran."""
        return self.placed.lost(err)

    def take_events(self) -> list[str]:
        """The builds on executors since the last call, in words."""
        return self.placed.take_events()

    def clear(self, spark: SparkSession) -> None:
        """Drop every level's index (the processor is done)."""
        for key in self.placed:
            self.placed.drop(spark, key)
        if self._class is not None:
            for key in self._built.keys() | self._made:
                self._class.drop(f"{self._prefix}/{key}")
        self._built, self._made = {}, set()

    def _jvm(self, spark: SparkSession) -> StaticMethods:
        if self._class is None:
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            self._class = StaticMethods(jvm.streamjoin.operator.JoinIndex)
        return self._class
