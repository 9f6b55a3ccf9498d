"""Elastic executors on a cluster (`adapt.executors` decides): the run asks the cluster manager
for executors when its batches fall behind their trigger and gives them back when they idle.

``--conf spark.streamjoin.elastic.maxExecutors=N`` turns it on (with ``minExecutors``,
default 1): the run starts with the fewest executors, and each change applies before the next
batch. Batches in the ``stabilizationSeconds`` (default 30) after the start and after each
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
import time
import typing as t

from streamjoin.adapt.executors import ExecutorScaling
from streamjoin.errors import SettingError

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.runtime.batch.context import BatchReport
    from streamjoin.runtime.batch.processor import BatchProcessor
    from streamjoin.runtime.settings import Settings


LATE = 1.1
"""A batch interval over this many triggers, after a short pause, ran past its trigger."""


class ExecutorScaler:
    """Applies `ExecutorScaling`'s counts to `spark`'s cluster after each committed batch."""

    def __init__(
        self,
        spark: SparkSession,
        scaling: ExecutorScaling,
        trigger: float,
        processor: BatchProcessor,
    ) -> None:
        self.spark = spark
        self.scaling = scaling
        self.trigger = trigger
        self.processor = processor
        self._last: float | None = None
        """When the batch before ended (monotonic)."""
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
        assert trigger is not None
        least, most = settings.min_executors, settings.max_executors
        scaling = ExecutorScaling(least, most, stabilization=settings.stabilization_seconds)
        return cls(spark, scaling, trigger, processor)

    def executor_ids(self) -> list[str]:
        """The executors the driver has now (not the driver itself)."""
        ids = self.spark.sparkContext._jsc.sc().getExecutorIds()
        return [str(ids.apply(i)) for i in range(ids.size())]

    def start(self) -> None:
        """Settle at the fewest executors before the first batch."""
        n, most = self.scaling.executors, self.scaling.most
        print(f"executors: {n}, elastic up to {most}", file=sys.stderr, flush=True)
        self._apply(n)

    def __call__(self, report: BatchReport) -> None:
        """Feed committed batch `report` to the controller, and apply a new count.

        The batch's interval runs from the end of the batch before to its own end. A batch
        that started right after the one before (a pause shorter than the trigger) in an
        interval past the trigger ran late: input waited for it, so the whole interval was
        busy. Otherwise the batch ran on its trigger's schedule, or after input paused, and
        only its own time was busy: the wait for the next trigger is idle."""
        end = time.monotonic()
        last, self._last = self._last, end
        if last is None:
            return
        interval = end - last
        pause = end - report.seconds - last
        late = interval > LATE * self.trigger and pause < self.trigger
        busy = interval if late else min(report.seconds, interval)
        before = self.scaling.executors
        target = self.scaling.observe(report.batch, busy, interval)
        if target is not None and target != before:
            self.steps.append((report.batch, before, target))
            why = "behind their trigger" if target > before else "idle most of their trigger"
            print(
                f"executors {before} -> {target} after batch {report.batch} (batches {why})",
                file=sys.stderr,
                flush=True,
            )
            self._apply(target)

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
