"""Elastic executors on a cluster (`adapt.executors` decides): the run asks the cluster manager
for executors when its batches fall behind their trigger and gives them back when they idle,
and the join operator's partitions move without a batch waiting for them, as BiStream and
Squall migrate state.

``--conf spark.streamjoin.elastic.maxExecutors=N`` turns it on (with ``minExecutors``,
default 1): the run starts with the fewest executors. The load is the share of the time from
one batch's start to the next's that the first ran: all of it when the next had to start at
once because input was waiting (both loops run batches back to back when one overruns its
trigger), less the pauses otherwise. The engine's own loop times a batch from the listing of
its files to its commit; under Spark's loop a batch is its trigger, as Spark's progress
reports give it (its ``triggerExecution``: Spark's offset and commit logs and planning count
as busy, as they are). Batches in the ``stabilizationSeconds``
(default 30) after the start and after each change do not count. Executors come and go through
Spark's own calls to its cluster manager (``requestTotalExecutors``, ``killExecutor``:
standalone, YARN and Kubernetes grant them; Spark's dynamic allocation must then be off, as it
would undo them).

A change of executors moves the processor's units (the joins' shuffles, the sinks' write
tasks, the operator's partitions) to the cores it leaves, without a pause:

- **scale-out**: the executors are asked for after the first batch behind its trigger, so that
  they start while the next batches confirm the step (they go back if the batches catch up
  first); once confirmed and registered, the next batch takes as many units
  as the executors have cores. The operator starts an empty index in that many partitions
  spread over every executor, and its old index drains where it lies until the window passes
  its rows (`batch.drains`): new rows go to the new owners, old rows are probed in place.
- **scale-in**: not while the last change's index still drains (idle batches do not count until
  it empties, for at most `ExecutorScaling.drain_wait`: a second change during a drain builds
  the index again, and a scale-in can wait that long); then the next batch's units are the
  remaining executors' cores, the new index's partitions placed on them only, and the old index
  drains on every executor. An executor leaves once no partition of the operator lies on it (at
  the latest after a stabilization period: a full-history join's drain never empties; its
  partitions are then built again from the checkpoint's state, exact, at the cost of that
  batch). Cached slices and shuffle files it held are made again from their lineage (the state's
  files and the batch's input).
"""

from __future__ import annotations

import sys
import time
import typing as t
from datetime import datetime
from typing import NamedTuple

from streamjoin.adapt.executors import ExecutorScaling
from streamjoin.errors import SettingError
from streamjoin.runtime.batch.indexed import index_class

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from streamjoin.runtime.batch.context import BatchReport
    from streamjoin.runtime.batch.placed import PlacedIndexes
    from streamjoin.runtime.batch.processor import BatchProcessor
    from streamjoin.runtime.settings import Settings


class Trigger(NamedTuple):
    """When Spark's trigger that ran `batch` started (epoch seconds) and how long it ran."""

    batch: int
    start: float
    seconds: float


class ExecutorScaler:
    """Applies `ExecutorScaling`'s counts to `spark`'s cluster: at each batch's start under the
    engine's own loop (`starting`), after each committed batch under Spark's."""

    def __init__(
        self,
        spark: SparkSession,
        scaling: ExecutorScaling,
        processor: BatchProcessor,
    ) -> None:
        self.spark = spark
        self.scaling = scaling
        self.processor = processor
        self._query: StreamingQuery | None = None
        self._before: Trigger | None = None
        """The trigger that ran the batch before the last one."""
        self._started: tuple[int, float] = (-1, 0.0)
        """Under the engine's own loop: the batch that started last, and when (epoch seconds)."""
        self._took: float | None = None
        """Its time, once committed (None before)."""
        self._joining: int | None = None
        """The executors asked for by a scale-out, until they register."""
        self._ahead: int | None = None
        """The executors asked for ahead of a scale-out not yet confirmed (`scaling.ahead`)."""
        self._leaving: tuple[set[str], float, int] | None = None
        """A scale-in's executors (as the operator names its owners) until no partition lies
        on them, since when (monotonic seconds) and the batch after which it was asked."""
        self._operator: bool | None = None
        """Whether the driver has the join operator's classes (None: not looked up yet)."""
        self.steps: list[tuple[int, int, int]] = []
        """Each change: the batch that decided it, executors before and after."""
        conf = spark.sparkContext.getConf()
        self.cores = int(conf.get("spark.executor.cores", "1") or "1")

    @classmethod
    def of(
        cls,
        spark: SparkSession,
        settings: Settings,
        trigger: float | None,
        processor: BatchProcessor,
    ) -> ExecutorScaler | None:
        """The scaler `settings` ask for (None: off).

        Raises:
            SettingError: on a local master, under dynamic allocation, or without a trigger.
        """
        if not settings.max_executors:
            return None
        master = str(spark.sparkContext.master)
        why = None
        if master.startswith("local"):
            why = f"the master is {master}: executors come from a cluster"
        elif spark.sparkContext.getConf().get("spark.dynamicAllocation.enabled") == "true":
            why = "spark.dynamicAllocation.enabled is true: it would undo the requests"
        elif not trigger:
            why = "the run has no trigger interval to measure its batches against (--once, 0s)"
        if why is not None:
            msg = f"Spark conf streamjoin.elastic.maxExecutors={settings.max_executors}: {why}"
            raise SettingError(msg)
        least, most = settings.min_executors, settings.max_executors
        scaling = ExecutorScaling(least, most, stabilization=settings.stabilization_seconds)
        return cls(spark, scaling, processor)

    def executor_ids(self) -> list[str]:
        """The executors the driver has now (not the driver itself)."""
        ids = self.spark.sparkContext._jsc.sc().getExecutorIds()
        return [str(ids.apply(i)) for i in range(ids.size())]

    def places(self) -> list[str]:
        """The active executors whose block managers the driver knows now, oldest first, as the
        operator's partitions name their owners (``PlacedIndex.executors``); without the
        operator's jar (``STREAMJOIN_LOCAL=off``), where no partition lies, the registered
        executors, by their ids."""
        if self._operator is None:
            self._operator = index_class(self.spark) is not None
        if not self._operator:
            return sorted((f"executor_{e}" for e in self.executor_ids()), key=_place_order)
        return sorted(self._indexes()[0].executors(self.spark), key=_place_order)

    def start(self) -> None:
        """Settle at the fewest executors before the first batch."""
        n, most = self.scaling.executors, self.scaling.most
        print(f"executors: {n}, elastic up to {most}", file=sys.stderr, flush=True)
        self._apply(n)

    def watch(self, query: StreamingQuery) -> None:
        """Read the triggers' times from `query`'s progress reports from now on."""
        self._query = query

    def starting(self, batch: int) -> None:
        """The engine's own loop starts `batch` now: feed the controller the load of the batch
        before (its time over the interval from its start to this one's) and carry on a change
        under way, so that a step applies to this batch already."""
        now, (before, at), took = time.time(), self._started, self._took
        self._started, self._took = (batch, now), None
        if took is not None and before == batch - 1:
            interval = now - at
            self._observe(before, min(took, interval), interval, batch - 1)
        self._carry_on(batch - 1)

    def __call__(self, report: BatchReport) -> None:
        """Take committed batch `report`: under the engine's own loop, its time (`starting`
        reads it); under Spark's, feed the controller the load since the trigger of the batch
        before, and carry on a change under way (executors that joined get units, those that
        leave go once drained)."""
        if self._query is None:  # (the engine's own loop: its report times the whole batch)
            if self._started[0] == report.batch:
                self._took = report.seconds
            return
        self._carry_on(report.batch)
        ran = self._trigger(report.batch - 1)  # (this batch's trigger is not reported yet)
        before, self._before = self._before, ran
        if ran is None or before is None or before.batch != ran.batch - 1:
            return
        interval = ran.start - before.start
        self._observe(ran.batch, min(before.seconds, interval), interval, report.batch)

    def _observe(self, batch: int, busy: float, interval: float, committed: int) -> None:
        """Feed the controller `batch`'s load and start the change it decides, if any; else
        ask for the executors of a scale-out under way ahead, or give them back once the
        batches caught up, and give back executors that registered after a scale-in asked for
        fewer (one asked for before it came up). `committed`: the last batch committed."""
        had = self.scaling.executors
        draining = bool(self.processor.indexed.drains.ending())
        target = self.scaling.observe(batch, busy, interval, draining)
        if target is not None and target != had:
            self.steps.append((batch, had, target))
            why = "behind their trigger" if target > had else "idle most of their trigger"
            self._say(f"executors {had} -> {target} after batch {batch} (batches {why})")
            if target > had:
                self._grow(target)
            else:
                self._shrink(target, committed)
            return
        ahead = self.scaling.ahead()
        if self._joining is not None or self._leaving is not None:
            return
        if ahead is not None and ahead != self._ahead:
            self._ahead = ahead
            self._say(f"executors asked for ahead: {ahead} after batch {batch} (it fell behind)")
            self._request(ahead)
        elif ahead is None and self._ahead is not None:
            self._ahead = None
            self._say(f"executors asked for ahead given back after batch {batch} (caught up)")
            self._apply(had)
        elif ahead is None and len(self.executor_ids()) > had:
            self._apply(had)

    def _grow(self, target: int) -> None:
        """Ask for `target` executors (unless asked for ahead); they get units once registered
        (`_carry_on`)."""
        self._leaving = None  # (a scale-in under way: those executors stay)
        self._joining = target
        if self._ahead != target:
            self._request(target)
        self._ahead = None

    def _shrink(self, target: int, batch: int) -> None:
        """Units on the `target` oldest executors from the next batch on; the others leave once
        no partition lies on them (`_carry_on`)."""
        self._joining = None
        places = self.places()
        self._leaving = (set(places[target:]), time.monotonic(), batch)
        self._units(places[:target], target)

    def _carry_on(self, batch: int) -> None:
        """The next step of a change under way, after committed batch `batch`."""
        if self._joining is not None:
            places = self.places()
            if len(places) >= self._joining:
                now = [_executor_id(p) for p in places]
                self._say(f"executors {now} registered after batch {batch}: units on each next")
                # (More may have registered, asked for ahead: those hold nothing and go.)
                self._units(places[: self._joining], self._joining)
                self._joining = None
        if self._leaving is not None:
            leaving, since, asked = self._leaving
            indexes = self._indexes()
            held = leaving & set().union(*(i.holders() for i in indexes))
            waited = time.monotonic() - since
            # (A drain that will empty is waited for; other partitions there, a full-history
            # join's drain or a build whose task ran there, for a stabilization period.)
            ending = leaving & indexes[0].holders(self.processor.indexed.drains.ending())
            if held and (waited < self.scaling.stabilization or ending):
                return
            gone = sorted(_executor_id(p) for p in leaving)
            why = (
                f"their partitions drained ({batch - asked} batches)"
                if not held
                else f"their partitions did not drain in {waited:.0f} s: built again elsewhere"
            )
            self._say(f"executors {gone} given back after batch {batch}: {why}")
            self._leaving = None
            sc = self.spark.sparkContext._jsc.sc()
            for executor in gone:  # (those checked; a kill lowers Spark's target too)
                sc.killExecutor(executor)
            self._request(self.scaling.executors)

    def _units(self, places: list[str], executors: int) -> None:
        """The processor's units on `places`' cores from the next batch on."""
        for indexes in self._indexes():
            indexes.preferred = places
        self.processor.resize(executors * self.cores)

    def _indexes(self) -> tuple[PlacedIndexes, PlacedIndexes]:
        """The operator's partitions on the executors: two-way joins' and multi-way levels'."""
        joins = self.processor.indexed
        return joins.placed, joins.levels.placed

    def _trigger(self, batch: int) -> Trigger | None:
        """The trigger that ran `batch`, from Spark's recent progress reports (None: not
        among them, or no query watched yet)."""
        if self._query is None:
            return None
        reports = self._query._jsq.recentProgress()
        # (The newest last; idle triggers report too, every noDataProgressEventInterval.)
        for i in range(len(reports) - 1, max(len(reports) - 8, 0) - 1, -1):
            progress = reports[i]
            if progress.batchId() < batch:
                return None
            durations = progress.durationMs()
            if progress.batchId() == batch and durations.containsKey("addBatch"):
                start = datetime.fromisoformat(progress.timestamp()).timestamp()
                return Trigger(batch, start, durations.get("triggerExecution") / 1000)
        return None

    def _apply(self, target: int) -> None:
        """`target` executors now: those beyond them killed, units on their cores."""
        sc = self.spark.sparkContext._jsc.sc()
        # (Those that hold no partition of the operator go first, the newest first: the oldest
        # hold the most cached state. The master may start more executors than asked for, at
        # the start, one of which may register late, once the first batch built its index
        # there. A kill lowers Spark's target too, so the absolute target is set after.)
        held = {_executor_id(p) for i in self._indexes() for p in i.holders()}
        ids = sorted(self.executor_ids(), key=lambda e: (e not in held, _executor_order(e)))
        for victim in ids[target:]:
            sc.killExecutor(victim)
        self._request(target)
        self.processor.resize(target * self.cores)

    def _request(self, target: int) -> None:
        context = self.spark.sparkContext
        sc, jvm = context._jsc.sc(), context._jvm
        assert jvm is not None
        no_locality = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(
            jvm.java.util.HashMap()
        )
        sc.requestTotalExecutors(target, 0, no_locality)

    @staticmethod
    def _say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)


def _executor_order(executor_id: str) -> tuple[int, str]:
    return (int(executor_id), "") if executor_id.isdigit() else (1 << 62, executor_id)


def _executor_id(place: str) -> str:
    """The executor id of a place (``executor_<host>_<id>``)."""
    return place.rsplit("_", 1)[-1]


def _place_order(place: str) -> tuple[int, str]:
    return _executor_order(_executor_id(place))
