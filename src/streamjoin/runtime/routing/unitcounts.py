"""The automatic hash path's rows per unit, counted by the state job or from the batch's files.

A query on the automatic hash path still watches where the key's hash sends each delta row, so
that skew is seen and its scheme can move away from hashing (`routing`). When the equality keys
are bare columns, the state job's observation, which reads every input row anyway, counts them:
the unit is `pmod(xxhash64(key), units)` over the batch's stored column. Observed views in the
join instead cost three DataFrames and a view per side per batch, each analysed in the JVM, and
a `CollectMetrics` in the join's plan (docs/dev-log.md has the measurement). A batch
whose statistics its files' footers give runs no state job: every
``streamjoin.hash.skewCheckEvery``-th one counts in a job of its own that reads only the keys of
those files (`files_sql`; `adapt.skewcheck.checks_skew` picks the batches): a job is a fixed
cost, so a key that stays hot is seen within that many batches. A query that its executor-memory
index serves (`batch.indexed`) is counted by the index's probe, which sees every delta row's key
hash anyway: every batch, and without that job. A query the skew check moved off hash is counted
by its key's hash alone, by the state job or that job (its index counts its scheme's places):
its way back to hash (`adapt.hashskew`).
"""

from __future__ import annotations

import typing as t

from pyspark.sql import functions as F

from streamjoin.runtime.routing.router import key_types
from streamjoin.runtime.sources import prefixed
from streamjoin.runtime.threads import Background

if t.TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from pyspark.sql import Column, SparkSession

    from streamjoin.model.job import JoinSide
    from streamjoin.plan import JobPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.joins import Side
    from streamjoin.runtime.routing.router import QueryRouter
    from streamjoin.runtime.state.sourcefiles import SourcedUnits


class InputUnitCounts:
    """For one batch: which queries are counted (by the state job's observation, from the
    files' keys, or by their index's probe), the columns, aggregates or SQL that count them,
    and their counts."""

    def __init__(self) -> None:
        self.sides: dict[str, list[tuple[int, str]]] = {}
        """Counted queries by name: each side's stream index and unit SQL over stored names."""
        self.counts: dict[str, list[int]] = {}
        """Their rows per unit in this batch, both sides together (`read`, `read_rows`)."""
        self.moved: set[str] = set()
        """Those the skew check moved off hash, counted by their keys' hash units."""

    def __contains__(self, query: str) -> bool:
        return query in self.sides

    def choose(
        self, spark: SparkSession, plan: JobPlan, routers: Mapping[str, QueryRouter]
    ) -> None:
        """Pick the queries on the automatic hash path whose equality keys are columns, and
        those the skew check moved off it (``moved``: counted by their keys' hash alone, to
        tell when it may return); their schemes are those the previous batch left, so this
        runs every batch."""
        self.sides, self.counts, self.moved = {}, {}, set()
        for qp in plan.joins:
            q = qp.query
            router = routers[q.name]
            automatic = router.scheme is None and q.option("partitioning", "auto") == "auto"
            moved = bool(router.params.get("moved"))
            if not ((moved or (automatic and router.band is None)) and qp.parts.equi):
                continue
            if q.option("adapt", "true") != "true":
                continue
            sides: list[tuple[int, str]] = []
            refs: tuple[tuple[Side, JoinSide], ...] = (("left", q.left), ("right", q.right))
            for side, ref in refs:
                sp = plan.stream(ref.stream)
                exprs = [k.left_sql if side == "left" else k.right_sql for k in qp.parts.equi]
                columns = [column_of(e, ref.alias) for e in exprs]
                if any(c is None for c in columns):
                    break
                if router.key_types is None:
                    router.key_types = key_types(spark, router)
                keys = [f"`{prefixed(sp.index, c)}`" for c in columns if c is not None]
                unit = router.key_unit_sql(side, keys) if moved else router.unit_sql(side, keys)
                sides.append((sp.index, unit))
            else:
                self.sides[q.name] = sides
                if moved:
                    self.moved.add(q.name)

    def units(self, name: str, routers: Mapping[str, QueryRouter]) -> int:
        """The units query `name` is counted in: its keys' hash units where it was moved off
        hash, else its router's."""
        router = routers[name]
        return router.key_units if name in self.moved else router.units

    def take_moved(self) -> dict[str, list[int]]:
        """The counts of the queries moved off hash, taken out of `counts` (whose rows per unit
        are their schemes' places, which their index counts)."""
        return {name: self.counts.pop(name) for name in self.moved if name in self.counts}

    def columns(self) -> list[Column]:
        """Each counted side's unit of an ok row (NULL for other rows), to add to the input."""
        return [
            F.expr(f"CASE WHEN _sj_src = {src} AND _sj_status = 'ok' THEN {unit} END").alias(
                _column_name(qi, j)
            )
            for qi, sides in enumerate(self.sides.values())
            for j, (src, unit) in enumerate(sides)
        ]

    def aggregates(self, routers: Mapping[str, QueryRouter]) -> list[Column]:
        """The observation's counts of rows per unit over `columns`."""
        return [
            F.expr(f"count_if({_column_name(qi, j)} = {u})").alias(f"u_{qi}_{j}_{u}")
            for qi, (name, sides) in enumerate(self.sides.items())
            for j in range(len(sides))
            for u in range(self.units(name, routers))
        ]

    def read(self, got: dict[str, t.Any], routers: Mapping[str, QueryRouter]) -> None:
        """Take the counts from the observation's values `got`."""
        self.counts = {
            name: [
                sum(int(got[f"u_{qi}_{j}_{u}"]) for j in range(len(sides)))
                for u in range(self.units(name, routers))
            ]
            for qi, (name, sides) in enumerate(self.sides.items())
        }

    def files_sql(self, relations: Mapping[int, str], names: Sequence[str]) -> str:
        """SQL of queries `names`' rows per unit over each stream's ok rows of the batch in
        `relations` (SQL text by stream index, under stored names), one row per query index
        in `names`, unit and count (`read_rows`): for a batch whose statistics its files'
        footers gave, a job that reads only the keys (and what tells an ok row) of those
        files. A stream without a relation read no file in the batch (`BatchContext.idle`): it
        has no row to count."""
        parts = [
            f"SELECT {qi} AS q, {unit} AS u FROM {relations[src]}"
            for qi, name in enumerate(names)
            for src, unit in self.sides[name]
            if src in relations
        ]
        if not parts:
            return "SELECT 0 AS q, 0 AS u, 0L AS n WHERE FALSE"
        return f"SELECT q, u, count(*) AS n FROM ({' UNION ALL '.join(parts)}) GROUP BY q, u"

    def read_rows(
        self,
        rows: Iterable[tuple[int, int | None, int]],
        routers: Mapping[str, QueryRouter],
        names: Sequence[str],
    ) -> None:
        """Take queries `names`' counts from the rows of `files_sql`."""
        counts = {name: [0] * self.units(name, routers) for name in names}
        for q, u, n in rows:
            if u is not None:  # (A NULL key has one: xxhash64 skips NULLs. The index's none.)
                counts[names[q]][u] += n
        self.counts |= counts


def _column_name(query: int, side: int) -> str:
    return f"_sj_unit_{query}_{side}"


def column_of(sql: str, alias: str) -> str | None:
    """`col` when `sql` is the bare column ``alias.col`` (either part may be quoted)."""
    head, dot, tail = sql.partition(".")
    head, tail = head.strip("`"), tail.strip("`")
    return tail if dot and head == alias and tail.isidentifier() else None


def count_units(
    ctx: BatchContext, sourced: SourcedUnits, counts_itself: Callable[[str], bool]
) -> Background | None:
    """The skew check's rows per unit (`ctx.checks_skew`) of the queries counted by
    `ctx.counted` whose probe does not count them itself (`counts_itself`, an index's) or that
    moved off hash, over the batch's files (whose footers gave its statistics, so no state job
    counts them): a job beside the joins that reads only the keys (`InputUnitCounts.files_sql`),
    where the state job would read every column of the batch's input; None: nothing to count."""
    if not ctx.checks_skew:
        return None
    counted = ctx.counted
    names = [n for n in counted.sides if n in counted.moved or not counts_itself(n)]
    if not names:
        return None
    spark, plan, files = ctx.spark, ctx.plan, ctx.files
    relations = {
        sp.index: sourced.batch_view(spark, sp, ctx.batch_id, files[sp.name], ctx.watermark)
        for sp in plan.streams
        if sp.name in files
    }
    sql = ctx.counted.files_sql(relations, names)
    routers = ctx.routers
    job = Background(lambda: counted.read_rows(spark.sql(sql).collect(), routers, names))
    ctx.scratch.running.append(job)  # (it reads the batch's views)
    return job
