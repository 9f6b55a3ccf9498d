"""What ends a run: waiting for its stream, and telling what failed it in one line."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
import typing as t

from py4j.protocol import Py4JError

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.sources import unreadable_file
from streamjoin.runtime.storagefaults import storage_fault

if t.TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from streamjoin.runtime.batch.processor import BatchProcessor
    from streamjoin.runtime.loop import FileLoop
    from streamjoin.runtime.progress import ProgressLine


def drive(
    query: StreamingQuery,
    processor: BatchProcessor,
    line: ProgressLine | None,
    timeout: float | None,
    stop: threading.Event | None = None,
) -> bool:
    """Wait for `query` to end (Ctrl-C, the `timeout` or `stop` stop it), then raise what
    failed it; returns whether it was stopped."""
    started = time.monotonic()
    stopped = False
    try:
        deadline = None if timeout is None else started + timeout
        while query.isActive:
            # Seconds as a float work at runtime; pyspark's hint says int.
            query.awaitTermination(0.5)  # type: ignore[arg-type]
            if (deadline is not None and time.monotonic() > deadline) or (
                stop is not None and stop.is_set()
            ):
                stopped = True
                query.stop()
    except KeyboardInterrupt:
        query.stop()
    except Exception:  # a failed batch surfaces here; reported below
        if processor.error is None and query.exception() is None:
            raise
    finally:
        if query.isActive:  # (an unexpected error: no batch may run past this point)
            query.stop()
        processor.close(keep=True)  # (a final batch may follow: `Engine.run`)
        if line is not None:
            line.close()
    raise_failure(query, processor, stopped=stopped)
    return stopped


def raise_failure(
    query: StreamingQuery, processor: BatchProcessor, *, stopped: bool = False
) -> None:
    """Raise what stopped `query`, if a failure did: a batch's error, or the stream's. When the
    caller `stopped` the query, a batch's error that the stop's interruption caused is none."""
    raise_batch_error(processor, stopped=stopped)
    failure = query.exception()
    # A stop (ours at a timeout, or a caller's) interrupts whatever the query was doing, and
    # Spark may report that interruption as the query's error: it is a stop, not a failure.
    if failure is not None and not interrupted(query):
        # (Spark's own writes are its logs under the checkpoint.)
        spark_logs = processor.checkpoint.path("spark")
        fault = storage_fault(jvm=query._jsq.exception().get(), where=spark_logs)
        if fault is not None:
            raise fault
        first = (str(failure).strip().splitlines() or ["unknown error"])[0]
        msg = f"the stream stopped with an error: {first}"
        raise StreamJoinError(msg)


def run_loop(
    loop: FileLoop,
    processor: BatchProcessor,
    line: ProgressLine | None,
    *,
    once: bool,
    every: float | None,
    timeout: float | None,
    stop: threading.Event | None = None,
    starting: Callable[[int], None] | None = None,
) -> bool:
    """Run the engine's own loop (`runtime.loop`) to its end, then raise what failed it, as
    `drive` does for Spark's; returns whether it was stopped. `starting`: as `FileLoop.run`."""
    stopped = False
    trigger = None if once else every
    try:
        stopped = loop.run(
            processor, once=once, trigger=trigger, timeout=timeout, stop=stop, starting=starting
        )
    except StreamJoinError:
        raise
    except Exception as err:  # (a batch's error is the processor's; reported below)
        if processor.error is None:
            processor.error = err
    finally:
        processor.close(keep=True)  # (a final batch may follow: `Engine.run`)
        if line is not None:
            line.close()
    raise_batch_error(processor)
    return stopped


def raise_batch_error(processor: BatchProcessor, *, stopped: bool = False) -> None:
    """Raise what failed a batch, if anything did, naming it in one line."""
    if isinstance(processor.error, (StreamJoinError, KeyboardInterrupt)):
        raise processor.error
    if stopped and processor.error is not None:
        # (py4j's error, or PySpark's converted one, holds the JVM's.)
        err = processor.error
        java = getattr(err, "java_exception", None) or getattr(err, "_origin", None)
        if java is not None and _interruption(java, cancelled=True):
            return
    if processor.error is not None:
        err = processor.error
        lost = jvm_lost(processor.session, processor.driver_heap)
        if lost is not None:
            raise lost from err
        fault = storage_fault(err)  # (a batch's writes name their paths)
        if fault is not None:
            raise fault from err
        unreadable = unreadable_file(err)
        if unreadable is not None:
            msg = f"an input file cannot be read: {unreadable}"
            raise StreamJoinError(msg) from err
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        msg = f"a batch failed ({type(err).__name__}): {first}"
        raise StreamJoinError(msg) from err


def close(processor: BatchProcessor) -> None:
    """`processor.close()`; if the JVM is gone, the error that says so (not py4j's)."""
    try:
        processor.close()
    except (Py4JError, OSError) as err:
        lost = jvm_lost(processor.session, processor.driver_heap)
        if lost is None:
            raise
        raise lost from err


_OOM_EXIT = 52
"""The exit code of a Spark JVM that ran out of memory (Spark's ``SparkExitCode.OOM``)."""


def jvm_lost(spark: SparkSession, heap: str) -> StreamJoinError | None:
    """The error to tell if the driver's JVM is gone (None while it answers): its exit code
    when this process started it, and, if it ran out of memory, the heap it had and how to
    give it more. (After the JVM dies, py4j's errors say only that a call got no answer.)"""
    context = spark.sparkContext
    proc = getattr(context._gateway, "proc", None)
    code = proc.poll() if proc is not None else None
    if code is None:
        try:
            context._jvm.java.lang.System.nanoTime()  # type: ignore[union-attr]
        except (Py4JError, OSError):
            pass
        else:
            return None
        if proc is not None:
            # (A JVM that runs out of memory exits once its shutdown hooks ran.)
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = proc.wait(timeout=30)
    if code == _OOM_EXIT:
        return StreamJoinError(
            f"the driver's JVM ran out of memory and exited (code {code}) with {heap} of heap "
            "(set by spark.driver.memory); give it more, from the command line with "
            'PYSPARK_SUBMIT_ARGS="--driver-memory 8g pyspark-shell" (under spark-submit, '
            "its --driver-memory), or make a batch smaller (streamjoin.batch.maxRows)"
        )
    if code is not None:
        how = f"exited (code {code})"
    else:
        how = "is gone" if proc is None else "does not answer"
    return StreamJoinError(f"the driver's JVM {how}: Spark's log on stderr says why")


_CANCELLED = "[SPARK_JOB_CANCELLED]"
"""The error class of a Spark job cancelled because its streaming query was stopped."""
_INTERRUPTS = (
    "java.lang.InterruptedException",
    "java.nio.channels.ClosedByInterruptException",
    "java.io.InterruptedIOException",
)


def interrupted(query: StreamingQuery) -> bool:
    """Whether `query`'s error was caused by an interruption of its thread (what `stop()` does):
    Spark recognises most such errors as a stop, but not all (one wrapped in a SparkException
    while a batch was being planned, seen in CI), and then reports a failed query."""
    failure = query._jsq.exception()  # the JVM error, to walk its causes
    return not failure.isEmpty() and _interruption(failure.get())


def _interruption(error: t.Any, *, cancelled: bool = False) -> bool:
    """Whether JVM throwable `error` or one of its causes is a thread's interruption (or, with
    `cancelled`, a Spark job cancelled because its query was stopped)."""
    cause, seen = error, 0
    while cause is not None and seen < 32:
        if cause.getClass().getName() in _INTERRUPTS:
            return True
        if cancelled and _CANCELLED in str(cause.getMessage()):
            return True
        cause, seen = cause.getCause(), seen + 1
    return False
