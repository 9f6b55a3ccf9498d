"""What an engine run measures (`benchmarks.engines`), the same way for every engine: its
figures (`EngineRun`), the CPU its driver used (`CpuClock`), and each micro-batch's time and the
state's size, read from Spark's progress events (`_Batches`)."""

from __future__ import annotations

import json
import os
import time
import typing as t
from dataclasses import dataclass, field

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class EngineRun:
    """What one engine did on one job: the figures the harness reports."""

    engine: str
    rows_in: int = 0
    seconds: float = 0.0
    batch_ms: list[float] = field(default_factory=list)
    durations: list[dict[str, int]] = field(default_factory=list)
    out: dict[str, int] = field(default_factory=dict)
    state_rows: int = 0
    state_bytes: int = 0
    stopped_early: bool = False
    error: str | None = None
    jvm_flags: str = ""
    """The driver JVM's ``-XX`` flags (its compilers and collector), as the engine ran."""
    settings: dict[str, str] = field(default_factory=dict)
    """The Spark settings the engine ran with over streamjoin's local defaults (`PEER_CONF`)."""
    cpu_seconds: float | None = None
    """CPU the driver used over the run (`CpuClock`), None where it cannot be read."""
    probe_pairs: int | None = None
    """Pairs of rows our join operator's probes tested over the run (`ProbeWork`): None for the
    peers, and on a cluster (the probes run in the executors' JVMs)."""
    probe_cpu_seconds: float | None = None
    """CPU the operator's probes used storing the batches' rows and finding and making those
    pairs (`ProbeWork`)."""
    history: list[dict[str, t.Any]] = field(default_factory=list)
    """streamjoin's own figures of each batch, as its checkpoint keeps them (`runtime.metrics`;
    the same records as ``/history`` and `Serving.history`); empty for the peers."""
    dropped_late: int = 0
    """Input rows Spark's native join dropped as later than its watermark (its progress
    events' ``numRowsDroppedByWatermark``): rows the peer's output does not count."""
    startup_seconds: float | None = None
    """Seconds before the job started that `seconds` leaves out: for ``flink``, its runner's
    and its JVM's start, its table environment and the planning of the queries (None for the
    Spark engines, whose session is made before their clock starts too)."""
    sql_edits: list[str] = field(default_factory=list)
    """How the job's SQL was rewritten for the engine (``flink``: `engines_flink_sql`)."""


class CpuClock:
    """CPU seconds used since it was made by the driver JVM (every thread, those that ended
    too, and the processes it started and reaped) and by this Python process.

    The JVM's own count, from ``/proc/<pid>/stat``: summing its live threads misses the ones
    that ended, which in a streamjoin run hold about a quarter of its CPU (the stream execution
    thread, where foreachBatch's driver work runs, ends with the query; measured, session 13).
    Linux only: elsewhere `seconds` is None."""

    def __init__(self, jvm_pid: int | None) -> None:
        path = f"/proc/{jvm_pid}/stat"
        self._stat = path if jvm_pid is not None and os.path.exists(path) else None
        self._start = self._read()

    @classmethod
    def of(cls, spark: SparkSession) -> CpuClock:
        """The clock of `spark`'s driver JVM."""
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return cls(int(jvm.java.lang.ProcessHandle.current().pid()))

    def _read(self) -> float | None:
        if self._stat is None:
            return None
        with open(self._stat, encoding="ascii") as f:
            # After the command name in parentheses: utime, stime, cutime, cstime are the
            # 12th-15th fields (proc(5)), in clock ticks.
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = sum(int(x) for x in fields[11:15])
        own = os.times()
        return ticks / os.sysconf("SC_CLK_TCK") + own.user + own.system

    def seconds(self) -> float | None:
        """CPU seconds since the clock was made."""
        now = self._read()
        return None if now is None or self._start is None else round(now - self._start, 2)


class ProbeWork:
    """What our join operator's probes did in the driver's JVM since it was made: the pairs of
    rows they tested and their threads' CPU (``ProbeWork.java``'s totals, read before and after
    a run), the operator apart from the reads, writes and planning around it."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._class = jvm.streamjoin.operator.ProbeWork
        self._start = self._read()

    @classmethod
    def of(cls, spark: SparkSession) -> ProbeWork | None:
        """The clock of `spark`'s driver, None where it has no streamjoin jar (the join
        operator off: ``STREAMJOIN_LOCAL=off``)."""
        from py4j.protocol import Py4JError

        try:
            return cls(spark)
        except Py4JError:
            return None

    def _read(self) -> tuple[int, int]:
        pairs, nanos = str(self._class.totals()).split(",")
        return int(pairs), int(nanos)

    def since(self) -> tuple[int, float]:
        """Pairs tested and CPU seconds since the clock was made (unrounded: a small job's
        are milliseconds)."""
        pairs, nanos = self._read()
        return pairs - self._start[0], (nanos - self._start[1]) / 1e9


class _Batches:
    """A streaming listener collecting per-batch trigger times and the last state figures.

    It implements Spark's listener interface over py4j itself, reading each progress event as
    one JSON text. PySpark's `StreamingQueryListener` converts every field of every event
    through py4j first (hundreds of round trips and a dozen Java exceptions converted per
    event, counted), Python work that shares the interpreter with streamjoin's driver thread,
    which Spark's native join does not need during a batch. A measuring tool should not load
    one engine more than another. (On the full equi backlog the difference is within this
    machine's noise. streamjoin: 20.1 / 20.1 s with PySpark's listener; 19.5-21.6 s, mean
    20.6, with this one; 18.7-20.7 s, mean 19.8, with none.)"""

    def __init__(self) -> None:
        self.batch_ms: list[float] = []
        self.durations: list[dict[str, int]] = []
        self.rows = 0
        self.last: float | None = None
        self.state_rows = 0
        self.state_bytes = 0
        self.dropped_late = 0
        self._jlistener: t.Any = None

    def record(self, progress: dict[str, t.Any]) -> None:
        """Take one progress event (`StreamingQueryProgress.json`, parsed)."""
        durations = progress.get("durationMs") or {}
        rows = int(progress.get("numInputRows") or 0)
        if rows > 0:
            self.batch_ms.append(float(durations.get("triggerExecution", 0)))
            self.durations.append({k: int(v) for k, v in durations.items()})
            self.rows += rows
            self.last = time.monotonic()
        ops = progress.get("stateOperators") or []
        self.state_rows = sum(int(op.get("numRowsTotal", 0)) for op in ops)
        self.state_bytes = sum(int(op.get("memoryUsedBytes", 0)) for op in ops)
        self.dropped_late += sum(int(op.get("numRowsDroppedByWatermark", 0)) for op in ops)

    def attach(self, spark: SparkSession) -> None:
        """Listen to `spark`'s streaming queries."""
        from py4j.java_gateway import java_import
        from pyspark.java_gateway import ensure_callback_server_started

        gateway = spark.sparkContext._gateway
        assert gateway is not None
        java_import(gateway.jvm, "org.apache.spark.sql.streaming.*")
        ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
        wrapper = gateway.jvm.PythonStreamingQueryListenerWrapper
        self._jlistener = wrapper(_JsonProgressListener(self))
        spark._jsparkSession.streams().addListener(self._jlistener)

    def detach(self, spark: SparkSession) -> None:
        """Stop listening."""
        if self._jlistener is not None:
            spark._jsparkSession.streams().removeListener(self._jlistener)
            self._jlistener = None


class _JsonProgressListener:
    """Spark's ``PythonStreamingQueryListener`` interface, for py4j: one call per progress."""

    def __init__(self, batches: _Batches) -> None:
        self.batches = batches

    def onQueryStarted(self, jevent: t.Any) -> None:
        pass

    def onQueryProgress(self, jevent: t.Any) -> None:
        self.batches.record(json.loads(jevent.progress().json()))

    def onQueryIdle(self, jevent: t.Any) -> None:
        pass

    def onQueryTerminated(self, jevent: t.Any) -> None:
        pass

    class Java:
        implements: t.ClassVar[list[str]] = [
            "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
        ]
