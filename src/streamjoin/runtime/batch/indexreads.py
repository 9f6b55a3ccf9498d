"""What a batch's probes on the join operator (`indexed`) leave in the JVM to be read once they
ran: the rows per unit they counted and a shedding query's pairs per direction, the rows a
scheme's places hold, a range query's sample of its rows' band buckets, which probes ran in one
task, and an outer join's rows without a partner where the probe did not decide them in its own
task."""

from __future__ import annotations

import typing as t

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame

from streamjoin.plan.shedding import counts_shed_pairs
from streamjoin.runtime.batch.indexfit import counted_units, range_sample, shed_cuts
from streamjoin.runtime.batch.indexouter import alone_sql, decided_below
from streamjoin.runtime.batch.joins import FAR_BUCKET
from streamjoin.runtime.batch.shedding import SIDES, Shed

if t.TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from streamjoin.plan import QueryPlan
    from streamjoin.plan.outer import OuterPlan
    from streamjoin.runtime.batch.context import BatchContext


Decide = t.Callable[[int, int], DataFrame]
"""The rows of a side (0 left, 1 right) below an event time that no partner matched, decided
by the batch (`IndexedJoins`: in the driver's JVM, or on a cluster's executors), as pairs."""


class ProbeReads:
    """One batch's figures and decisions to read after its probes, each read once."""

    def __init__(self, index_class: Callable[[SparkSession], t.Any]) -> None:
        self._class = index_class
        self.counting: dict[str, tuple[str, int, Shed | None]] = {}
        """Query name → (index name, units, its shedding) of the probes that count rows per
        unit, or a shedding query's pairs per direction."""
        self.one_task: set[str] = set()
        """The queries whose probe of this batch ran in one task."""
        self.holding: dict[str, tuple[str, int]] = {}
        """Query name → (index name, partitions) of the indexes whose places' rows are read."""
        self.deciding_after: dict[str, tuple[OuterPlan, Decide]] = {}
        """Outer query → (plan, what decides a side's rows) of the outer joins whose rows
        without a partner the operator decides after this batch's probe."""
        self.sampling: dict[str, tuple[Callable[[], str], float, int]] = {}
        """Query under range partitioning → (what samples its index's rows' band buckets, the
        bucket width, the ranges it asks for) of the indexes whose bounds are due
        (`quantiles`)."""
        self.probed: set[str] = set()
        """The outer joins whose rows without a partner this batch's probe decided in its task
        (`IndexedJoins.leaving` known)."""

    def clear(self) -> None:
        """Forget the batch's (it failed, or ran and was read)."""
        self.counting, self.one_task, self.holding, self.sampling = {}, set(), {}, {}
        self.deciding_after, self.probed = {}, set()

    def expect(
        self,
        ctx: BatchContext,
        qp: QueryPlan,
        name: str,
        shed: Shed | None,
        sample: t.Callable[[int], t.Any],
    ) -> tuple[int, str]:
        """What `qp`'s probe of index `name` leaves to read (`ProbeReads`): its rows per unit
        and a shedding query's pairs, a range query's sample of buckets (`sample`, by a step)
        where its bounds are due. Returns the units the probe counts in and the shedding's
        cuts (`shed_cuts`)."""
        q = qp.query
        units = counted_units(ctx, qp)
        if units or shed is not None:
            self.counting[q.name] = (name, units, shed)
        if (sampled := range_sample(ctx, qp)) is not None:
            width, ranges, step = sampled
            self.sampling[q.name] = (lambda: str(sample(step)), width, ranges)
        if shed is None:
            return units, ""
        left, right = (shed.allowances[side] for side in SIDES)
        return units, shed_cuts(left, right, counts_shed_pairs(q))

    def unit_counts(self, ctx: BatchContext) -> dict[str, list[int]]:
        """The rows per unit that the batch's probes counted, by query. A row with a NULL key
        is in none: it meets nothing and the index keeps it nowhere. A shedding query's pairs
        per direction, written and missed, go to its `Shed` (they follow the units' counts)."""
        counting, self.counting = self.counting, {}
        out = {}
        for query, (name, units, shed) in counting.items():
            n = units + (0 if shed is None else 4)
            got = str(self._class(ctx.spark).unitCounts(name, ctx.batch_id, n))
            counted = [int(x) for x in got.split(",")]
            if units:
                out[query] = counted[:units]
            if shed is not None:
                found, missed = counted[units : units + 2], counted[units + 2 :]
                shed.found = dict(zip(SIDES, found, strict=True))
                if counts_shed_pairs(shed.query):
                    shed.missed = dict(zip(SIDES, missed, strict=True))
        return out

    def ran_in_one_task(self) -> set[str]:
        """The queries whose probe of the batch ran in one task."""
        out, self.one_task = self.one_task, set()
        return out

    def stored_counts(self, ctx: BatchContext) -> dict[str, list[int]]:
        """The rows each place holds after the batch's probes, by query under a scheme: a
        scheme's controllers weigh its places by them."""
        holding, self.holding = self.holding, {}
        if not holding:
            return {}
        cls = self._class(ctx.spark)
        return {
            query: [int(n) for n in str(cls.sizes(name, parts)).split(",")]
            for query, (name, parts) in holding.items()
        }

    def quantiles(self) -> dict[str, list[float]]:
        """Per range query in `sampling`, the band values that split its index's rows into its
        ranges evenly (a sample of their buckets, each at its lower edge: a range's bounds
        fall on the buckets the index holds rows by)."""
        sampling, self.sampling = self.sampling, {}
        out = {}
        for query, (sample, width, ranges) in sampling.items():
            try:
                got = sample()
            except Py4JJavaError:  # (an executor lost: the bounds wait for the next check)
                continue
            # (A NULL band value's row, which an outer join keeps, sits at the far bucket.)
            buckets = (int(b) for b in got.split(",") if b)
            values = sorted(b * width for b in buckets if abs(b) < FAR_BUCKET)
            if values:
                n = len(values)
                out[query] = [values[min(n - 1, i * n // ranges)] for i in range(1, ranges)]
        return out

    def decides(self) -> set[str]:
        """The outer joins whose rows without a partner the operator decides in this batch:
        its probe's task, or after it (`deciding_after`)."""
        probed, self.probed = self.probed, set()
        return probed | set(self.deciding_after)

    def unmatched(self, ctx: BatchContext, watermark: int | None) -> dict[str, DataFrame]:
        """The rows without a partner of each outer join in `deciding_after` that the
        watermark the batch leaves decides, by query: read from the operator, so only once
        the batch's probe has run (it marks the rows it matches)."""
        deciding, self.deciding_after = self.deciding_after, {}
        out: dict[str, DataFrame] = {}
        for query, (op, decide) in deciding.items():
            frames = []
            for side, below in enumerate(decided_below(op, watermark)):
                if below is None:
                    continue
                rows = decide(side, below)
                view = ctx.scratch.view(rows, f"_sj_alone_{len(ctx.scratch.views)}")
                frames.append(ctx.spark.sql(alone_sql(op, view)))
            if frames:
                out[query] = frames[0] if len(frames) == 1 else frames[0].unionAll(frames[1])
        return out
