"""A two-way batch's join path, and when a batch checks for skew: cost rules over row counts.

- `join_path`: the delta rule's two halves as one join or as two, and which side a shuffled
  join builds its tables on.
- `checks_skew`, `skew_check_period`: which batches count the automatic hash path's rows per
  unit from their files.

The runtime counts the rows (a manifest's live units, a batch's footers) and applies the answer.
"""

from __future__ import annotations

import math
import typing as t

SHUFFLE_ROWS = 10_000
"""Rows on each side from which the one join shuffles both sides (Spark conf
``streamjoin.join.shuffleRows``). A broadcast builds its table on the driver on one thread and
probes the other side in as many tasks as it has file splits (one, for a batch of one file); a
shuffled hash join spreads both over the shuffle's tasks (docs/dev-log.md has the trials).
Without the hint, over Spark's broadcast limit, Spark would plan a sort-merge join, which sorts
both sides."""

OneJoin = t.Literal["auto", "left", "right"]
"""The one join: Spark's choice (``auto``, a broadcast of the smaller side), or a shuffled hash
join building on that side."""


class SideRows(t.NamedTuple):
    """One side of a two-way join in a batch: its committed rows that can meet, and its delta."""

    old: int
    new: int


def join_path(
    left: SideRows, right: SideRows, shuffle_rows: int = SHUFFLE_ROWS, *, always: bool = False
) -> OneJoin | None:
    """How the delta rule's two halves run as one join, or None when the two halves cost less.

    The one join meets every pair of old rows only to drop it: |L_old|·|R_old| candidates,
    against the |ΔL|·|R| + |L_old|·|ΔR| the halves meet, and it saves a join. It is taken while
    the pairs it drops are no more than those (state about the size of a batch: the equi
    benchmark's ±10 s window over 10 s batches); a state many batches deep (a window of 100 s,
    say) keeps the halves. When both sides reach `shuffle_rows`, the side with fewer rows, to
    build a shuffled hash join's tables on; else ``auto``. `always`: the one join even where the
    halves cost less (a setting forces it)."""
    halves = left.new * (right.old + right.new) + left.old * right.new
    if not always and left.old * right.old > halves:
        return None
    left_rows, right_rows = left.old + left.new, right.old + right.new
    if min(left_rows, right_rows) < shuffle_rows:
        return "auto"
    return "left" if left_rows < right_rows else "right"


def skew_check_period(every: int, seconds: float, trigger: float | None) -> int:
    """Batches between two skew checks: `every`, or with a trigger of `trigger` seconds as many
    as span `seconds` if more. A check is a job, a fixed cost whatever the batch's size: on a
    live stream of small batches a period counted in batches made them pay most, where a hot
    key is a matter of the stream's time. (None: a backlog run without a trigger.)"""
    if trigger is None or trigger <= 0 or seconds <= 0:
        return every
    return max(every, math.ceil(seconds / trigger - 1e-9))


def checks_skew(batch_id: int, every: int) -> bool:
    """Whether batch `batch_id` counts the rows per unit, with a check every `every` batches:
    batches 1, 1 + every, … (every batch when `every` is 1). Not batch 0: the first batch is
    the longest of a run (its JVM still compiles, its code is generated), and a job beside it
    would make it longer still. Counts taken at batch 1 steer the batches from 2 on: one batch
    later than batch 0's would."""
    return batch_id % every == 1 % every
