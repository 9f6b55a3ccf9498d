"""A restart from a checkpoint with an edited job: what may change, and what a new query finds.

A job can be stopped, edited and started again on the same checkpoint. Queries may be added,
dropped or changed. State is kept per stream, not per query, so a query the earlier runs did not
have answers from the restart batch on with everything the streams' state holds: its first
results include new rows joined with rows that arrived before the restart. Run state saved for a
query (partitioning, probe orders) carries over only to a query of the same signature
(`model.Query.signature`); a changed or new query starts from its plan.

Two things limit an edit:

- **The streams the queries read** (and the order of their CREATE STREAM statements) must stay
  as they were: Spark's checkpoint matches its sources by position and cannot take a new one or
  lose one, the state files name a stream's columns by its position, and a stream the earlier
  runs did not read has no stored history and no watermark. `check_restart` fails at once,
  naming the stream and the fix, rather than letting Spark fail with an assertion.
- **History**: a stream's state keeps only the rows that the queries of the run that wrote it
  could still join (`plan.query_retention`). A new query whose windows reach further back finds
  only what was kept; `check_restart` warns (`StreamJoinWarning`), naming the query, the stream,
  the event time it reaches back to and the newest event time dropped. Its results that pair
  new rows with dropped ones are missing; everything else is exact.
"""

from __future__ import annotations

import typing as t
import warnings

from streamjoin.errors import StreamJoinError, StreamJoinWarning
from streamjoin.plan import query_retention
from streamjoin.plan.multiway import MultiwayPlan
from streamjoin.runtime.progress import format_watermark

if t.TYPE_CHECKING:
    from streamjoin.plan import JobPlan, QueryPlan
    from streamjoin.runtime.state.manifest import Manifest


def check_restart(plan: JobPlan, last: Manifest, checkpoint: str = "the checkpoint") -> None:
    """Check that `plan` can continue from `last`, the newest manifest of its checkpoint.

    Raises:
        StreamJoinError: the job reads other streams than the checkpoint's runs did, or declares
            them in another order; or a run declared the checkpoint's input finished.

    Warns:
        StreamJoinWarning: per query and stream whose window reaches rows the state dropped.
    """
    if last.batch < 0:
        return
    if last.final:
        msg = (
            f"the input of {checkpoint} was declared finished (--final) at batch {last.batch}: "
            "every window was emitted and any further row would be late; run from a new "
            "checkpoint"
        )
        raise StreamJoinError(msg)
    _check_streams(plan, last, checkpoint)
    for message in history_gaps(plan, last):
        warnings.warn(message, StreamJoinWarning, stacklevel=2)


def _check_streams(plan: JobPlan, last: Manifest, checkpoint: str) -> None:
    now = [sp.name for sp in plan.streams]
    # Manifests written before `streams` was kept still count every stream read in `totals`.
    before = last.streams or sorted(last.totals.rows_in)
    if not before:
        return
    added = [s for s in now if s not in before]
    removed = [s for s in before if s not in now]
    fix = f"or run the job from a new checkpoint instead of {checkpoint}"
    if added:
        readers = [
            q.name for q in plan.job.queries if any(side.stream in added for side in q.sides)
        ]
        msg = (
            f"{_names('stream', added)} read by {_names('query', readers)} but not by the "
            f"earlier runs of {checkpoint} (they read {', '.join(before)}): Spark's checkpoint "
            f"cannot take a new source, and earlier rows of {', '.join(added)} were never "
            f"stored. Leave out the queries that read {', '.join(added)}, {fix}"
        )
        raise StreamJoinError(msg)
    if removed:
        msg = (
            f"{_names('stream', removed)} read by the earlier runs of {checkpoint} but by no "
            "query now: Spark's checkpoint cannot drop a source. Keep a query that reads "
            f"{', '.join(removed)}, {fix}"
        )
        raise StreamJoinError(msg)
    if last.streams and now != last.streams:
        msg = (
            f"the streams are declared in another order ({', '.join(now)}) than in the earlier "
            f"runs of {checkpoint} ({', '.join(last.streams)}): Spark's sources and the state "
            "files go by position. Put the CREATE STREAM statements back in their order, "
            f"{fix}"
        )
        raise StreamJoinError(msg)


def _names(kind: str, names: list[str]) -> str:
    """``stream C is`` / ``streams C, D are``; ``query q2`` / ``queries q2, q3``."""
    if kind == "query":
        return f"query {names[0]}" if len(names) == 1 else f"queries {', '.join(names)}"
    return f"{kind} {names[0]} is" if len(names) == 1 else f"{kind}s {', '.join(names)} are"


def history_gaps(plan: JobPlan, last: Manifest) -> list[str]:
    """One message per (query, stream) whose window reaches rows that `last`'s state dropped.

    With W the watermark `last` committed, a query needs the stream's rows from ``W - retain``
    on (`plan.query_retention`, and an outer join's `plan.outer.OuterPlan.retention`; all of
    them when nothing bounds it); the state holds every row
    newer than ``last.expired[stream]``. A query that ran when the rows were dropped never
    needs them: they were dropped because no query of that run could join them any more.
    """
    out = []
    outers = {op.name: op.retention() for op in plan.outers}
    for qp in plan.plans():
        needs = query_retention(qp)
        for stream, longer in outers.get(qp.query.name, {}).items():
            kept = needs.get(stream)
            needs[stream] = None if kept is None else max(kept, longer)
        for stream, keep in needs.items():
            cut = last.expired.get(stream)
            if cut is None or (keep is None and _left_by_its_column(qp, stream, last)):
                continue
            if keep is not None and last.global_wm is not None:
                start = last.global_wm - keep
                if start > cut:
                    continue
                reach = f"from event time {format_watermark(start)} on"
            else:
                reach = "all of its history (no window bounds it)"
            out.append(
                f"query {qp.query.name} joins {stream}'s rows {reach}, but the state of "
                f"{stream} in the checkpoint has dropped its rows up to event time "
                f"{format_watermark(cut)} (the earlier runs' queries no longer needed them): "
                f"results of {qp.query.name} with those rows are missing. Run the query from "
                "a new checkpoint to have them."
            )
    return out


def _left_by_its_column(qp: QueryPlan | MultiwayPlan, stream: str, last: Manifest) -> bool:
    """Whether every row of `stream` that `last`'s state dropped left by a column that bounds
    it in `qp` as much or more (`Manifest.column_cuts`): ``c + off < W`` when dropped, and
    `qp` needs only rows with ``c + off_q >= W`` for a W no earlier, with ``off_q <= off``."""
    cut = last.column_cuts.get(stream)
    if cut is None or not cut[0] or isinstance(qp, MultiwayPlan) or qp.query.outer is not None:
        return False
    sides = [i for i, side in enumerate(qp.query.sides) if side.stream == stream]
    bounds = [qp.expiry[i] for i in sides]
    return all(
        b is not None
        and b.column.split(".")[-1].strip("`").lower() == str(cut[0]).lower()
        and b.offset_us <= int(cut[1])
        for b in bounds
    )
