"""The hot copy of the streams' state: live units cached in executor memory as a few slices.

A stream's durable state is one unit per batch (Parquet under the checkpoint, or the input
files it was read from: `runtime.state.sourcefiles`). Reading every live unit back from its
files in every batch costs a file listing, a parse and a task per unit, so a window of minutes
over batches of seconds pays for hundreds of units each batch. Here each unit is cached once:
a sourced stream's as its own batch reads it (`HotState.delta`), any other's by the first batch
after its own, from its files. The cached slices are merged like a binary counter (the newest
two whenever the older holds no more live rows than the newer), so a stream keeps about
log2(units) slices and each row is copied about log2(units) times over its life. A merge leaves
out the rows of units that expired; a slice whose units all expired is released.

The cache is only a copy: a batch that fails on a missing file while slices are cached (a
block lost with an executor is rebuilt from files an expired unit may have had deleted) is run
again from the manifest's files by the processor (`HotState.failed`, `HotState.clear`). Each
slice carries its units' batch ids (`BATCH`), so a relation holds the rows of live units only,
whatever a slice still keeps.
"""

from __future__ import annotations

import itertools
import typing as t
from dataclasses import dataclass, field

from py4j.protocol import Py4JError
from pyspark import StorageLevel
from pyspark.sql import DataFrame

from streamjoin.runtime.sources import prefixed
from streamjoin.runtime.state.sourcefiles import check_files, read_files, stored_sql
from streamjoin.runtime.state.sqlvalues import as_decimal, batch_constant

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.plan import StreamPlan
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.manifest import Manifest, StateUnit

BATCH = "_sj_b"
"""Column of a slice: the batch whose unit the row belongs to (a `batch_constant`, so that
a batch's new ids compile no new code)."""
ROWS_PER_PARTITION = 200_000
"""Rows per cached partition a merged slice aims at (at most the session's shuffle partitions):
fewer partitions, fewer tasks per scan of small state."""
_processors = itertools.count()


def stored_schema(sp: StreamPlan) -> str:
    """DDL of `sp`'s columns under their stored names (state files hold every stream's columns
    under their unified names, one write per batch for all streams; a stream reads its own)."""
    return ", ".join(f"`{prefixed(sp.index, c.name)}` {c.type.ddl}" for c in sp.stream.columns)


@dataclass
class _Slice:
    """Cached rows of some units of one stream; `units` are those still live."""

    units: dict[int, StateUnit]
    held: frozenset[int]
    """Batches whose rows the slice holds (live or not)."""
    df: DataFrame
    """The persisted rows (unpersisted on release)."""
    view: str
    """A temp view of the cached rows themselves (`_cached_leaf`)."""
    builder: t.Any = None
    """Spark's builder of the cached rows (None: not known), to tell when they are built."""
    parents: list[_Slice] = field(default_factory=list)
    """The slices merged into this one, kept until its rows are built from theirs."""
    released: bool = False

    def built(self) -> bool:
        """Whether every partition of the rows is cached (unknown: taken as built)."""
        return self.builder is None or bool(self.builder.isCachedColumnBuffersLoaded())

    @property
    def rows(self) -> int:
        return sum(u.rows for u in self.units.values())

    def relation(self, since: str | None = None) -> str:
        """SELECT of the slice's rows of live units (stored names and `BATCH`); with `since`
        (a condition on their event times), of those that meet it."""
        held = self.held != self.units.keys()
        live = ", ".join(batch_constant(b) for b in sorted(self.units)) if held else ""
        where = [f"{BATCH} IN ({live})"] if held else []
        where += [since] if since is not None else []
        return f"SELECT * FROM {self.view}" + (f" WHERE {' AND '.join(where)}" if where else "")

    def older_than(self, lo: int) -> bool:
        """Whether a live unit of the slice may hold a row older than `lo`."""
        return any(u.min_ts is None or u.min_ts < lo for u in self.units.values())


class HotState:
    """Each stream's live state units as slices cached in executor memory."""

    def __init__(self, store: Checkpoint, parallelism: int) -> None:
        self.store = store
        self.parallelism = parallelism
        self._slices: dict[str, list[_Slice]] = {}
        self._synced: dict[str, int] = {}
        """Per stream, the manifest its slices were last brought up to."""
        self._merged: list[_Slice] = []
        """Merged slices whose parents wait for their rows to be built (by the batch that
        first reads them: released then, at a batch's end)."""
        self._pending: dict[tuple[str, int], _Slice] = {}
        """Each sourced stream's new rows of the last batches, cached as the batch read them,
        by stream and batch: the unit the batch added, once a manifest names it."""
        self._prefix = f"_sj_hot_{next(_processors)}"
        self._views = itertools.count()

    def failed(self, err: BaseException) -> bool:
        """Whether a batch's `err` may be the cache's: Spark recomputes a cached block lost with
        an executor from the files it was read from, and a slice may still hold units that
        expired since, whose files may be gone."""
        text = str(err)
        missing = "FILE_NOT_EXIST" in text or "FileNotFoundException" in text
        return missing and any(self._slices.values())

    def relation(
        self,
        spark: SparkSession,
        sp: StreamPlan,
        prev: Manifest,
        units: list[StateUnit],
        lo: int | None = None,
    ) -> str:
        """A relation (SQL text) of the rows of `units` (live units of `sp` after `prev`)
        under their stored names, with `BATCH`, and of any other live unit a slice of theirs
        holds; with `lo`, only rows with event times >= lo (the units were chosen for it). A
        slice whose units are all newer is read without the test: most of them, in a window."""
        wanted = {u.batch for u in units}
        ts = sp.stream.event_time
        since = None
        if lo is not None and ts is not None:
            since = f"{as_decimal(f'unix_micros(`{prefixed(sp.index, ts)}`)')} >= "
            since += batch_constant(lo)
        parts = []
        for s in self._sync(spark, sp, prev):
            if wanted & s.units.keys():
                old = since is not None and lo is not None and s.older_than(lo)
                parts.append(s.relation(since if old else None))
        return "(" + " UNION ALL ".join(parts) + ")"

    def delta(self, spark: SparkSession, sp: StreamPlan, batch: int, relation: str) -> str:
        """A relation of `relation` (`sp`'s ok rows of `batch` under their stored names, read
        from the batch's input files) cached as the batch reads it: the unit the batch adds,
        which the next batch then finds in memory instead of reading its files again."""
        # The last batch's rows wait for this batch's manifest; older ones no batch took
        # (a unit without rows), and a batch run again reads its own anew.
        for key in [k for k in self._pending if k[0] == sp.name and k[1] != batch - 1]:
            self._release(self._pending.pop(key))
        rows = spark.sql(f"SELECT *, {batch_constant(batch)} AS {BATCH} FROM {relation}")
        pending = self._cached(rows, {})
        self._pending[sp.name, batch] = pending
        return pending.view

    def end_batch(self) -> None:
        """Release the slices merged away whose merged slice is built (a batch read it); the
        others wait, since Spark would build a merged slice from its parents' files anew, and
        outside its cache manager, once their caches are gone."""
        waiting = []
        for merged in self._merged:
            if merged.released:
                continue
            if merged.built():
                for parent in merged.parents:
                    self._release(parent)
                merged.parents = []
            else:
                waiting.append(merged)
        self._merged = waiting

    def clear(self) -> None:
        """Release every slice: the next batch reads its units from their files again."""
        for slices in self._slices.values():
            for s in slices:
                self._release(s)
        for pending in self._pending.values():
            self._release(pending)
        for merged in self._merged:
            self._release(merged)
        self._slices, self._synced, self._pending, self._merged = {}, {}, {}, []

    def _sync(self, spark: SparkSession, sp: StreamPlan, prev: Manifest) -> list[_Slice]:
        """`sp`'s slices brought up to `prev`: expired units forgotten, new ones read, merged."""
        slices = self._slices.setdefault(sp.name, [])
        if self._synced.get(sp.name) == prev.batch and slices:
            return slices
        live = {u.batch: u for u in prev.live(sp.name)}
        kept = []
        for s in slices:
            s.units = {b: u for b, u in s.units.items() if live.get(b) == u}
            if s.units:
                kept.append(s)
            else:
                self._release(s)
        have = {b for s in kept for b in s.units}
        for b in sorted(live.keys() - have):
            pending = self._pending.pop((sp.name, b), None)
            if pending is not None:
                pending.units, pending.held = {b: live[b]}, frozenset({b})
            kept.append(pending or self._unit_slice(spark, sp, live[b]))
            while len(kept) >= 2 and kept[-2].rows <= kept[-1].rows:
                newer = kept.pop()
                kept[-1] = self._merge(sp, kept[-1], newer)
        self._slices[sp.name] = kept
        self._synced[sp.name] = prev.batch
        return kept

    def _unit_slice(self, spark: SparkSession, sp: StreamPlan, unit: StateUnit) -> _Slice:
        """A slice of one unit, read from its files (cached when a batch first scans it)."""
        if unit.files:
            check_files(self.store.fs, sp, unit)
            raw = read_files(spark, sp, unit.files)
            view = self._view(raw)
            rows = raw.sparkSession.sql(
                f"SELECT *, {batch_constant(unit.batch)} AS {BATCH} FROM "
                + stored_sql(sp, view, unit.watermark)
            )
            raw.sparkSession.catalog.dropTempView(view)  # (`rows` has resolved it)
        else:
            path = self.store.path(unit.path)
            raw = spark.read.schema(stored_schema(sp)).parquet(path)
            rows = raw.selectExpr("*", f"{batch_constant(unit.batch)} AS {BATCH}")
        return self._cached(rows, {unit.batch: unit})

    def _merge(self, sp: StreamPlan, older: _Slice, newer: _Slice) -> _Slice:
        """One slice of the live rows of two (built from their cached rows when first read)."""
        units = older.units | newer.units
        rows = older.df.sparkSession.sql(f"{older.relation()} UNION ALL {newer.relation()}")
        wanted = -(-sum(u.rows for u in units.values()) // ROWS_PER_PARTITION)
        n = max(1, min(self.parallelism, wanted))
        merged = self._cached(rows.coalesce(n), units)
        merged.parents = [older, newer]
        self._merged.append(merged)
        return merged

    def _cached(self, rows: DataFrame, units: dict[int, StateUnit]) -> _Slice:
        df = rows.persist(StorageLevel.MEMORY_AND_DISK_DESER)
        leaf, builder = _cached_leaf(df)
        return _Slice(dict(units), frozenset(units), df, self._view(leaf), builder)

    def _view(self, df: DataFrame) -> str:
        """`df` as a temp view of its own session, named for this store (kept while in use:
        foreachBatch hands every batch of a run the same session)."""
        name = f"{self._prefix}_{next(self._views)}"
        df.createOrReplaceTempView(name)
        return name

    def _release(self, s: _Slice) -> None:
        """Drop `s`'s view and cache, and those of the parents it still keeps."""
        if s.released:
            return
        s.released = True
        s.df.sparkSession.catalog.dropTempView(s.view)
        s.df.unpersist()
        for parent in s.parents:
            self._release(parent)


def _cached_leaf(df: DataFrame) -> tuple[DataFrame, t.Any]:
    """`df` (persisted) as a DataFrame whose plan is its cache alone, and the cache's builder:
    a slice merged from two others then plans as a union of two cached relations, where the
    plans of the DataFrames themselves would nest every merge of the run. Falls back to `df`
    (and no builder) where Spark's cache manager does not answer so."""
    session = df.sparkSession
    jss = session._jsparkSession
    try:
        cached = jss.sharedState().cacheManager().lookupCachedData(df._jdf)
        if cached.isEmpty():
            return df, None
        jvm = session.sparkContext._jvm
        assert jvm is not None
        relation = cached.get().cachedRepresentation()
        jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(jss, relation)
        builder = relation.cacheBuilder()
    except Py4JError:
        return df, None
    return DataFrame(jdf, session), builder
