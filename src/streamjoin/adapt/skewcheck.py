"""When a batch counts the automatic hash path's rows per unit (the skew check): a rule over
batches and the trigger's seconds. The runtime counts the rows and applies the answer."""

from __future__ import annotations

import math


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
