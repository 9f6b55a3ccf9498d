"""Step 4 of a batch for multi-way queries on the join operator: each query's new
combinations from its chain of two-way indexes (`plan.chain`), one level's new rows the next
level's new left rows, all in the job that writes them (`levels`).

A level's input is ``JoinIndex``'s layout (`batch.indexsql.input_parts`): side, the hash of its
equality keys (in the type Spark compares each in), its time (the least ``ts_i + retain_i`` of
its rows: `plan.chain`), and the row as a struct. Each input's columns go by their unique names
(``_sj_<slot>_<column>``), so a level's left rows are the columns of every input before it.
Its output, planned once and made in the probe's tasks, is the pairs that meet its conditions,
flattened; the last level's is the query's SELECT. A level built from the units joins the
committed rows of the inputs before it in Spark SQL for its left side (its MIR).
"""

from __future__ import annotations

import math
import typing as t
from functools import partial

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame

from streamjoin.plan.chain import Chain, Level, chain_order, directions, plan_chain, routes
from streamjoin.plan.probeorder import column_name
from streamjoin.plan.shedding import counts_shed_pairs, sheds
from streamjoin.runtime.batch.indexfit import CHAIN_ONE_TASK_ROWS, one_task, shed_cuts
from streamjoin.runtime.batch.indexplans import batch_input, batch_rows
from streamjoin.runtime.batch.shedding import Shed, allowances
from streamjoin.runtime.batch.shedding import directions as aliases_of
from streamjoin.runtime.multiway.terms import renamed
from streamjoin.runtime.sources import empty_relation

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from streamjoin.model import StreamDef
    from streamjoin.plan import MultiwayPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.multiway.levels import LevelIndexes
    from streamjoin.runtime.state.stores import StoreViews


class ChainJoins:
    """The multi-way queries of a processor on their level indexes."""

    def __init__(self, levels: LevelIndexes) -> None:
        self.levels = levels
        self._chains: dict[str, Chain] = {}
        self._types: dict[str, tuple[str, ...]] = {}
        """Level key → the type each of its equalities is compared in."""
        self._planned: dict[tuple[str, ...], tuple[list[t.Any], list[t.Any]] | None] = {}
        """A chain's level keys → its plans over the batch's own rows (None: none)."""
        self._shed: dict[str, tuple[Shed, Chain]] = {}
        """The batch's shedding queries: what they shed, and their chains."""

    def frames(
        self,
        ctx: BatchContext,
        plans: Sequence[MultiwayPlan],
        deltas: Mapping[str, str],
        stores: StoreViews,
    ) -> dict[str, list[DataFrame]]:
        """The new rows in the batch (lazy) of each multi-way query planned by `plans`."""
        self._shed = {}
        found = {}
        for mp in plans:
            query = _Query(self, ctx, mp, deltas, stores)
            found[mp.query.name] = [query.rows()]
            if query.shed is not None:
                self._shed[mp.query.name] = (query.shed, query.chain)
        # (What a chain no query runs any more planned goes: a served job's queries come and
        # go, and an order changes at an epoch.)
        chains = {f"{mp.query!r}@{chain_order(mp)}" for mp in plans}
        self._chains = {k: c for k, c in self._chains.items() if k in chains}
        levels = {level.key for c in self._chains.values() for level in c.levels}
        self._types = {k: v for k, v in self._types.items() if k in levels}
        self._planned = {k: v for k, v in self._planned.items() if k[0] in levels}
        return found

    def take_shed(self, ctx: BatchContext) -> dict[str, Shed]:
        """The batch's shedding queries, with the pairs each level's sides wrote (once the job
        that ran their probes is done): each input's, and each combination's that probed a
        level above the first, with how many of them probed."""
        out = {}
        for name, (shed, chain) in self._shed.items():
            found: dict[str, int] = {}
            fed: dict[str, int] = {}
            names = directions(chain, aliases_of(shed.query))
            before = 0
            for n, (level, (left, right)) in enumerate(zip(chain.levels, names, strict=True)):
                found[left], found[right] = self.levels.shed_counts(
                    ctx.spark, level.key, ctx.batch_id
                )
                if n:
                    fed[left] = before
                before = found[left] + found[right]
            shed.found, shed.fed = found, fed
            out[name] = shed
        self._shed = {}
        return out

    def chain(self, ctx: BatchContext, mp: MultiwayPlan) -> Chain:
        """`mp`'s chain, planned once per query definition and order (a served job may give a
        query's name to another; the optimizer may change the order at an epoch)."""
        key = f"{mp.query!r}@{chain_order(mp)}"
        if key not in self._chains:
            self._chains[key] = plan_chain(ctx.plan.job, mp)
        return self._chains[key]

    def batch_plans(
        self,
        ctx: BatchContext,
        chain: Chain,
        plan: Callable[[], tuple[list[t.Any], list[t.Any]] | None],
    ) -> tuple[list[t.Any], list[t.Any]] | None:
        """`chain`'s plans of its levels' inputs and outputs over the batch's own rows
        (`_Query._plan_batch`), planned once per chain and layout of the batch's rows; None
        where the batch's rows are not rows Spark planned or the plans cannot be made once
        (then each level is planned each batch)."""
        key = tuple(level.key for level in chain.levels)
        rows = ctx.rows._jdf
        if key in self._planned:
            made = self._planned[key]
            if made is None or made[0][0].fits(rows):  # (rows in the layout: one call)
                return made
        jvm = ctx.spark.sparkContext._jvm
        assert jvm is not None
        if not jvm.streamjoin.operator.BatchInput.planned(rows):
            return None
        try:
            self._planned[key] = plan()
        except Py4JJavaError:  # (an optimisation only: each level is planned each batch)
            self._planned[key] = None
        return self._planned[key]

    def key_types(
        self, ctx: BatchContext, level: Level, empty: Callable[[], tuple[str, str]]
    ) -> tuple[str, ...]:
        """The type both ends of each of `level`'s equalities are compared in (Spark's own
        coercion, over `empty`'s relations of no rows of its two sides)."""
        if level.key not in self._types:
            left, right = empty()
            exprs = ", ".join(f"coalesce({a}, {b}) AS k{i}" for i, (a, b) in enumerate(level.keys))
            schema = ctx.spark.sql(f"SELECT {exprs} FROM ({left}) CROSS JOIN ({right})").schema
            self._types[level.key] = tuple(f.dataType.simpleString() for f in schema.fields)
        return self._types[level.key]


def on_operator(ctx: BatchContext, operates: bool) -> bool:
    """Whether the batch's multi-way queries run on their levels' indexes: in a run with the
    operator (`operates`), where none of them counts what its shed probes would have found
    (``shed_count = 'exact'``, an audit: on the cached slices, `multiway.joins`, each
    input's skipped rows' terms are counted again)."""
    exact = any(sheds(mp.query) and counts_shed_pairs(mp.query) for mp in ctx.plan.multiway)
    return operates and not exact


class _Query:
    """One multi-way query's work in one batch."""

    def __init__(
        self,
        joins: ChainJoins,
        ctx: BatchContext,
        mp: MultiwayPlan,
        deltas: Mapping[str, str],
        stores: StoreViews,
    ) -> None:
        self.joins, self.ctx, self.mp, self.deltas, self.stores = joins, ctx, mp, deltas, stores
        self.chain = joins.chain(ctx, mp)
        self.streams: list[StreamDef] = [ctx.plan.job.stream(s.stream) for s in mp.query.sides]
        # (JAQPOT on a chain: only an input's rows are rationed; a level's new combinations
        # all probe, as many as the inputs' allowances let through.)
        self.shed: Shed | None = None
        if sheds(mp.query):
            aliases = aliases_of(mp.query)
            ways, stay = routes(self.chain, aliases), self._residence(aliases)
            given = allowances(ctx.prev, mp.query, ctx.arrivals, ways, stay)
            assert given is not None  # (a query that sheds)
            self.shed = Shed(mp.query, given, routes=ways, residence=stay)

    def _residence(self, aliases: Sequence[str]) -> dict[str, float]:
        """Seconds a row stays in each input's state and each level's combinations'
        (`plan.chain`: the shortest of its inputs'); unbounded: infinite."""
        keep = [math.inf if r is None else r / 1e6 for r in self.mp.retain_us]
        stay = dict(zip(aliases, keep, strict=True))
        for level, (left, _) in zip(
            self.chain.levels, directions(self.chain, aliases), strict=True
        ):
            stay.setdefault(left, min(keep[i] for i in level.inputs))
        return stay

    def rows(self) -> DataFrame:
        """The query's new rows: each level probed with the level before's new rows; where
        the batch is one task's rows in the driver's JVM, every level in that task, of the
        batch's own rows (`batch_plans`)."""
        ctx, chain = self.ctx, self.chain
        wm = ctx.watermark
        fits = one_task(ctx, *ctx.plan.streams, most=CHAIN_ONE_TASK_ROWS)
        if fits and not self.joins.levels.on_cluster(ctx.spark):
            planned = self.joins.batch_plans(ctx, chain, self._plan_batch)
            if planned is not None:
                levels = [
                    (level.key, partial(self._stored, level), self._parts(level))
                    for level in chain.levels
                ]
                return self.joins.levels.probe_chain(ctx, levels, (wm, wm), planned, self._cuts())
        plans = [ctx.plan.stream(s.name) for s in self.streams]
        together = one_task(ctx, *plans)
        left = self._input(chain.order[0], self.deltas[self.streams[chain.order[0]].name])
        cuts = self._cuts()
        found: DataFrame | None = None
        for n, level in enumerate(chain.levels):
            last = n == len(chain.levels) - 1
            right = self._input(level.new, self.deltas[self.streams[level.new].name])
            delta = ctx.spark.sql(self._level_sql(level, left, right))
            found = self.joins.levels.probe(
                ctx,
                level.key,
                delta,
                lambda level=level: self._stored(level),  # type: ignore[misc]
                self._parts(level),
                (wm, wm),
                lambda pairs, level=level, last=last: self._output(level, pairs, last),  # type: ignore[misc]
                together,
                cuts[n],
            )
            left = ctx.scratch.view(found, f"_sj_chain_{len(ctx.scratch.views)}")
        assert found is not None
        return found

    def _cuts(self) -> list[str]:
        """Per level, a shedding query's cuts (``JoinIndex.probing``; "": it does not shed):
        the first level's inputs' allowances, a later level's input's; its combinations all
        probe. Its skipped rows' pairs are estimated (`Shed`)."""
        if self.shed is None:
            return [""] * len(self.chain.levels)
        given = self.shed.allowances
        return [
            shed_cuts(given.get(left, 1.0), given[right], count=False)
            for left, right in directions(self.chain, aliases_of(self.mp.query))
        ]

    def _parts(self, level: Level) -> int:
        """`level`'s partitions: by its equality keys, or one (a nested loop)."""
        return self.ctx.parallelism if level.keys else 1

    def _plan_batch(self) -> tuple[list[t.Any], list[t.Any]] | None:
        """Per level, the ``BatchInput`` of its new rows made from the batch's own rows (the
        first level's both sides, a later level's its input: its left rows are the level
        before's) and of its output (the next level's left rows, the last level's the query's
        rows), planned over rows in the batch's layout, none of them; None where one cannot
        be planned once (`BatchInput.of`)."""
        ctx, chain, spark = self.ctx, self.chain, self.ctx.spark
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        operator, rows = jvm.streamjoin.operator, batch_rows(ctx)

        def new(i: int) -> str:
            return self._input(i, rows(ctx.plan.stream(self.streams[i].name)))

        def index(i: int) -> int:
            return ctx.plan.stream(self.streams[i].name).index

        inputs, outputs = [], []
        for n, level in enumerate(chain.levels):
            left = new(chain.order[0]) if n == 0 else None
            read = [index(level.new), *([index(chain.order[0])] if n == 0 else [])]
            made = batch_input(ctx, self._level_parts(level, left, new(level.new), late=True), read)
            if made is None:
                return None
            none = DataFrame(operator.JoinIndex.nopairs(made.nothing(ctx.rows._jdf)), spark)
            pairs = ctx.scratch.view(none, f"_sj_pairs_{len(ctx.scratch.views)}")
            if n == len(chain.levels) - 1:
                sql = self._output(level, pairs, last=True)
            else:
                met = self._output(level, pairs, last=False)
                sql = self._level_parts(chain.levels[n + 1], met, None)[0]
            output = operator.BatchInput.output(spark.sql(sql)._jdf)
            if output is None:
                return None
            inputs.append(made)
            outputs.append(output)
        return inputs, outputs

    def _input(self, i: int, rows: str) -> str:
        """SQL of input `i`'s rows of relation `rows` under their unique names, its
        selections applied."""
        sql = renamed(rows, self.mp.slots[i], self.streams[i])
        filters = self.chain.filters[i]
        if filters:
            sql = f"SELECT * FROM ({sql}) WHERE " + " AND ".join(f"({f})" for f in filters)
        return sql

    def _stored(self, level: Level) -> DataFrame | None:
        """`level`'s committed rows in its index's layout: the join of the inputs before it
        (its MIR) and its input's rows; None where no input of it has any."""
        ctx, mp = self.ctx, self.mp
        inputs = (*level.inputs, level.new)
        if not any(ctx.prev.live(self.streams[i].name) for i in inputs):
            return None
        wm = ctx.watermark
        stored = {}
        for i in inputs:
            keep = mp.retain_us[i]
            lo = wm - keep if wm is not None and keep is not None else None
            sp = ctx.plan.stream(self.streams[i].name)
            views = ctx.scratch.views
            rel = self.stores.state(ctx.spark, sp, ctx.prev, lo, None, views, cached=False)
            stored[i] = self._input(i, rel)
        left = f"({stored[level.inputs[0]]})"
        for earlier in self.chain.levels:
            if earlier.new not in level.inputs:
                break
            on = " AND ".join(f"({c})" for c in earlier.conditions) or "TRUE"
            left = f"(SELECT * FROM {left} JOIN ({stored[earlier.new]}) ON {on})"
        return ctx.spark.sql(self._level_sql(level, f"SELECT * FROM {left}", stored[level.new]))

    def _columns(self, inputs: Sequence[int]) -> str:
        """The DDL of a struct of `inputs`' columns under their unique names."""
        fields = ", ".join(
            f"`{column_name(self.mp.slots[i], c.name)}`: {c.type.ddl}"
            for i in inputs
            for c in self.streams[i].columns
        )
        return f"STRUCT<{fields}>"

    def _empty(self, inputs: Sequence[int]) -> str:
        """A relation of `inputs`' columns under their unique names, no rows."""
        parts = []
        for i in inputs:
            stream = self.streams[i]
            parts.append(f"({renamed(f'({empty_relation(stream)})', self.mp.slots[i], stream)})")
        return "SELECT * FROM " + " CROSS JOIN ".join(parts)

    def _time(self, inputs: Sequence[int]) -> str:
        """SQL of a row's time in a level (`plan.chain`): the least ``ts_i + retain_i`` of its
        inputs' rows; NULL (kept for good) where no input of them is bounded."""
        mp, ends = self.mp, []
        for i in inputs:
            time, keep = mp.times[i], mp.retain_us[i]
            if time is not None and keep is not None:
                ends.append(f"unix_micros(`{column_name(mp.slots[i], time)}`) + {keep}")
        if not ends:
            return "CAST(NULL AS BIGINT)"
        return ends[0] if len(ends) == 1 else f"least({', '.join(ends)})"

    def _level_sql(self, level: Level, left: str, right: str) -> str:
        """SQL of `level`'s index input from relations `left` (its left side's columns) and
        `right` (its input's)."""
        return " UNION ALL ".join(self._level_parts(level, left, right))

    def _level_parts(
        self, level: Level, left: str | None, right: str | None, late: bool = False
    ) -> list[str]:
        """The SELECT of each side's rows of `level`'s index input from relations `left` (its
        left side's columns) and `right` (its input's), a side without one left out; with
        `late`, each row's event time last (a batch's own row: ``ChainProbe``'s late test)."""
        sides = ((0, level.inputs, left), (1, (level.new,), right))
        structs = [self._columns(level.inputs), self._columns((level.new,))]
        if level.keys:
            empty = lambda: (self._empty(level.inputs), self._empty((level.new,)))  # noqa: E731
            types = self.joins.key_types(self.ctx, level, empty)
        parts = []
        for side, inputs, rel in sides:
            if rel is None:
                continue
            key = "CAST(0 AS BIGINT)"
            if level.keys:
                ends = [f"CAST({k[side]} AS {ty})" for k, ty in zip(level.keys, types, strict=True)]
                null = " OR ".join(f"({e}) IS NULL" for e in ends)
                key = f"CASE WHEN {null} THEN NULL ELSE xxhash64({', '.join(ends)}) END"
            row = "struct(_sj_in.*)"
            nothing = f"CAST(NULL AS {structs[1 - side]})"
            both = (row, nothing) if side == 0 else (nothing, row)
            tail = f", {self._event(inputs[0])} AS _sj_evt" if late else ""
            parts.append(
                f"SELECT {side} AS _sj_side, {key} AS _sj_key, {self._time(inputs)} AS _sj_ts, "
                f"{both[0]} AS _sj_l, {both[1]} AS _sj_r{tail} FROM ({rel}) AS _sj_in"
            )
        return parts

    def _event(self, i: int) -> str:
        """SQL of input `i`'s event time in microseconds (NULL: it has none)."""
        event = self.streams[i].event_time
        if event is None:
            return "CAST(NULL AS BIGINT)"
        return f"unix_micros(`{column_name(self.mp.slots[i], event)}`)"

    def _output(self, level: Level, pairs: str, last: bool) -> str:
        """SQL of `level`'s rows from its candidate pairs in relation `pairs`: those that meet
        its conditions, flattened; the last level's, the query's SELECT."""
        where = " AND ".join(f"({c})" for c in level.conditions) or "TRUE"
        met = f"SELECT * FROM (SELECT _sj_l.*, _sj_r.* FROM {pairs}) WHERE {where}"
        if not last:
            return met
        select = ", ".join(f"{sql} AS `{alias}`" for sql, alias in self.mp.select)
        return f"SELECT {select} FROM ({met})"
