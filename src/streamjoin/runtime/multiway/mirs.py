"""MIR stores (CLASH §III): the join of two streams, kept up to date batch by batch, that a probe
step reads in one hop instead of visiting both streams' stores.

The store M of streams R and S (ordered by their slots' names) holds every pair of their stored
rows that meets the conjuncts between them. Each batch appends its new pairs, tagged by which
of the two inputs is new (column ``_sj_new``: bit 0 for R, bit 1 for S):

    ΔM = ΔR ⋈ S_old (1)  ∪  R_old ⋈ ΔS (2)  ∪  ΔR ⋈ ΔS (3)

A term of a query's delta rule takes each input either without its new rows or with them
(`plan.multiway`), so its view of M is M_old plus the new pairs whose new inputs it takes new:
``(R_old ∪ ΔR) ⋈ S_old = M_old ∪ ΔM[1]``, and so on (`runtime.multiway.terms.newer_bits`). The
delta rule stays exact, so a result is still produced once, in the batch its last row arrives.

A store not kept up to date through the previous batch (at the start, or in the epoch where
the optimizer first picks it) is filled from the streams' stores, once: M_old = R_old ⋈ S_old.
So is every store at a restart: an edited job may keep a stream longer than the store's units
did (a new query with a wider window), and the streams' stores hold every row it needs.
(CLASH starts a new store empty and lets probes visit the old epoch's stores until they
expire; a micro-batch engine can fill it with one join of the stored rows, and from then on
every probe reads one store.) A unit of M expires when the newest event time of one of its
streams is older than that stream's horizon: none of its pairs can meet a new row. A store that no
term reads in a batch is dropped.
"""

from __future__ import annotations

import hashlib
import typing as t
from dataclasses import dataclass

from pyspark.sql import Observation
from pyspark.sql import functions as F

from streamjoin.plan.multiway import pair_step
from streamjoin.plan.probeorder import column_name
from streamjoin.runtime.multiway.terms import renamed, step_sql
from streamjoin.runtime.state.manifest import MirUnit
from streamjoin.runtime.threads import Background, metrics

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.model import StreamDef
    from streamjoin.plan import MultiwayPlan
    from streamjoin.plan.probeorder import Mir
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.manifest import Manifest

NEW = "_sj_new"
"""The column of an MIR row telling which of its streams' rows were new in its batch."""


def mir_name(mir: Mir) -> str:
    """A stable name for the store (its files and the manifest use it)."""
    return "m" + hashlib.sha1(repr(mir.key).encode()).hexdigest()[:12]


@dataclass
class _Kept:
    name: str
    streams: tuple[StreamDef, ...]
    columns: str
    """Its data columns, as a SELECT list."""
    old: str
    """View of its rows stored before the batch."""
    new: str
    """View of the batch's new pairs (ΔM), tagged."""
    filled: bool
    """True when `old` was filled from the streams' stores in this batch."""
    times: tuple[str | None, ...]
    """Per stream, its event-time column's name in the store (None: none)."""


class MirStores:
    """The MIR stores one batch reads: each set up on first use, its new pairs written beside
    the joins, and its live units for the manifest (`finish`)."""

    def __init__(
        self,
        spark: SparkSession,
        store: Checkpoint,
        prev: Manifest,
        batch: int,
        streams: Callable[[MultiwayPlan], Sequence[StreamDef]],
        deltas: Mapping[str, str],
        stored: Callable[[str], str],
        views: list[str],
        cached: list[DataFrame],
        parallelism: int,
        *,
        refill: bool = False,
    ) -> None:
        """`streams`: a plan's input streams in written order; `deltas`: stream -> view of its
        new rows; `stored`: stream -> its stored rows (SQL); `views` and `cached`: the batch's
        temp views and cached frames (the batch releases them); `refill`: fill every store
        from the streams' stores, whatever the previous batch kept (at a restart)."""
        self.spark, self.store, self.prev, self.batch = spark, store, prev, batch
        self.streams, self.deltas, self.stored = streams, deltas, stored
        self.views, self.cached, self.parallelism = views, cached, parallelism
        self.refill = refill
        self._kept: dict[t.Hashable, _Kept] = {}
        self._writes: dict[str, tuple[Background, Observation, _Kept]] = {}

    def view(self, mp: MultiwayPlan, mir: Mir, newer: int) -> str:
        """The rows of `mir` a term of `mp` reads: the stored pairs, plus the new ones whose new
        inputs are among the bits of `newer`."""
        kept = self._keep(mp, mir)
        parts = [f"SELECT {kept.columns} FROM {kept.old}"]
        if newer:
            parts.append(f"SELECT {kept.columns} FROM {kept.new} WHERE ({NEW} & {3 & ~newer}) = 0")
        return "(" + " UNION ALL ".join(parts) + ")"

    def new_pairs(self, mp: MultiwayPlan, mir: Mir, start: int) -> str:
        """The batch's new pairs of `mir` that term `start` of `mp` finds in its first step:
        the start's row is new; the other row may be new only when written after the start."""
        kept = self._keep(mp, mir)
        (other,) = (i for i in mir.inputs if i != start)
        old_only = mir.bit(other) if other < start else 0
        return (
            f"(SELECT {kept.columns} FROM {kept.new} "
            f"WHERE ({NEW} & {mir.bit(start)}) != 0 AND ({NEW} & {old_only}) = 0)"
        )

    def _keep(self, mp: MultiwayPlan, mir: Mir) -> _Kept:
        """The store of `mir`, set up (its views and its write) on its first use this batch."""
        if mir.key in self._kept:
            return self._kept[mir.key]
        if len(mir.inputs) != 2:
            msg = f"MIR stores join two streams, got {len(mir.inputs)} in {mp.query.name}"
            raise ValueError(msg)
        name = mir_name(mir)
        # Store order: by slot name, the same in every query that shares the store.
        (s0, p0), (s1, p1) = sorted(zip(mir.slots, mir.inputs, strict=True))
        st0, st1 = (self.streams(mp)[p] for p in (p0, p1))
        both = ((s0, st0), (s1, st1))
        columns = ", ".join(f"`{column_name(s, c.name)}`" for s, st in both for c in st.columns)
        d0, d1 = renamed(self.deltas[st0.name], s0, st0), renamed(self.deltas[st1.name], s1, st1)
        o0, o1 = renamed(self.stored(st0.name), s0, st0), renamed(self.stored(st1.name), s1, st1)
        forward, back = pair_step(mp, p0, p1), pair_step(mp, p1, p0)
        pieces = [
            f"SELECT {columns}, 1 AS {NEW} FROM ({step_sql(d0, 0, forward, o1)})",
            f"SELECT {columns}, 2 AS {NEW} FROM ({step_sql(d1, 0, back, o0)})",
            f"SELECT {columns}, 3 AS {NEW} FROM ({step_sql(d0, 0, forward, d1)})",
        ]
        new = self._cache(" UNION ALL ".join(pieces), "new")
        units = None if self.refill else self.prev.mirs.get(name)
        if units is not None:
            schema = ", ".join(
                f"`{column_name(s, c.name)}` {c.type.ddl}" for s, st in both for c in st.columns
            )
            paths = [self.store.path(u.path) for u in units]
            # No units: a scan of no files (see `StoreViews.state`).
            old = f"_sj_mir_{len(self.views)}"
            self.spark.read.schema(f"{schema}, {NEW} INT").parquet(*paths).createOrReplaceTempView(
                old
            )
            self.views.append(old)
        else:
            fill = step_sql(o0, 0, forward, o1, probe="planner")
            old = self._cache(f"SELECT {columns}, 0 AS {NEW} FROM ({fill})", "fill")
        times = tuple(
            column_name(s, st.event_time) if st.event_time is not None else None for s, st in both
        )
        kept = _Kept(name, (st0, st1), columns, old, new, units is None, times)
        self._kept[mir.key] = kept
        self._write(kept)
        return kept

    def _cache(self, sql: str, kind: str) -> str:
        df = self.spark.sql(sql).coalesce(self.parallelism).persist()
        view = f"_sj_mir_{kind}_{len(self.views)}"
        df.createOrReplaceTempView(view)
        self.views.append(view)
        self.cached.append(df)
        return view

    def _write(self, kept: _Kept) -> None:
        rows = f"SELECT * FROM {kept.new}"
        if kept.filled:
            rows += f" UNION ALL SELECT * FROM {kept.old}"
        aggs = [F.count(F.lit(1)).alias("rows")]
        aggs += [
            F.expr(f"max(unix_micros(`{c}`))").alias(f"ts{i}")
            for i, c in enumerate(kept.times)
            if c is not None
        ]
        obs = Observation(f"sj_mir_{kept.name}_{self.batch}")
        path = self.store.path(f"mir/b={self.batch}/{kept.name}")
        df = self.spark.sql(rows).observe(obs, *aggs)
        job = Background(lambda: df.write.mode("overwrite").parquet(path))
        self._writes[kept.name] = (job, obs, kept)

    def wait(self) -> None:
        """Wait for the writes (after a failed batch: they read its views)."""
        for job, _, _ in self._writes.values():
            job.wait()

    def finish(
        self, horizon: Callable[[str], int | None]
    ) -> tuple[dict[str, list[MirUnit]], list[str]]:
        """Wait for the writes; every store kept through this batch with its live units, and
        the paths of the units that expired or whose store was dropped.

        `horizon(stream)`: event times older than it can meet no new row (None: all can)."""
        live: dict[str, list[MirUnit]] = {}
        dropped: list[str] = []
        for name, (job, obs, kept) in self._writes.items():
            job.result()
            got = metrics(obs)
            streams = tuple(s.name for s in kept.streams)
            newest = tuple(
                got.get(f"ts{i}") if c is not None else None for i, c in enumerate(kept.times)
            )
            units = list(self.prev.mirs.get(name, []))
            if kept.filled:  # (its old units, if any, are replaced)
                dropped += [u.path for u in units]
                units = []
            unit = MirUnit(name, self.batch, int(got.get("rows", 0)), streams, newest)
            if unit.rows:
                units.append(unit)
            else:
                dropped.append(unit.path)
            live[name] = []
            for u in units:
                bounds = [horizon(s) for s in u.streams]
                dead = any(
                    h is not None and ts is not None and ts < h
                    for h, ts in zip(bounds, u.max_ts, strict=True)
                )
                if dead:
                    dropped.append(u.path)
                else:
                    live[name].append(u)
        for name, units in self.prev.mirs.items():
            if name not in live:
                dropped += [u.path for u in units]
        return live, dropped
