"""The hot copy of the streams' state: live units cached in executor memory as a few slices.

A stream's durable state is one unit per batch (Parquet under the checkpoint, or the input
files it was read from: `runtime.state.sourcefiles`). Reading every live unit back from its
files in every batch costs a file listing, a parse and a task per unit, so a window of minutes
over batches of seconds pays for hundreds of units each batch. Here each unit is cached once:
a sourced stream's as its own batch reads it (`HotState.delta`), any other's by the first batch
after its own, from its files. The cached slices are merged like a counter in base 4 (the newest
four whenever the oldest of them holds no more live rows than the other three), so a stream
keeps about 3·log4(units) slices and each row is copied about log4(units) times over its life.
A merge leaves out the rows of units that expired; a slice whose units all expired is released.
Merges are built by a thread of their own once a batch ends (`HotState.end_batch`), in the time
a live stream waits for its next trigger; until a merge is built, batches read its parents. A
merge is a local checkpoint of its parents' rows: its plan is its own blocks, not theirs.

The cache is only a copy: a batch that fails on a missing file while slices are cached (a
block lost with an executor is rebuilt from files an expired unit may have had deleted) is run
again from the manifest's files by the processor (`HotState.failed`, `HotState.clear`). Each
slice carries its units' batch ids (`BATCH`), so a relation holds the rows of live units only,
whatever a slice still keeps.
"""

from __future__ import annotations

import itertools
import threading
import typing as t
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from streamjoin.runtime.sources import prefixed
from streamjoin.runtime.state.cachedframes import cached_leaf, checkpoint_rdd
from streamjoin.runtime.state.sourcefiles import check_files, copy_base, read_files, stored_sql
from streamjoin.runtime.state.sqlvalues import as_decimal, batch_constant
from streamjoin.runtime.threads import Background, detach_from_batch

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.plan import StreamPlan
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.manifest import Manifest, StateUnit

BATCH = "_sj_b"
"""Column of a slice: the batch whose unit the row belongs to (a `batch_constant`, so that
a batch's new ids compile no new code)."""
FAN_IN = 4
"""Slices a merge takes: the newest `FAN_IN` once the oldest of them holds no more live rows
than the others together. Each row is then copied about log4(units) times, half as often as
merging pairs, and the batches read up to 3 slices per size (docs/dev-log.md)."""
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
    df: DataFrame | None = None
    """The persisted rows (unpersisted on release); None for a merge not built yet."""
    view: str = ""
    """A temp view of the cached rows themselves (`cached_leaf`)."""
    builder: t.Any = None
    """Spark's builder of the cached rows (None: not known), to tell when they are built."""
    blocks: t.Any = None
    """A merged slice's checkpointed RDD (JVM), whose blocks its release removes."""
    parents: list[_Slice] = field(default_factory=list)
    """The slices merged into this one, kept until its rows are built from theirs."""
    released: bool = False
    failed: bool = False
    """A merge whose build failed: its parents stand in for it again."""

    def built(self) -> bool:
        """Whether every partition of the rows is cached (unknown: taken as built)."""
        if self.df is None:
            return False
        return self.builder is None or bool(self.builder.isCachedColumnBuffersLoaded())

    def parts(self) -> list[_Slice]:
        """The slices a batch reads for this one: itself, or while it is a merge not built
        yet, its parents' parts."""
        if self.df is not None:
            return [self]
        return [q for p in self.parents for q in p.parts()]

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
        """Merged slices whose parents wait for their rows to be built (released at the
        end of the first batch after: a batch's SQL may name them until it ends)."""
        self._queue: list[_Slice] = []
        """Merges the batch decided, oldest first (one may take another as a parent)."""
        self._lock = threading.Lock()
        """Held while a slice's rows are set or it is released (the builder thread does one,
        the batch the other)."""
        self._builder: Background | None = None
        self._stopping = False
        self._session: SparkSession | None = None
        self._pending: dict[tuple[str, int], _Slice] = {}
        """Each sourced stream's new rows of the last batches, cached as the batch read them,
        by stream and batch: the unit the batch added, once a manifest names it."""
        self._prefix = f"_sj_hot_{next(_processors)}"
        self._views = itertools.count()

    def failed(self, err: BaseException) -> bool:
        """Whether a batch's `err` may be the cache's: Spark recomputes a cached block lost with
        an executor from the files it was read from, and a slice may still hold units that
        expired since, whose files may be gone; a merge's checkpointed block lost with an
        executor cannot be recomputed at all."""
        text = str(err)
        missing = any(m in text for m in _LOST)
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
        for s in (q for top in self._sync(spark, sp, prev) for q in top.parts()):
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
        # (Streams' deltas are read side by side: a snapshot of the keys, each stream its own.)
        for key in [k for k in list(self._pending) if k[0] == sp.name and k[1] != batch - 1]:
            self._release(self._pending.pop(key))
        rows = spark.sql(f"SELECT *, {batch_constant(batch)} AS {BATCH} FROM {relation}")
        pending = self._cached(rows, {})
        self._pending[sp.name, batch] = pending
        return pending.view

    def end_batch(self) -> None:
        """Release the slices merged away whose merged slice is built, and start building the
        merges decided since (Spark would build a merged slice from its parents' files anew,
        and outside its cache manager, once their caches are gone: parents wait)."""
        self._release_merged()
        merges, self._queue = self._queue, []
        if merges:
            after = self._builder
            self._builder = Background(lambda: self._build_all(after, merges))

    def wait(self) -> None:
        """Wait until the merges started are built."""
        if self._builder is not None:
            self._builder.wait()

    def clear(self) -> None:
        """Release every slice: the next batch reads its units from their files again."""
        self._queue, self._stopping = [], True
        self.wait()
        self._stopping = False
        for slices in self._slices.values():
            for s in slices:
                self._release(s)
        for pending in self._pending.values():
            self._release(pending)
        for merged in self._merged:
            self._release(merged)
        self._slices, self._synced, self._pending, self._merged = {}, {}, {}, []

    def _release_merged(self) -> None:
        waiting = []
        for merged in self._merged:
            if merged.released or merged.failed:
                continue
            if merged.built():
                for parent in merged.parents:
                    self._release(parent)
                merged.parents = []
            else:
                waiting.append(merged)
        self._merged = waiting

    def _sync(self, spark: SparkSession, sp: StreamPlan, prev: Manifest) -> list[_Slice]:
        """`sp`'s slices brought up to `prev`: expired units forgotten, new ones read, merges
        decided (`_merge`)."""
        self._session = spark
        slices = self._slices.setdefault(sp.name, [])
        if self._synced.get(sp.name) == prev.batch and slices:
            return slices
        live = {u.batch: u for u in prev.live(sp.name)}
        kept = []
        for s in _unmerged(slices):
            _forget_expired(s, live)
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
            k = FAN_IN
            while len(kept) >= k and kept[-k].rows <= sum(s.rows for s in kept[1 - k :]):
                kept[-k:] = [self._merge(kept[-k:])]
        self._slices[sp.name] = kept
        self._synced[sp.name] = prev.batch
        return kept

    def _unit_slice(self, spark: SparkSession, sp: StreamPlan, unit: StateUnit) -> _Slice:
        """A slice of one unit, read from its files (cached when a batch first scans it)."""
        if unit.files:
            check_files(self.store.fs, sp, unit)
            raw = read_files(spark, sp, unit.files, copy_base(unit))
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

    def _merge(self, parents: list[_Slice]) -> _Slice:
        """One slice of the live rows of `parents`, built later (`_build`): batches read them
        until then."""
        units = {b: u for p in parents for b, u in p.units.items()}
        held = frozenset(b for p in parents for b in p.held)
        merged = _Slice(units, held, parents=list(parents))
        self._queue.append(merged)
        self._merged.append(merged)
        return merged

    def _build_all(self, after: Background | None, merges: list[_Slice]) -> None:
        """Build `merges` in order, once the builds started before are done (the builder
        thread's work, under Spark properties of its own rather than the batch's)."""
        if after is not None:
            after.wait()
        assert self._session is not None  # (a merge is decided in `_sync`, which sets it)
        detach_from_batch(self._session, "streamjoin: merge cached state slices")
        for merged in merges:
            if self._stopping:
                return
            if merged.released:
                continue
            try:
                self._build(merged)
            except Exception:  # (its parents stay; `_sync` puts them back in its place)
                merged.failed = True

    def _build(self, merged: _Slice) -> None:
        """Cache `merged`'s rows from its parents' and read them once, so that they are built
        before a batch reads them."""
        assert self._session is not None  # (a merge is decided in `_sync`, which sets it)
        parts = [q for p in merged.parents for q in p.parts()]
        rows = self._session.sql(" UNION ALL ".join(q.relation() for q in parts))
        wanted = -(-merged.rows // ROWS_PER_PARTITION)
        n = max(1, min(self.parallelism, wanted))
        # A local checkpoint rather than a cache: a cached merge's plan keeps its parents'
        # caches' plans and lineage, and those theirs, so the run's merges formed one chain that
        # grew with every batch until a task no longer deserialized (the soak benchmark); a
        # checkpoint's plan is its own blocks.
        df = rows.coalesce(n).localCheckpoint(True, StorageLevel.MEMORY_AND_DISK)
        built = _Slice({}, frozenset(), df, self._view(df), blocks=checkpoint_rdd(df))
        with self._lock:
            if not merged.released:
                merged.view, merged.builder = built.view, built.builder
                merged.df = built.df  # (last: a batch reads a merge whose `df` is set)
                return
        self._release(built)  # (its units expired while it was built)

    def _cached(self, rows: DataFrame, units: dict[int, StateUnit]) -> _Slice:
        df = rows.persist(StorageLevel.MEMORY_AND_DISK_DESER)
        leaf, builder = cached_leaf(df)
        return _Slice(dict(units), frozenset(units), df, self._view(leaf), builder)

    def _view(self, df: DataFrame) -> str:
        """`df` as a temp view of its own session, named for this store (kept while in use:
        foreachBatch hands every batch of a run the same session)."""
        name = f"{self._prefix}_{next(self._views)}"
        df.createOrReplaceTempView(name)
        return name

    def _release(self, s: _Slice) -> None:
        """Drop `s`'s view and cache, and those of the parents it still keeps."""
        with self._lock:
            if s.released:
                return
            s.released = True
            df = s.df
        if df is not None:
            df.sparkSession.catalog.dropTempView(s.view)
            df.unpersist()
        if s.blocks is not None:
            s.blocks.unpersist(False)
        for parent in s.parents:
            self._release(parent)


_LOST = ("FILE_NOT_EXIST", "FileNotFoundException", "CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND")
"""What a batch's error says when a slice's rows were lost: a file gone, or a checkpoint's
block gone with its executor."""


def _unmerged(slices: list[_Slice]) -> list[_Slice]:
    """`slices` with each merge whose build failed replaced by its parents."""
    return [q for s in slices for q in (_unmerged(s.parents) if s.failed else [s])]


def _forget_expired(s: _Slice, live: dict[int, StateUnit]) -> None:
    """Keep in `s` (and in the parents a batch may read for it) only the units in `live`."""
    s.units = {b: u for b, u in s.units.items() if u.same_rows(live.get(b))}
    for parent in s.parents:
        _forget_expired(parent, live)
