"""Routing a query's join inputs to units under its partitioning scheme, and the units' statistics.

A scheme (``streamjoin.partition``) says, for every row, the places (unit ids) where it is stored
and the places where it probes; a delta row meets a state row at exactly one common place. The
runtime turns this into Spark SQL: each join input gets a ``_sj_place`` column by
``explode(sequence(start, stop, step))`` and the join gains ``place = place``, so Spark's shuffle
sends each place's rows to one task and a hot key is spread over the places its rows were routed
to (content-insensitive schemes), instead of landing on the one task its hash picks.

State is stored once per tuple, without a place: a row's places are a function of its content
(a deterministic tag, ``xxhash64`` of its columns, never ``rand()``) and of the scheme in force,
so they are computed when a batch reads the state. Every batch joins both sides under one
scheme, so a reshape between batches needs no migration and loses or repeats no pair; the
replication a join matrix implies (each left row at m places, each right row at n) is paid in the
batch's shuffle, where it is measured (rows per place), not on disk.

The ``hash`` scheme is the engine's own path (Spark's hash join on the equality keys), so it has no
place column; ``auto`` starts there and the cost formulas move it when the observed per-unit input
is skewed.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from streamjoin.adapt.schemes import next_scheme
from streamjoin.adapt.schemestate import (
    COUNTERS,
    BatchCounts,
    SchemeState,
    UnitStats,
    describe,
    initial_params,
    scheme_from_params,
)
from streamjoin.partition import RowSql, Scheme
from streamjoin.plan.retention import side_retention
from streamjoin.runtime.sources import empty_relation
from streamjoin.runtime.threads import metrics_if_run

if t.TYPE_CHECKING:
    from pyspark.sql import Observation, SparkSession

    from streamjoin.model import StreamDef
    from streamjoin.plan import Band, JobPlan, QueryPlan
    from streamjoin.plan.parts import EquiKey
    from streamjoin.runtime.batch.joins import Side
    from streamjoin.runtime.state.manifest import Manifest
    from streamjoin.runtime.state.nextmanifest import StreamStats

PLACE = "_sj_place"
_MASK = "9223372036854775807"


@dataclass
class QueryRouter:
    """The scheme in force for one query, and how its join inputs are routed under it."""

    qp: QueryPlan
    left: StreamDef
    right: StreamDef
    params: dict[str, t.Any]
    key_types: tuple[str, ...] | None = None
    history: list[dict[str, t.Any]] = field(default_factory=list)
    controller: dict[str, t.Any] = field(default_factory=dict)
    or_key_types: tuple[str, ...] | None = None
    """The type each equality of an OR of equalities is compared in (`key_types_of`)."""

    @property
    def scheme(self) -> Scheme | None:
        """The scheme object (None: the engine's hash path)."""
        return scheme_from_params(self.params)

    def row_sql(self, side: Side, keys: t.Sequence[str] | None = None) -> RowSql:
        """The tag, key and band value of a row of `side`, over its alias (`keys`: the SQL of
        the side's equality keys over other names, e.g. a batch's stored columns)."""
        q = self.qp.query
        alias, stream = (q.left.alias, self.left) if side == "left" else (q.right.alias, self.right)
        cols = ", ".join(f"{alias}.`{c.name}`" for c in stream.columns)
        tag = f"(xxhash64({cols}) & {_MASK})"
        key = None
        if self.qp.parts.equi and self.key_types is not None:
            equi = self.qp.parts.equi
            exprs = keys or [k.left_sql if side == "left" else k.right_sql for k in equi]
            typed = ", ".join(
                f"CAST(({e}) AS {ty})" for e, ty in zip(exprs, self.key_types, strict=True)
            )
            key = f"(xxhash64({typed}) & {_MASK})"
        value = None
        band = self.qp.band
        if band is not None:
            value = f"CAST(({band.left_sql if side == 'left' else band.right_sql}) AS DOUBLE)"
        return RowSql(tag=tag, key=key, value=value)

    @property
    def band(self) -> Band | None:
        """The band whose bucket joins the query's keys: a value band, or the event-time window
        once the router has turned time buckets on."""
        if self.qp.band is not None:
            return self.qp.band
        return self.qp.time_band if self.params.get("time_bucket") else None

    @property
    def units(self) -> int:
        """Units of the join: its scheme's places, or the hash path's hash buckets."""
        scheme = self.scheme
        return scheme.places() if scheme is not None else int(self.params.get("units", 1))

    def unit_sql(self, side: Side, keys: t.Sequence[str] | None = None) -> str:
        """The unit of a routed row of `side`: its place, or on the hash path its key's bucket
        (where Spark's hash partitioning by the key would send it). `keys`: see `row_sql`."""
        if self.scheme is not None:
            return PLACE
        key = self.row_sql(side, keys).key
        if key is None:
            return "0"
        band = self.band
        if band is not None and band is self.qp.time_band:
            # A shuffle on keys and bucket sends the row by both: a stored row by its own bucket.
            v = band.left_sql if side == "left" else band.right_sql
            key = f"(xxhash64({key}, floor(CAST(({v}) AS DOUBLE) / {band.width!r}D)) & {_MASK})"
        return self._unless_null(side, keys, f"pmod({key}, {self.units})")

    def _unless_null(self, side: Side, keys: t.Sequence[str] | None, unit: str) -> str:
        """`unit`, or NULL for a row whose equality key has a NULL (it meets nothing, and the
        operator keeps it in no unit: counted, xxhash64's skipping of NULLs would put every
        such row in one unit, which reads as a hot key)."""
        equi = self.qp.parts.equi
        exprs = keys or [k.left_sql if side == "left" else k.right_sql for k in equi]
        nulls = " OR ".join(f"({e}) IS NULL" for e in exprs)
        return f"CASE WHEN {nulls} THEN NULL ELSE {unit} END" if exprs else unit

    @property
    def placement(self) -> dict[str, t.Any]:
        """The params that place the rows: all but a policy's counters (`COUNTERS`), so that a
        layout built for them outlives a count's change."""
        return {k: v for k, v in self.params.items() if k not in COUNTERS}

    @property
    def key_units(self) -> int:
        """Hash units of the query's equality key on the hash path (as many as it had when the
        skew check moved it off hash)."""
        return int(self.params.get("units", 1))

    def key_unit_sql(self, side: Side, keys: t.Sequence[str] | None = None) -> str:
        """The hash unit of a row's equality key alone, under neither a scheme nor time buckets:
        what tells a query the skew check moved off hash that its keys are even again."""
        key = self.row_sql(side, keys).key
        return (
            "0" if key is None else self._unless_null(side, keys, f"pmod({key}, {self.key_units})")
        )

    def routed(self, side: Side, view: str, role: t.Literal["probe", "store"]) -> str:
        """SQL of `view` (rows of `side`) with one row per place it is routed to for `role`
        (on the hash path: the rows as they are)."""
        q = self.qp.query
        alias = q.left.alias if side == "left" else q.right.alias
        scheme = self.scheme
        if scheme is None:
            return f"SELECT {alias}.* FROM {view} AS {alias}"
        row = self.row_sql(side)
        places = scheme.probe(side, row) if role == "probe" else scheme.store(side, row)
        return (
            f"SELECT {alias}.*, explode(sequence(CAST({places.start} AS BIGINT), "
            f"CAST({places.stop} AS BIGINT), CAST({places.step} AS BIGINT))) AS {PLACE} "
            f"FROM {view} AS {alias}"
        )

    # -- adaptation -------------------------------------------------------------------------
    @classmethod
    def restore(
        cls,
        qp: QueryPlan,
        left: StreamDef,
        right: StreamDef,
        saved: dict[str, t.Any] | None,
        units: int,
    ) -> QueryRouter:
        """The router as the previous batch's manifest left it, or a fresh one (also when the
        state was saved for another query of the same name: the job was edited between runs,
        see `runtime.restart`)."""
        signature = saved.get("signature", qp.query.signature) if saved else None
        if saved is None or signature != qp.query.signature:
            params = initial_params(qp, units)
            params.setdefault("units", units)
            return cls(qp, left, right, params)
        return cls(
            qp,
            left,
            right,
            dict(saved["params"]),
            tuple(saved["key_types"]) if saved.get("key_types") else None,
            list(saved.get("history", [])),
            dict(saved.get("controller", {})),
        )

    def state(self) -> dict[str, t.Any]:
        """What the manifest keeps of this router (JSON-able)."""
        return {
            "params": self.params,
            "key_types": list(self.key_types) if self.key_types else None,
            "history": self.history[-20:],
            "controller": self.controller,
            "signature": self.qp.query.signature,
        }

    def after_batch(self, seen: BatchCounts) -> str:
        """Feed the batch's counts to the query's policies (`adapt.schemes.next_scheme`), which
        may change the scheme from the next batch on; returns a note for the progress line (the
        scheme this batch ran under, and the change, if any)."""
        before = self.describe()
        state = SchemeState(self.params, self.controller, tuple(self.history))
        after = next_scheme(self.qp, state, seen)
        self.params, self.controller = after.params, after.controller
        self.history = list(after.history)
        now = self.describe()
        return before if now == before else f"{before} -> {now} from batch {seen.batch + 1}"

    def describe(self) -> str:
        """The scheme in force, in words."""
        return describe(self.qp, self.params)


def restore_routers(
    plan: JobPlan,
    prev: Manifest,
    units: int,
    forced: t.Mapping[str, dict[str, t.Any]],
) -> dict[str, QueryRouter]:
    """Each two-way query's router as the previous batch left it (its scheme and controllers),
    or under the scheme `forced` for it (`BatchProcessor.set_partitioning`); `units`: the
    units of a query that names none."""
    routers = {}
    for qp in plan.joins:
        q = qp.query
        router = QueryRouter.restore(
            qp,
            plan.job.stream(q.left.stream),
            plan.job.stream(q.right.stream),
            prev.routing.get(q.name),
            int(q.option("units") or units),
        )
        scheme = forced.get(q.name)
        if scheme is not None:
            keep: dict[str, t.Any] = {
                k: router.params[k] for k in ("units", "time_bucket") if k in router.params
            }
            router.params = {"units": units, **scheme, **keep}
            router.controller = {}
        routers[q.name] = router
    return routers


def key_types(spark: SparkSession, router: QueryRouter) -> tuple[str, ...]:
    """The type both sides of each equality key of `router`'s query are compared in (Spark's
    own coercion), so that equal keys hash equally whatever their declared types."""
    return key_types_of(spark, router, router.qp.parts.equi)


def key_types_of(
    spark: SparkSession, router: QueryRouter, keys: t.Sequence[EquiKey]
) -> tuple[str, ...]:
    """`key_types` of equalities `keys` between the sides of `router`'s query."""
    q = router.qp.query
    left, right = (
        f"({empty_relation(stream)}) AS {alias}"
        for alias, stream in ((q.left.alias, router.left), (q.right.alias, router.right))
    )
    exprs = ", ".join(f"coalesce({k.left_sql}, {k.right_sql}) AS k{i}" for i, k in enumerate(keys))
    schema = spark.sql(f"SELECT {exprs} FROM {left} CROSS JOIN {right}").schema
    return tuple(f.dataType.simpleString() for f in schema.fields)


Observed = t.Sequence[tuple[str, "Observation", int]]
"""A query's observed routed views in a batch: role (``probe`` or ``store``), observation,
units."""


def after_batch(
    plan: JobPlan,
    routers: t.Mapping[str, QueryRouter],
    observed: t.Mapping[str, Observed],
    counted: t.Mapping[str, t.Sequence[int]],
    batch_id: int,
    stats: t.Mapping[str, StreamStats],
    prev: Manifest,
    held: t.Mapping[str, t.Sequence[int]] | None = None,
    one_task: t.Container[str] = (),
    keyed: t.Mapping[str, t.Sequence[int]] | None = None,
    quantiles: t.Mapping[str, t.Sequence[float]] | None = None,
) -> tuple[dict[str, UnitStats], dict[str, str]]:
    """Each query's rows per unit in batch `batch_id`: `counted` (by the state job, the files'
    keys or the query's index, all as probe rows; `held`: the rows each of its places holds,
    by the join operator, as stored rows), else its `observed` views; and its router's
    choice of the next scheme, with `stats` (the batch's rows per stream), `prev`'s live
    state, whether one task probed its batch (`one_task`, by query) and, for a query moved off
    hash, its rows per hash unit of its keys (`keyed`); a range query's bounds from its
    operator's rows (`quantiles`). Returns the rows per unit and each router's note, by
    query."""
    units: dict[str, UnitStats] = {}
    notes: dict[str, str] = {}
    state = prev.state_rows()
    for qp in plan.joins:
        q = qp.query
        router = routers[q.name]
        seen = observed.get(q.name, [])
        count = counted.get(q.name)
        splits = list((quantiles or {}).get(q.name, []))
        got = [metrics_if_run(obs) for _, obs, _ in seen] if count is None else []
        ran = [m for m in got if m is not None]
        if count is not None:
            kept = (held or {}).get(q.name)
            probe = list(count)
            store = list(kept) if kept and len(kept) == len(count) else [0] * len(count)
        elif len(ran) < len(got):  # (views run only as an RDD: the batch tells the router nothing)
            seen = []
        elif seen:
            probe = [0] * seen[0][2]
            store = [0] * seen[0][2]
            for (role, _, n), metrics in zip(seen, ran, strict=True):
                target = probe if role == "probe" else store
                for i in range(n):
                    target[i] += int(metrics.get(f"u{i}", 0))
                splits += [x for x in metrics.get("q") or [] if x is not None]
        if count is not None or seen:
            live = [u for side in q.sides for u in prev.live(side.stream) if u.bytes]
            rows = sum(u.rows for u in live)
            row_bytes = sum(u.bytes for u in live) / rows if rows else 0.0
            units[q.name] = UnitStats(tuple(probe), tuple(store), row_bytes)
        seen_counts = BatchCounts(
            batch_id,
            stats[q.left.stream].ok,
            stats[q.right.stream].ok,
            units.get(q.name),
            sorted(splits),
            (state.get(q.left.stream, 0), state.get(q.right.stream, 0)),
            _spans(qp, prev, stats),
            q.name in one_task,
            tuple(k) if (k := (keyed or {}).get(q.name)) is not None else None,
        )
        notes[q.name] = router.after_batch(seen_counts)
    return units, notes


def _spans(
    qp: QueryPlan, prev: Manifest, stats: t.Mapping[str, StreamStats]
) -> tuple[int | None, int | None]:
    """Per side, the event time that the stored rows a batch's rows can meet span: from the
    query's own cut-off (``W - retain``; the stream may keep older rows for another query) or
    the oldest row, to the newest stored or new row; None where there is none."""
    spans: list[int | None] = []
    for side, retain in zip(qp.query.sides, side_retention(qp), strict=True):
        batch = stats[side.stream]
        ranges = [(u.min_ts, u.max_ts) for u in prev.live(side.stream)]
        ranges.append((batch.min_ts, batch.max_ts))
        known = [(lo, hi) for lo, hi in ranges if lo is not None and hi is not None]
        if not known:
            spans.append(None)
            continue
        oldest = min(lo for lo, _ in known)
        if retain is not None and prev.global_wm is not None:
            oldest = max(oldest, prev.global_wm - retain)
        spans.append(max(0, max(hi for _, hi in known) - oldest))
    return spans[0], spans[1]


def check_scheme_change(plan: JobPlan, query: str, params: dict[str, t.Any]) -> None:
    """Fail, naming the cause, where `query` of `plan` cannot be put under the scheme `params`:
    no such query, one that shares its join with others, or a scheme that does not exist."""
    names = [qp.query.name for qp in plan.queries]
    if query not in names:
        msg = f"unknown query {query!r}; the job's queries are {', '.join(names)}"
        raise KeyError(msg)
    group = next((g for g in plan.shared if query in {m.name for m in g.members}), None)
    if group is not None:
        others = ", ".join(m.name for m in group.members if m.name != query)
        msg = (
            f"query {query!r} shares one join with {others}, which runs under its own "
            "scheme; give the query WITH options (it then runs alone) or set "
            "streamjoin.share = false"
        )
        raise KeyError(msg)
    scheme_from_params(params)
