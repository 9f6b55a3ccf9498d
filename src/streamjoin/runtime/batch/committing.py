"""The end of a batch before its commit (`processor` steps 7 and 8): the policies of `adapt/`
choose each query's next scheme and probe orders from the batch's figures, and the manifest
for the batch carries them, the GROUP BY buffers and the units to drop."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.routing.router import after_batch
from streamjoin.runtime.state.nextmanifest import next_manifest

if t.TYPE_CHECKING:
    from streamjoin.adapt.schemestate import UnitStats
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.groups import Closing
    from streamjoin.runtime.batch.indexreads import ProbeReads
    from streamjoin.runtime.batch.twoway import TwoWay
    from streamjoin.runtime.multiway.joins import MultiwayJoins
    from streamjoin.runtime.state.manifest import Manifest
    from streamjoin.runtime.state.nextmanifest import StreamStats
    from streamjoin.runtime.threads import Background


def batch_manifest(
    ctx: BatchContext,
    reads: ProbeReads,
    two: TwoWay,
    stats: dict[str, StreamStats],
    out: dict[str, int],
    closing: Closing | None,
    multiway: tuple[MultiwayJoins | None, Background | None],
) -> tuple[Manifest, dict[str, UnitStats], dict[str, str]]:
    """The manifest after batch ``ctx.batch_id`` (its `stats` and rows `out` per query), the
    rows per unit of each query and each router's note. `reads`: the probes' reads (their
    counts per unit); `multiway`: the plan's multi-way joins and their measures (None: none)."""
    plan, prev, batch_id = ctx.plan, ctx.prev, ctx.batch_id
    # (An index's counts over a state job's: the index is the join's load, and keeps no row
    # with a NULL key. A query moved off hash keeps its keys' counts apart.)
    keyed = ctx.counted.take_moved()
    ctx.counted.counts |= reads.unit_counts(ctx)
    counts, held = ctx.counted.counts, reads.stored_counts(ctx)
    one = reads.ran_in_one_task()
    args = (plan, ctx.routers, two.observed, counts, batch_id, stats, prev, held, one)
    units, routing = after_batch(*args, keyed=keyed, quantiles=reads.quantiles())
    multiway_state: dict[str, t.Any] = {}
    joins, measures = multiway
    if joins is not None:
        rows = {k: s.ok for k, s in stats.items()}
        notes, multiway_state = joins.after_batch(measures, batch_id, rows)
        routing |= notes
    carried = ({n: r.state() for n, r in ctx.routers.items()}, multiway_state)
    manifest = next_manifest(plan, prev, batch_id, stats, out, carried)
    manifest.final = ctx.final
    if closing is not None:
        manifest.groups = closing.states
        manifest.dropped = manifest.dropped + closing.dropped
    elif prev.groups:  # (no GROUP BY query any more: their buffers go)
        manifest.dropped += [u.path for g in prev.groups.values() for u in g.units]
    return manifest, units, routing
