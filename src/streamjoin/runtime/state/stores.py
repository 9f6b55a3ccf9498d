"""The streams' stored rows as relations of a batch's SQL, read from their files or from memory.

A stream's store is the union of its live state units (the rows each batch appended, one
Parquet directory per stream and batch, `runtime.state.checkpoint`). Two-way joins and most
multi-way steps
read the units' files. Multi-way stores are also partitioned as CLASH's plan says: the ILP gives
each store one attribute; a probe step whose equality carries it, from a delta large enough to
route, reads the store as units cached in executor memory hash-partitioned on that attribute,
with the batch's new rows shuffled the same way (`PartitionedUnits`). Spark keeps a union of
children partitioned alike as partitioned, so the step moves only the rows so far, each to its
one partition; any other step broadcasts them to every partition
(`runtime.multiway.terms.step_sql`).

The files remain the durable copy: a cached block Spark loses is read back from them, and a
restarted processor starts with nothing cached.
"""

from __future__ import annotations

import itertools
import typing as t
from typing import NamedTuple

from pyspark import StorageLevel

from streamjoin.runtime.sources import prefixed
from streamjoin.runtime.state.hot import HotState, stored_schema
from streamjoin.runtime.state.sourcefiles import SourcedUnits
from streamjoin.runtime.state.sqlvalues import as_decimal, batch_constant

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.plan import StreamPlan
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.manifest import Manifest, StateUnit

PARTITIONED_STORE_CONF = {
    # Spark keeps a union of hash-partitioned cached units partitioned, unless inferred IS NOT
    # NULL filters give its children's columns differing nullability (it then re-shuffles the
    # whole store: seen in the plans).
    "spark.sql.constraintPropagation.enabled": "false",
    # A store partitioned on one key serves a step joining on that key and more.
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
}
"""Settings of a batch that may route a step to partitioned stores; other batches keep Spark's
defaults (`SPARK_DEFAULTS`)."""
SPARK_DEFAULTS = {key: "true" for key in PARTITIONED_STORE_CONF}


def _union(views: list[str]) -> str:
    return "(" + " UNION ALL ".join(f"SELECT * FROM {v}" for v in views) + ")"


class _Cached(NamedTuple):
    column: str
    rows: DataFrame
    view: str


_processors = itertools.count()


class PartitionedUnits:
    """State units of multi-way stores cached hash-partitioned on a column, by (stream, batch)."""

    def __init__(self, parallelism: int) -> None:
        self.parallelism = parallelism
        self._units: dict[tuple[str, int], _Cached] = {}
        self._prefix = f"_sj_part_{next(_processors)}"

    def view(
        self, spark: SparkSession, store: Checkpoint, sp: StreamPlan, unit: StateUnit, column: str
    ) -> str:
        """A temp view of `unit`'s rows (stored names) hash-partitioned on `column` (a column
        of `sp`), cached the first time it is asked for.

        The view lives as long as the unit: dropping a temp view also uncaches the data it
        shows, so it is not one of the batch's views. It is registered in the session of the
        DataFrame (foreachBatch hands every batch of a query run the same JVM session)."""
        cached = self._units.get((sp.name, unit.batch))
        if cached is None:
            rows = spark.read.schema(stored_schema(sp)).parquet(store.path(unit.path))
            on = rows[f"`{prefixed(sp.index, column)}`"]
            partitioned = rows.repartition(self.parallelism, on).persist(
                StorageLevel.MEMORY_AND_DISK_DESER
            )
            cached = _Cached(column, partitioned, f"{self._prefix}_{sp.index}_{unit.batch}")
            cached.rows.createOrReplaceTempView(cached.view)
            self._units[sp.name, unit.batch] = cached
        return cached.view

    def retain(self, partitioning: t.Mapping[str, str], manifest: Manifest) -> None:
        """Keep only the live units (after `manifest`) of the streams `partitioning` partitions,
        on the column it names: a store the plan partitions on another attribute from now on
        is cached again on it (its files do not move), one it no longer partitions is read from
        its files."""
        live = {(u.stream, u.batch) for u in manifest.units}
        for key, cached in list(self._units.items()):
            if key not in live or partitioning.get(key[0]) != cached.column:
                self._release(key)

    def clear(self) -> None:
        """Release every unit (the processor is done)."""
        for key in list(self._units):
            self._release(key)

    def _release(self, key: tuple[str, int]) -> None:
        cached = self._units.pop(key)
        cached.rows.sparkSession.catalog.dropTempView(cached.view)
        cached.rows.unpersist()


class StoreViews:
    """The relations of one batch's joins over the streams' stored rows (`state`)."""

    def __init__(self, store: Checkpoint, parallelism: int) -> None:
        self.store = store
        self.partitioned = PartitionedUnits(parallelism)
        self.sourced = SourcedUnits(store.fs)
        self.hot = HotState(store, parallelism)
        """The live units cached in executor memory, spilling to disk."""
        self._unit_views: dict[tuple[str, ...], str] = {}
        """This batch's views of state units, by stream and files."""
        self.cache_deltas = True
        """Whether a sourced stream's delta is cached as the batch reads it (`HotState.delta`):
        not while no batch reads the slices (`batch.indexed`); a unit not cached then is read
        from its files by the first batch that asks for it."""

    def resize(self, parallelism: int) -> None:
        """Partitions of the state cached from now on (what is cached keeps its own)."""
        self.partitioned.parallelism = parallelism
        self.hot.parallelism = parallelism

    def end_batch(self) -> None:
        """Forget the batch's views (the batch drops them)."""
        self._unit_views = {}
        self.sourced.end_batch()
        self.hot.end_batch()

    def clear(self) -> None:
        """Release everything cached between batches (the processor is done, or a batch is run
        again from the files)."""
        self.partitioned.clear()
        self.sourced.clear()
        self.hot.clear()

    def state(
        self,
        spark: SparkSession,
        sp: StreamPlan,
        prev: Manifest,
        lo: int | None,
        delta_view: str | None,
        views: list[str],
        column: str | None = None,
        *,
        cached: bool = True,
        estimate: bool = False,
    ) -> str:
        """A relation (SQL text) of `sp`'s committed state with event times >= lo, plus the
        rows of `delta_view`. With `column`, hash-partitioned on it (`PartitionedUnits`);
        `cached` False: read from the units' files, none of them cached for later batches;
        `estimate`: as False, and units read back from a stream's files about their rows
        (`SourcedUnits.estimate_view`: for statistics)."""
        units = [u for u in prev.live(sp.name) if u.overlaps(lo, None)]
        if estimate and units and all(u.files for u in units):
            state = self._rows(sp, self.sourced.estimate_view(spark, sp, units, views), lo)
            return f"({state} UNION ALL SELECT * FROM {delta_view})" if delta_view else f"({state})"
        if column is not None and units:
            parts = [
                self._rows(sp, self.partitioned.view(spark, self.store, sp, u, column), lo)
                for u in units
            ]
            if delta_view is not None:
                n = self.partitioned.parallelism
                parts.append(f"SELECT /*+ REPARTITION({n}, `{column}`) */ * FROM {delta_view}")
            return "(" + " UNION ALL ".join(parts) + ")"
        # No units: a scan of no files, which the optimizer cannot prove empty. (A relation it
        # can, like `empty_relation`, is pruned with the observations on its plan, which then
        # never report.)
        if units and cached:
            state = self._rows(sp, self.hot.relation(spark, sp, prev, units, lo), None)
        else:
            state = self._rows(sp, self._files_view(spark, sp, units, views), lo if units else None)
        if delta_view is not None:
            state = f"{state} UNION ALL SELECT * FROM {delta_view}"
        return f"({state})"

    def sourced_delta(
        self, spark: SparkSession, sp: StreamPlan, batch: int, files: list[str], wm: int | None
    ) -> str:
        """A relation (SQL text) of `sp`'s ok rows of batch `batch` (started at `wm`) under their
        own names, read from the input `files` the batch reads (`SourcedUnits.batch_view`)."""
        rows = self.sourced.batch_view(spark, sp, batch, files, wm)
        if self.cache_deltas:
            rows = self.hot.delta(spark, sp, batch, rows)
        return f"({self._rows(sp, rows, None)})"

    def _files_view(
        self, spark: SparkSession, sp: StreamPlan, units: list[StateUnit], views: list[str]
    ) -> str:
        """A relation of the rows of `units` of `sp`, under their stored names: a temp view of
        the copied units' files (one per set of units and batch: queries reading the same units
        share it), and the views of units read back from the stream's own files."""
        paths = tuple(self.store.path(u.path) for u in units)
        view = self._unit_views.get((sp.name, *paths))
        if view is None:
            parts = [self.sourced.view(spark, sp, u) for u in units if u.files]
            copied = [self.store.path(u.path) for u in units if not u.files]
            if copied or not parts:
                name = f"_sj_units_{len(views)}"
                spark.read.schema(stored_schema(sp)).parquet(*copied).createOrReplaceTempView(name)
                views.append(name)
                parts.append(name)
            view = parts[0] if len(parts) == 1 else _union(parts)
            self._unit_views[sp.name, *paths] = view
        return view

    @staticmethod
    def _rows(sp: StreamPlan, view: str, lo: int | None) -> str:
        """SELECT of `sp`'s stored rows in `view` under their own names, event times >= lo."""
        cols = ", ".join(f"`{prefixed(sp.index, c.name)}` AS `{c.name}`" for c in sp.stream.columns)
        rows = f"SELECT {cols} FROM {view}"
        ts = sp.stream.event_time
        if ts is not None and lo is not None:
            # A unit spans its whole batch's event times; keep only rows that can meet.
            bound = f"{as_decimal(f'unix_micros(`{ts}`)')} >= {batch_constant(lo)}"
            rows = f"SELECT * FROM ({rows}) WHERE {bound}"
        return rows
