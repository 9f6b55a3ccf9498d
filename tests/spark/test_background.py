"""`Background` with slots: the batch's sink writes run concurrently, but never more than the
slots at once (a job of 100 sinks once queued so much work that Spark's broadcasts timed out)."""

from __future__ import annotations

import threading
import time
import typing as t
from functools import partial

from streamjoin.runtime.threads import Background

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_background_functions_hold_a_slot_while_they_run(spark: SparkSession) -> None:
    lock = threading.Lock()
    running, most = [0], [0]

    def work(i: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return i * i

    slots = threading.BoundedSemaphore(3)
    jobs = [Background(partial(work, i), slots) for i in range(12)]
    assert [j.result() for j in jobs] == [i * i for i in range(12)]
    assert most[0] == 3  # 12 functions of 50 ms each: the three slots are all used, never more


def test_a_failing_function_releases_its_slot_and_reports_its_error(spark: SparkSession) -> None:
    slots = threading.BoundedSemaphore(1)

    def fail() -> None:
        raise ValueError("sink failed")

    first = Background(fail, slots)
    second = Background(lambda: "written", slots)
    assert isinstance(first.wait(), ValueError)
    assert second.result() == "written"
