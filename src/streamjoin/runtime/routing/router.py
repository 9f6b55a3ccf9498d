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

from streamjoin.adapt import ElasticController, MatrixController
from streamjoin.partition import (
    BicliqueScheme,
    ContRandScheme,
    HashScheme,
    MatrixScheme,
    RangeScheme,
    RowSql,
    Scheme,
    Stats,
    candidates,
    optimal_shape,
)
from streamjoin.runtime.batch.threads import metrics
from streamjoin.runtime.sources import empty_relation

if t.TYPE_CHECKING:
    from pyspark.sql import Observation, SparkSession

    from streamjoin.model import StreamDef
    from streamjoin.plan import Band, JobPlan, QueryPlan
    from streamjoin.runtime.batch.joins import Side
    from streamjoin.runtime.state.manifest import Manifest
    from streamjoin.runtime.state.nextmanifest import StreamStats

PLACE = "_sj_place"
_MASK = "9223372036854775807"


@dataclass(frozen=True, slots=True)
class UnitStats:
    """Rows each place received in one batch: probing delta rows and stored rows read."""

    probe: tuple[int, ...]
    store: tuple[int, ...]
    row_bytes: float = 0.0
    """Mean bytes of a stored row of the query's streams (their state files' bytes / rows)."""

    @property
    def store_bytes(self) -> tuple[int, ...]:
        """State bytes each unit read: its stored rows at the mean bytes of a stored row."""
        return tuple(round(s * self.row_bytes) for s in self.store)

    @property
    def per_unit(self) -> tuple[int, ...]:
        """Input rows per unit (what one task of the join reads)."""
        return tuple(p + s for p, s in zip(self.probe, self.store, strict=True))

    @property
    def skew(self) -> float:
        """Max / mean input per unit (1.0 = perfectly even)."""
        loads = self.per_unit
        mean = sum(loads) / len(loads) if loads else 0.0
        return max(loads) / mean if mean else 1.0


def scheme_from_params(params: dict[str, t.Any]) -> Scheme | None:
    """The scheme described by `params` (as stored in the manifest); None for the hash path."""
    name = params.get("name", "hash")
    if name == "hash":
        return None
    if name == "matrix":
        return MatrixScheme(int(params["n"]), int(params["m"]))
    if name == "biclique":
        return BicliqueScheme(int(params["left"]), int(params["right"]))
    if name == "contrand":
        return ContRandScheme(
            int(params["left"]), int(params["right"]), int(params["d"]), int(params["e"])
        )
    if name == "range":
        return RangeScheme(
            tuple(float(b) for b in params["bounds"]), float(params["lo"]), float(params["hi"])
        )
    msg = f"unknown partitioning scheme {name!r} in the manifest"
    raise ValueError(msg)


def initial_params(qp: QueryPlan, units: int) -> dict[str, t.Any]:
    """The scheme a query starts with: the forced one, or the engine's default path."""
    forced = qp.query.option("partitioning", "auto")
    timed = qp.query.option("time_buckets", "auto") == "true"
    if forced in ("auto", "hash"):
        return {"name": "hash", "time_bucket": True} if timed else {"name": "hash"}
    if forced == "matrix":
        n, m = optimal_shape(1.0, 1.0, _pow2_floor(units))
        return {"name": "matrix", "n": n, "m": m}
    if forced == "biclique":
        left, right = _biclique_split(units)
        return {"name": "biclique", "left": left, "right": right}
    if forced == "contrand":
        half = max(1, units // 2)
        return {
            "name": "contrand",
            "left": half,
            "right": max(1, units - half),
            "d": max(1, half // 2),
            "e": max(1, (units - half) // 2),
        }
    band = qp.band
    if band is None:  # the planner rejects this; kept for a hand-made plan
        msg = f"query {qp.query.name}: range partitioning needs a band predicate"
        raise ValueError(msg)
    return {"name": "range", "bounds": [], "lo": band.lo, "hi": band.hi}


def _biclique_split(units: int) -> tuple[int, int]:
    """Left and right units of a biclique over `units` places."""
    half = max(1, units // 2)
    return half, max(1, units - half)


def _pow2_floor(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


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
        return f"pmod({key}, {self.units})"

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

    def after_batch(
        self,
        batch: int,
        left_rows: int,
        right_rows: int,
        units: UnitStats | None,
        quantiles: t.Sequence[float] | None = None,
        state_rows: tuple[int, int] = (0, 0),
    ) -> str:
        """Feed the batch's counts to the query's controllers, which may change the scheme from
        the next batch on; returns a note for the progress line (the scheme this batch ran
        under, and the change, if any)."""
        before = self.describe()
        name = self.params.get("name")
        adapt = self.qp.query.option("adapt", "true") == "true"
        forced = self.qp.query.option("partitioning", "auto")
        if name == "matrix" and adapt:
            self._reshape_matrix(batch, left_rows, right_rows)
        elif name == "biclique" and adapt and units is not None:
            self._scale_biclique(batch, units)
        elif name == "range" and quantiles:
            bounds = sorted({float(x) for x in quantiles if x is not None})
            self.params = {**self.params, "bounds": bounds}
        elif forced == "auto" and name == "hash" and units is not None and adapt:
            self._leave_hash_if_skewed(batch, units, (left_rows, right_rows), state_rows)
        after = self.describe()
        return before if after == before else f"{before} -> {after} from batch {batch + 1}"

    def describe(self) -> str:
        """The scheme in force, in words."""
        scheme = self.scheme
        text = scheme.describe() if scheme is not None else f"hash on {self.units} units"
        if self.params.get("time_bucket") and self.qp.time_band is not None:
            text += f", keyed by event-time bucket too ({self.qp.time_band.width / 1e6:g} s)"
        return text

    def _reshape_matrix(self, batch: int, left_rows: int, right_rows: int) -> None:
        """Squall's doubling rule: once a side has doubled since the last decision, move to the
        shape of least ILF for the new totals."""
        if self.controller:
            ctl = MatrixController.from_dict(self.controller)
        else:
            shape = (int(self.params["n"]), int(self.params["m"]))
            ctl = MatrixController(shape[0] * shape[1], start=shape, warmup=_WARMUP)
        step = ctl.observe(batch, left_rows, right_rows)
        self.controller = ctl.to_dict()
        if step is not None:
            n, m = step.new_shape
            self.params = {**self.params, "n": n, "m": m}
            self.history.append(
                {"batch": step.batch_effective, "scheme": self.describe(), "ilf": step.ilf_new}
            )

    def _scale_biclique(self, batch: int, units: UnitStats) -> None:
        """BiStream's elastic scaling, per side: a side whose units hold more than T_h of their
        capacity (`unit_rows` rows) for N batches in a row gets units added, one under T_l
        gets units removed (Eq. 7). Rows are routed when read, so added units fill and removed
        ones empty at the next batch: no unit has to drain."""
        capacity = float(self.qp.query.option("unit_rows") or _UNIT_ROWS)
        counts = {"left": int(self.params["left"]), "right": int(self.params["right"])}
        offsets = {"left": 0, "right": counts["left"]}
        saved = self.controller.get("elastic", {})
        elastic: dict[str, t.Any] = {}
        for side in ("left", "right"):
            k = counts[side]
            # Units are Spark tasks, not machines: never fewer than the query asked for (fewer
            # would cut parallelism to save nothing), more when its units fill up.
            floor = _biclique_split(int(self.params.get("units", 2)))[0 if side == "left" else 1]
            ctl = (
                ElasticController.from_dict(saved[side])
                if side in saved
                else ElasticController(
                    side, k, max_units=max(_MAX_UNITS, k), min_units=min(floor, k)
                )
            )
            loads = {u: units.store[offsets[side] + u] / capacity for u in range(k)}
            step = ctl.observe(batch, loads)
            if step is not None:
                counts[side] = len(step.units_after)
                ctl = ElasticController(
                    side,
                    counts[side],
                    max_units=max(_MAX_UNITS, counts[side]),
                    min_units=min(floor, counts[side]),
                )
                self.history.append(
                    {"batch": step.batch_effective, "side": side, "units": counts[side]}
                )
            elastic[side] = ctl.to_dict()
        self.controller = {**self.controller, "elastic": elastic}
        self.params = {**self.params, "left": counts["left"], "right": counts["right"]}

    def _leave_hash_if_skewed(
        self, batch: int, units: UnitStats, delta: tuple[int, int], state: tuple[int, int]
    ) -> None:
        """Hash partitioning while the keys are even; once one unit's input stands out, the
        window's time bucket joins the keys if the query has one (a hot key's rows spread over
        the buckets of their event times, and each meets only the rows of its own and the
        neighbouring buckets), else the cheapest scheme by the cost formulas for the observed
        statistics (from the next batch)."""
        loads = units.per_unit
        total = sum(loads)
        if total < _WARMUP or len(loads) < 2:
            return
        share = max(loads) / total
        # One hot key puts share = top + (1 - top) / J on its unit: solve for top.
        j = len(loads)
        top = max(0.0, (share - 1 / j) / (1 - 1 / j))
        stats = Stats(
            left_rows=state[0],
            right_rows=state[1],
            left_delta=delta[0],
            right_delta=delta[1],
            top_key_share=min(1.0, top),
            units=j,
        )
        best = candidates(bool(self.qp.parts.equi), None, stats)[0].scheme
        timed = self.qp.query.option("time_buckets", "auto") == "auto"
        can_bucket = timed and self.qp.time_band is not None and not self.params.get("time_bucket")
        # A delta row meets, on average, top * top * (the other side's stored and new rows) of
        # the hot key, every one a candidate checked against the window; time buckets cut that
        # to the rows of two buckets for the price of one more probe row per delta row.
        hot = top * top * (sum(state) + sum(delta)) / 2 >= _HOT_CANDIDATES
        if can_bucket and (hot or not isinstance(best, HashScheme)):
            self.params = {**self.params, "time_bucket": True}
        elif not isinstance(best, HashScheme):
            timed_now = bool(self.params.get("time_bucket"))
            self.params = {**params_of(best), "units": j, "time_bucket": timed_now}
        else:
            return
        self.history.append({"batch": batch + 1, "scheme": self.describe(), "skew": top})


_UNIT_ROWS = 1_000_000
"""Default capacity of a biclique unit, in stored rows (the query option ``unit_rows``)."""
_MAX_UNITS = 256

_WARMUP = 1000
"""Rows a controller sees before its first decision (Squall's default)."""

_HOT_CANDIDATES = 8.0
"""Candidates of the hot key per delta row above which its window's time bucket joins the key."""


def params_of(scheme: Scheme) -> dict[str, t.Any]:
    """The manifest form of `scheme` (inverse of `scheme_from_params`)."""
    if isinstance(scheme, MatrixScheme):
        return {"name": "matrix", "n": scheme.n, "m": scheme.m}
    if isinstance(scheme, BicliqueScheme):
        return {"name": "biclique", "left": scheme.left_units, "right": scheme.right_units}
    if isinstance(scheme, ContRandScheme):
        return {
            "name": "contrand",
            "left": scheme.left_units,
            "right": scheme.right_units,
            "d": scheme.d,
            "e": scheme.e,
        }
    if isinstance(scheme, RangeScheme):
        return {"name": "range", "bounds": list(scheme.bounds), "lo": scheme.lo, "hi": scheme.hi}
    return {"name": "hash"}


def key_types(spark: SparkSession, router: QueryRouter) -> tuple[str, ...]:
    """The type both sides of each equality key of `router`'s query are compared in (Spark's
    own coercion), so that equal keys hash equally whatever their declared types."""
    q = router.qp.query
    left, right = (
        f"({empty_relation(stream)}) AS {alias}"
        for alias, stream in ((q.left.alias, router.left), (q.right.alias, router.right))
    )
    exprs = ", ".join(
        f"coalesce({k.left_sql}, {k.right_sql}) AS k{i}" for i, k in enumerate(router.qp.parts.equi)
    )
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
) -> tuple[dict[str, UnitStats], dict[str, str]]:
    """Each query's rows per unit in batch `batch_id`: `counted` (by the state job or the
    files' keys, all as probe rows), else its `observed` views; and its router's choice of the
    next scheme, with `stats` (the batch's rows per stream) and `prev`'s live state. Returns
    the rows per unit and each router's note, by query."""
    units: dict[str, UnitStats] = {}
    notes: dict[str, str] = {}
    state = prev.state_rows()
    for qp in plan.queries:
        q = qp.query
        router = routers[q.name]
        seen = observed.get(q.name, [])
        count = counted.get(q.name)
        quantiles: list[float] = []
        if count is not None:
            probe, store = list(count), [0] * len(count)
        elif seen:
            probe = [0] * seen[0][2]
            store = [0] * seen[0][2]
            for role, obs, n in seen:
                got = metrics(obs)
                target = probe if role == "probe" else store
                for i in range(n):
                    target[i] += int(got.get(f"u{i}", 0))
                quantiles += [x for x in got.get("q") or [] if x is not None]
        if count is not None or seen:
            live = [u for side in q.sides for u in prev.live(side.stream) if u.bytes]
            rows = sum(u.rows for u in live)
            row_bytes = sum(u.bytes for u in live) / rows if rows else 0.0
            units[q.name] = UnitStats(tuple(probe), tuple(store), row_bytes)
        notes[q.name] = router.after_batch(
            batch_id,
            stats[q.left.stream].ok,
            stats[q.right.stream].ok,
            units.get(q.name),
            sorted(quantiles),
            (state.get(q.left.stream, 0), state.get(q.right.stream, 0)),
        )
    return units, notes
