"""The reference of outer joins: the rows of a preserved side that no row of the other side
matches, and the batch each is emitted in.

9. For ``a LEFT | RIGHT | FULL JOIN b ON on [WHERE where]``, besides the pairs (as in 5, on the
   whole ON and WHERE), each on-time row r of a preserved side for which no on-time row of the
   other side, from any batch, makes `on` TRUE yields the SELECT items with the other side's
   columns NULL, if `where` holds (NULL is not TRUE) on it.
10. Such a row arrives in the first batch after which ``ts(r) < W - lag``, W the global
   watermark after the batch and lag how long a row of its side may wait for a partner
   (`plan.outer`); on a run declared final, if none before, in one more batch after the
   input's last (index ``len(batches)``); otherwise it is not emitted yet.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from streamjoin.model import Job, Query
from streamjoin.plan.outer import OuterPlan
from streamjoin.reference import values as v
from streamjoin.reference.evaluate import compile_expression


def unmatched_results(
    job: Job,
    query: Query,
    op: OuterPlan,
    inputs: Sequence[Sequence[dict[str, object]]],
    arrivals: Sequence[Sequence[int]],
    watermarks: Sequence[int | None],
    final: bool,
) -> list[tuple[tuple[object, ...], int]]:
    """The rows without a partner of `query` (as its join selects them), each with its batch."""
    outer = op.outer
    on = compile_expression(outer.on)
    where = compile_expression(outer.where) if outer.where is not None else None
    select = [compile_expression(item.sql) for item in query.select]
    out = []
    for i in (0, 1):
        if not outer.preserves(i):
            continue
        mine, other = query.sides[i], query.sides[1 - i]
        time = job.stream(mine.stream).event_time
        assert time is not None  # (`plan_outer` requires watermarks)
        nulls = {c.name.lower(): None for c in job.stream(other.stream).columns}
        for row, arrival in zip(inputs[i], arrivals[i], strict=True):
            env: dict[str, Mapping[str, object]] = {mine.alias: row}
            if any(on({**env, other.alias: s}) is True for s in inputs[1 - i]):
                continue
            env[other.alias] = nulls
            if where is not None and where(env) is not True:
                continue
            ts = row[time.lower()]
            assert isinstance(ts, dt.datetime)
            batch = _decided(op, i, v.event_time_us(ts), watermarks, final)
            if batch is not None:
                if batch < arrival:
                    msg = f"a row of {mine.alias} decided in batch {batch}, before its {arrival}"
                    raise AssertionError(msg)
                out.append((tuple(f(env) for f in select), batch))
    return out


def _decided(
    op: OuterPlan, index: int, ts: int, watermarks: Sequence[int | None], final: bool
) -> int | None:
    for batch, watermark in enumerate(watermarks):
        dead = op.dead_below(index, watermark)
        if dead is not None and ts < dead:
            return batch
    return len(watermarks) if final else None
