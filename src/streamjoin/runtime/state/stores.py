"""The streams' stored rows as relations of a batch's SQL, read from their files or from memory.

A stream's store is the union of its live state units (the rows each batch appended, one
Parquet directory per stream and batch, `runtime.state.checkpoint`), read as the units cached in
executor memory (`runtime.state.hot`) or from their files.

The files remain the durable copy: a cached block Spark loses is read back from them, and a
restarted processor starts with nothing cached.
"""

from __future__ import annotations

import typing as t

from streamjoin.runtime.sources import prefixed
from streamjoin.runtime.state.hot import HotState, stored_schema
from streamjoin.runtime.state.sourcefiles import SourcedUnits
from streamjoin.runtime.state.sqlvalues import as_decimal, batch_constant

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.plan import StreamPlan
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.manifest import Manifest, StateUnit


def _union(views: list[str]) -> str:
    return "(" + " UNION ALL ".join(f"SELECT * FROM {v}" for v in views) + ")"


class StoreViews:
    """The relations of one batch's joins over the streams' stored rows (`state`)."""

    def __init__(self, store: Checkpoint, parallelism: int) -> None:
        self.store = store
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
        self.hot.parallelism = parallelism

    def end_batch(self) -> None:
        """Forget the batch's views (the batch drops them)."""
        self._unit_views = {}
        self.sourced.end_batch()
        self.hot.end_batch()

    def clear(self) -> None:
        """Release everything cached between batches (the processor is done, or a batch is run
        again from the files)."""
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
        *,
        cached: bool = True,
        estimate: bool = False,
    ) -> str:
        """A relation (SQL text) of `sp`'s committed state with event times >= lo, plus the
        rows of `delta_view`; `cached` False: read from the units' files, none of them cached
        for later batches; `estimate`: as False, and units read back from a stream's files
        about their rows (`SourcedUnits.estimate_view`: for statistics)."""
        units = [u for u in prev.live(sp.name) if u.overlaps(lo, None)]
        if estimate and units and all(u.files for u in units):
            state = self._rows(sp, self.sourced.estimate_view(spark, sp, units, views), lo)
            return f"({state} UNION ALL SELECT * FROM {delta_view})" if delta_view else f"({state})"
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
            # (Units whose files' rows were all ok: one scan of their files, not one each.
            # Copies behind have a directory each, and a view each kept across batches.)
            whole = [u for u in units if u.files and u.whole and not u.behind]
            together = whole if len(whole) > 1 else []
            taken = {id(u) for u in together}
            apart = [u for u in units if u.files and id(u) not in taken]
            parts = [self.sourced.view(spark, sp, u) for u in apart]
            if together:
                parts.append(self.sourced.whole_view(spark, sp, together, views))
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
