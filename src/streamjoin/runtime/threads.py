"""Helpers of a batch: a Spark job run in the background, an observation's metrics, and a clock
of the batch's phases."""

from __future__ import annotations

import threading
import time
import typing as t

if t.TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Observation, SparkSession


class Waitable(t.Protocol):
    """Work running beside a batch's joins that a batch waits for before it ends."""

    def wait(self) -> t.Any:
        """Wait for the work to end."""


class Background:
    """A function run in a thread that carries Spark's local properties (`InheritableThread`);
    `result()` waits and re-raises its error. With `slots`, the function runs only while it
    holds one of them: at most that many run at once."""

    def __init__(self, fn: Callable[[], t.Any], slots: threading.Semaphore | None = None) -> None:
        from pyspark import InheritableThread

        self._value: t.Any = None
        self._error: BaseException | None = None

        def target() -> None:
            try:
                if slots is None:
                    self._value = fn()
                else:
                    with slots:
                        self._value = fn()
            except BaseException as err:
                self._error = err

        self._thread = InheritableThread(target=target, daemon=True)
        self._thread.start()

    def result(self) -> t.Any:
        """Wait for the function to end; its value, or its error raised here."""
        if self.wait() is not None:
            raise t.cast("BaseException", self._error)
        return self._value

    def wait(self) -> BaseException | None:
        """Wait for the function to end; its error, if it raised one."""
        self._thread.join()
        return self._error


_BATCH_PROPERTIES = (
    "spark.sql.execution.id",
    "spark.sql.execution.root.id",
    "spark.jobGroup.id",
    "spark.job.interruptOnCancel",
    "sql.streaming.queryId",
    "streaming.sql.batchId",
)
"""Spark's local properties that a thread started in a batch inherits from it and that name
the batch's SQL execution, job group or streaming batch."""


def detach_from_batch(spark: SparkSession, description: str) -> None:
    """Make this thread's Spark jobs its own, under `description`: a thread started in a batch
    would otherwise run them in the batch's SQL execution, job group and streaming batch."""
    context = spark.sparkContext
    for key in _BATCH_PROPERTIES:
        context.setLocalProperty(key, None)  # type: ignore[arg-type]
    context.setJobDescription(description)


def metrics(obs: Observation) -> dict[str, t.Any]:
    """`obs`'s metrics, or none when the optimizer removed the observed plan (it does so with
    the operands of a join it proves empty, e.g. under a contradictory predicate; PySpark's
    `Observation.get` then fails on the empty row)."""
    # `_jo`: PySpark's handle of the JVM Observation; there is no public test for "no metrics".
    if obs._jo is not None and obs._jo.getRow().size() == 0:
        return {}
    return obs.get


def metrics_if_run(obs: Observation) -> dict[str, t.Any] | None:
    """`obs`'s metrics (`metrics`), or None where its plan ran only as an RDD (a GROUP BY
    buffer's writer takes the rows so): Spark then tells no listener, and the observation would
    never complete."""
    if obs._jo is not None and not obs._jo.future().isCompleted():
        return None
    return metrics(obs)


class PhaseClock:
    """Seconds spent in each phase of a batch: where per-batch time goes, for profiling."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.monotonic()

    def mark(self, phase: str) -> None:
        """End `phase` now: its seconds since the last mark."""
        now = time.monotonic()
        self.phases[phase] = round(now - self._last, 3)
        self._last = now
