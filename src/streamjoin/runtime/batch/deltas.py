"""Step 3 of a batch: each stream's ok rows of the batch, as relations of the joins' SQL text."""

from __future__ import annotations

import threading
import typing as t
from collections.abc import Mapping
from functools import partial

from streamjoin.runtime.sources import prefixed
from streamjoin.runtime.threads import Background

if t.TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from streamjoin.plan import StreamPlan
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.state.stores import StoreViews

INPUT_VIEW = "_sj_input"
"""The batch's classified input (`intake.classify`), as a temp view."""


def delta_relations(ctx: BatchContext, stores: StoreViews, read_once: bool) -> dict[str, str]:
    """Each stream's ok rows of the batch, as a relation for SQL text, by stream name.

    The relations are subqueries of one temp view of the batch's input: each classic PySpark
    DataFrame call is a round trip with an analysis in the JVM, where a subquery in the join's
    SQL text is analysed with it. A stream whose state is its input files is read from them
    instead: its own rows and columns only, where each read of the batch's input reruns Spark's
    plan of every stream's rows in the unified layout. `read_once`: every join reads each
    relation once or twice (the operator's), so none is cached for the batch."""
    plan = ctx.plan
    if any(sp.name not in ctx.files for sp in plan.streams):
        ctx.scratch.view(ctx.classified(), INPUT_VIEW)
    deltas: dict[str, str] = {}
    sourced = [sp for sp in plan.streams if sp.name in ctx.files]

    def read(sp: StreamPlan) -> str:
        return stores.sourced_delta(ctx.spark, sp, ctx.batch_id, ctx.files[sp.name], ctx.watermark)

    # Each sourced delta is a chain of JVM calls (a read, views, a cache), each an analysis on
    # one core: the streams' chains run side by side.
    beside = [(sp.name, Background(partial(read, sp))) for sp in sourced[1:]]
    try:
        if sourced:
            deltas[sourced[0].name] = read(sourced[0])
    finally:
        for _, job in beside:  # (all of them, even after a failure)
            job.wait()
    deltas |= {name: job.result() for name, job in beside}
    for sp in plan.streams:
        if sp.name in ctx.files:
            continue
        cols = ", ".join(f"`{prefixed(sp.index, c.name)}` AS `{c.name}`" for c in sp.stream.columns)
        rows = f"SELECT {cols} FROM {INPUT_VIEW} WHERE _sj_status = 'ok' AND _sj_src = {sp.index}"
        if plan.multiway and not read_once:
            # Multi-way terms read each delta many times, and the batch's input is one RDD of
            # every stream's rows that no filter prunes: each read would scan all of it.
            # (Two-way queries read it twice: re-reading costs less than a cache there.)
            delta = ctx.scratch.persist(ctx.spark.sql(rows).coalesce(ctx.parallelism))
            deltas[sp.name] = ctx.scratch.view(delta, f"_sj_delta_{sp.index}")
        else:
            deltas[sp.name] = f"({rows})"
    return {sp.name: deltas[sp.name] for sp in plan.streams}


class LazyDeltas(Mapping[str, str]):
    """`delta_relations`, made where the batch first reads one: a batch whose joins all read
    its own rows (the operator's one-task probes, ``ChainProbe``) makes none, and each made
    is a read of the stream's files, a view and an analysis in the JVM."""

    def __init__(self, make: Callable[[], dict[str, str]]) -> None:
        self._make = make
        self._made: dict[str, str] | None = None
        self._lock = threading.Lock()  # (a batch's background jobs may read them too)

    def _relations(self) -> dict[str, str]:
        with self._lock:
            if self._made is None:
                self._made = self._make()
            return self._made

    def __getitem__(self, stream: str) -> str:
        return self._relations()[stream]

    def __iter__(self) -> Iterator[str]:
        return iter(self._relations())

    def __len__(self) -> int:
        return len(self._relations())
