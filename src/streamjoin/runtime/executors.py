"""Elastic executors on a cluster (`adapt.executors` decides): the run asks the cluster manager
for executors when its batches fall behind their trigger and gives them back when they idle.

``--conf spark.streamjoin.elastic.maxExecutors=N`` turns it on (with ``minExecutors``,
default 1): the run starts with the fewest executors, and each change applies before the next
batch. The load is read from Spark's own progress reports: the time from one trigger's start to
the next's, busy for as long as the first trigger ran (its ``triggerExecution``), all of it when
the next trigger had to start at once because input was waiting (as Spark's
``ProcessingTimeExecutor`` runs triggers back to back when one overruns its interval). Spark's
own work between our batches (offset and commit logs, planning) thus counts as busy, as it is.
Batches in the ``stabilizationSeconds`` (default 30) after the start and after each
change do not count. Executors come and go through Spark's own calls to its cluster manager
(``requestTotalExecutors``, ``killExecutor``: standalone, YARN and Kubernetes grant them;
Spark's dynamic allocation must then be off, as it would undo them). The processor's units
follow the cores: the joins' shuffles (the batch session's ``spark.sql.shuffle.partitions``),
newly cached state, the sinks' write tasks and the multi-way stores take as many partitions as
the executors have cores, so an added executor gets tasks; slices cached before keep their
partitions until they expire (BiStream's drained units, probed until their rows leave).
An executor given back takes its cached blocks with it; Spark reads them again from the state's
files, so nothing is lost.
"""

from __future__ import annotations

import sys
import typing as t
from datetime import datetime
from typing import NamedTuple

from streamjoin.adapt.executors import ExecutorScaling
from streamjoin.errors import SettingError

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from streamjoin.runtime.batch.context import BatchReport
    from streamjoin.runtime.batch.processor import BatchProcessor
    from streamjoin.runtime.settings import Settings


class Trigger(NamedTuple):
    """When Spark's trigger that ran `batch` started (epoch seconds) and how long it ran."""

    batch: int
    start: float
    seconds: float


class ExecutorScaler:
    """Applies `ExecutorScaling`'s counts to `spark`'s cluster after each committed batch."""

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
        elif trigger is None:
            why = "the run has no trigger interval to measure its batches against (--once)"
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

    def start(self) -> None:
        """Settle at the fewest executors before the first batch."""
        n, most = self.scaling.executors, self.scaling.most
        print(f"executors: {n}, elastic up to {most}", file=sys.stderr, flush=True)
        self._apply(n)

    def watch(self, query: StreamingQuery) -> None:
        """Read the triggers' times from `query`'s progress reports from now on."""
        self._query = query

    def __call__(self, report: BatchReport) -> None:
        """Feed the controller the load since the trigger of the batch before `report`'s batch,
        and apply a new count; give back executors that registered after a scale-in asked
        for fewer (one asked for before it came up)."""
        ran = self._trigger(report.batch - 1)
        before, self._before = self._before, ran
        if ran is None or before is None or before.batch != ran.batch - 1:
            return
        interval = ran.start - before.start
        busy = min(before.seconds, interval)
        had = self.scaling.executors
        target = self.scaling.observe(ran.batch, busy, interval)
        if target is not None and target != had:
            self.steps.append((ran.batch, had, target))
            why = "behind their trigger" if target > had else "idle most of their trigger"
            print(
                f"executors {had} -> {target} after batch {ran.batch} (batches {why})",
                file=sys.stderr,
                flush=True,
            )
            self._apply(target)
        elif len(self.executor_ids()) > had:
            self._apply(had)

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
        context = self.spark.sparkContext
        sc, jvm = context._jsc.sc(), context._jvm
        assert jvm is not None
        # (The newest go first: the oldest hold the most cached state. A kill lowers Spark's
        # target too, so the absolute target is set after.)
        for victim in sorted(self.executor_ids(), key=_executor_order)[target:]:
            sc.killExecutor(victim)
        no_locality = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(
            jvm.java.util.HashMap()
        )
        sc.requestTotalExecutors(target, 0, no_locality)
        self.processor.resize(target * self.cores)


def _executor_order(executor_id: str) -> tuple[int, str]:
    return (int(executor_id), "") if executor_id.isdigit() else (1 << 62, executor_id)
