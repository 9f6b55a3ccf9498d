"""Squall's migration on the join operator (`indexed`): when a query's placement changes (the
skew check moves it to time buckets or a scheme, a matrix reshapes, range bounds move), its
operator is not built again from the stored units. The old index drains instead: it is kept as
it was, the batch's rows probe it placed as it placed its rows (`JoinIndex.drain`: new left rows
meet its right rows, new right rows its left ones), and are kept only in a new, empty index under
the new placement, which every pair of two rows after the change comes from. The old index loses
its rows as the watermark passes them and goes once its newest row is out of reach: no batch
waits for the state to move.

An index drains, in the driver's JVM or on a cluster's executors (`placed.DrainsOnExecutors`:
its partitions stay on their owners, probed there), while no other drain of the query is under
way (a second change builds the index again, from the units, unless the first drain's rows
are all out of reach by then: it goes, and the index drains anew). A full-history join's never
empties: it is probed beside the new one until the next change. An outer join's drains too: a
pair of the drain's probe marks the old index's row in place, and the batch's row, whose
identity the new index's rows carry, as matched there: in the driver's JVM in the new index's
shared marks (``JoinIndex.shareMarks``), on a cluster sent back to the driver, where it vetoes
that row's decision (``DrainVetoes.java``). The rows the watermark decides are both indexes'
(`deciding`), and the old one goes once its rows are decided. A batch that fails on a cluster ends
every drain (an executor lost may have taken partitions with it): the indexes are built again.
"""

from __future__ import annotations

import json
import typing as t
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame

from streamjoin.runtime.batch.indexinput import index_input
from streamjoin.runtime.batch.indexouter import kept, outer_plan
from streamjoin.runtime.batch.indexsql import index_least

if t.TYPE_CHECKING:
    from streamjoin.plan import QueryPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.indexreads import Decide
    from streamjoin.runtime.routing.router import QueryRouter


@dataclass(frozen=True)
class Drain:
    """An index that drains: its name, partitions and placement, the batch whose change
    started it, and per side the newest event time among its rows."""

    name: str
    parts: int
    router: QueryRouter
    since: int
    newest: tuple[int, int]
    into: str
    """The name of the new index beside it."""


class Drains:
    """The indexes that drain, by query key (`indexplans.query_key`)."""

    def __init__(self) -> None:
        self._drains: dict[str, Drain] = {}
        self._endless: set[str] = set()
        """The query keys of the indexes that drain and never empty (`ending`)."""
        self._placed: dict[str, DataFrame] = {}
        """An outer join's batch's rows placed as its index that drains placed its rows, by
        query key (what its decisions take the layout of: `deciding`)."""

    def __contains__(self, key: str) -> bool:
        return key in self._drains

    def names(self) -> list[str]:
        """The names of the indexes that drain."""
        return [d.name for d in self._drains.values()]

    def ending(self) -> list[str]:
        """The names of the indexes that drain and will empty: a bound on each side's event
        times passes their newest rows (a full-history join's, or one whose newest rows are
        unknown, never empties)."""
        return [d.name for k, d in self._drains.items() if k not in self._endless]

    def start(
        self,
        ctx: BatchContext,
        qp: QueryPlan,
        key: str,
        name: str,
        built: tuple[int, tuple[int, str]] | None,
        index: t.Any,
        may_drain: bool = True,
    ) -> tuple[str, int] | None:
        """Where `qp`'s index `name`, `built` (committed at a batch under (partitions,
        placement)) for the batch before this one, can drain for the placement the batch
        takes: its drain (the name and partitions the index is to take); else None (the index
        is built again from the units, which hold every row: a drain under way goes, as it
        must before a build, which loads its rows too, unless its rows are all out of reach:
        then it goes and the index drains anew). A batch run again finds the drain its first
        attempt started. `may_drain` false: no drain starts (a shedding query's)."""
        had = self._drains.get(key)
        if had is not None and had.since == ctx.batch_id:
            return had.name, had.parts
        if had is not None:
            index.drop(had.name)
            self._end(key)
            least, op = _reach(ctx, qp)
            if not _emptied(least, had):  # (a second change while one drains: built again)
                return None
            if op is not None:  # (it would have gone at this batch's probe: as there)
                index.unshareMarks(had.into)
        if not may_drain or built is None or built[0] != ctx.batch_id - 1:
            return None
        newest = _newest(ctx, qp) or (_MOST, _MOST)  # (unknown: it never empties)
        parts, placement = built[1]
        router = replace(ctx.routers[qp.query.name], params=json.loads(placement))
        drain = Drain(f"{name}~drained@{ctx.batch_id}", parts, router, ctx.batch_id, newest, name)
        index.rename(name, drain.name, parts)
        self._drains[key] = drain
        return drain.name, drain.parts

    def probe(
        self,
        ctx: BatchContext,
        qp: QueryPlan,
        key: str,
        deltas: tuple[str, str],
        index: t.Any,
        plans: t.Any,
    ) -> tuple[DataFrame, bool] | None:
        """The batch's pairs with the rows of `key`'s index that drains (its rows out of reach
        dropped first), as the query's rows where its output is planned once (True), else as
        candidate pairs (False); None: none drains, or it went (all its rows out of reach).
        `index`: the JVM's ``JoinIndex``; `plans`: the probes' `ProbePlans`."""
        drain = self._drains.get(key)
        if drain is None:
            return None
        least, op = _reach(ctx, qp)
        if None in least or _MOST in drain.newest:  # (as of this batch: a watermark may come)
            self._endless.add(key)
        else:
            self._endless.discard(key)
        if _emptied(least, drain):
            index.drop(drain.name)
            if op is not None:  # (in the driver's JVM: `start`)
                index.unshareMarks(drain.into)
            self._end(key)
            return None
        index.expire(drain.name, drain.parts, *(_LEAST if x is None else x for x in least))
        placed = replace(ctx, routers={**ctx.routers, qp.query.name: drain.router})
        delta = index_input(placed, qp, *deltas)
        self._placed[key] = delta
        output = plans.output(ctx, qp, delta)
        marker = None if op is None else plans.marker(ctx, op, delta)
        into = None if op is None else drain.into
        batch, one = ctx.batch_id, drain.parts == 1
        jdf = index.drain(delta._jdf, output, marker, drain.name, drain.parts, batch, one, into)
        return DataFrame(jdf, ctx.spark), output is not None

    def deciding(self, ctx: BatchContext, key: str, decide: Decide, index: t.Any) -> Decide:
        """`decide` of an outer join's new index (its rows the watermark decides without a
        partner), with the rows of the index that drains beside it, if any (`JoinIndex`)."""
        drain = self._drains.get(key)
        if drain is None:
            return decide
        name, parts, batch = drain.name, drain.parts, ctx.batch_id
        placed = self._placed[key]

        def both(side: int, below: int) -> DataFrame:
            new = decide(side, below)
            old = index.decide(placed._jdf, name, parts, side, below, batch)
            return new.unionAll(DataFrame(old, ctx.spark))

        return both

    def forget(self) -> None:
        """No index drains any more; their partitions are left to the caller (a failed batch's
        on a cluster's executors, which may be gone)."""
        self._drains.clear()
        self._placed.clear()
        self._endless.clear()

    def clear(self, index: t.Any, keep: t.Container[str] = ()) -> None:
        """Drop every index that drains but those of the query keys in `keep` (the processor
        is done; or a batch committed, and a query that did not use its operator, gone to the
        slices, has no use for its drain)."""
        for key, drain in list(self._drains.items()):
            if key not in keep:
                index.drop(drain.name)
                self._end(key)

    def _end(self, key: str) -> None:
        del self._drains[key]
        self._placed.pop(key, None)
        self._endless.discard(key)


_LEAST = -(2**63)
_MOST = 2**63 - 1


def _reach(ctx: BatchContext, qp: QueryPlan) -> tuple[tuple[int | None, int | None], t.Any]:
    """The least event time per side that `qp`'s batch can still meet (None: any; an outer
    join's rows stay until decided), and its outer plan (None: an inner join)."""
    least = index_least(ctx, qp)
    op = outer_plan(ctx, qp)
    if op is not None:
        least = kept(least, op, ctx.watermark)
    return least, op


def _emptied(least: tuple[int | None, int | None], drain: Drain) -> bool:
    """Whether every row of `drain` is out of reach of `least` (`_reach`)."""
    return all(x is not None and x > n for x, n in zip(least, drain.newest, strict=True))


def _newest(ctx: BatchContext, qp: QueryPlan) -> tuple[int, int] | None:
    """Per side, the newest event time of `qp`'s committed live rows (None: unknown)."""
    out = []
    for side in (qp.query.left, qp.query.right):
        times = [u.max_ts for u in ctx.prev.live(side.stream)]
        if not times or None in times:
            return None
        out.append(max(t.cast("list[int]", times)))
    return out[0], out[1]
