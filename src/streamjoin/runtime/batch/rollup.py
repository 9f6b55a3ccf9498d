"""Rollups in a batch (`plan.rollup`): the rows a GROUP BY query emits are merged into its
rollup's table of partials, written anew under the batch's id, and the groups they touched are
written to the sink with their new values."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.batch.context import view_tag
from streamjoin.runtime.state.manifest import GroupState, GroupUnit

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.plan import JobPlan
    from streamjoin.runtime.batch.context import Scratch
    from streamjoin.runtime.batch.groups import Closing
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.manifest import Manifest


def roll_up(
    plan: JobPlan,
    prev: Manifest,
    closing: Closing,
    reading: tuple[SparkSession, Scratch, Checkpoint, int],
) -> None:
    """Replace, in `closing.frames`, each rolled-up query's rows by its rollup's changed
    groups, and keep each rollup's table in `closing.states` (the old one in `dropped`)."""
    spark, scratch, checkpoint, batch_id = reading
    for rp in plan.rollups:
        state = prev.groups.get(rp.state_name)
        if state is not None and state.signature != rp.signature:
            closing.dropped += [u.path for u in state.units]  # (the query changed: afresh)
            state = None
        rows = closing.frames.pop(rp.name, None)
        if rows is None:
            if state is not None:
                closing.states[rp.state_name] = state
            continue
        tag = view_tag(rp.name, batch_id)
        new = scratch.view(rows, f"sj_rolled_{tag}")
        partials = spark.sql(rp.partial_sql(new))
        partial = scratch.view(partials, f"sj_partial_{tag}")
        types = {f.name: f.dataType.simpleString() for f in partials.schema.fields}
        before = None
        if state is not None and state.units:
            old = checkpoint.schemas.read(spark, [checkpoint.path(state.units[0].path)])
            before = scratch.view(old, f"sj_table_{tag}")
        unit = GroupUnit(rp.state_name, batch_id, 0, 0, 0)
        path = checkpoint.path(unit.path)
        merged = spark.sql(rp.merge_sql(before, partial, types))
        merged.write.mode("overwrite").parquet(path)
        checkpoint.schemas.wrote(path, merged)
        table = scratch.view(checkpoint.schemas.read(spark, [path]), f"sj_merged_{tag}")
        closing.frames[rp.name] = spark.sql(rp.output_sql(table, partial))
        closing.states[rp.state_name] = GroupState(None, [unit], rp.signature)
        if state is not None:
            closing.dropped += [u.path for u in state.units if u.path != unit.path]
