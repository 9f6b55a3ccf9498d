"""A driver JVM that died (`runtime.failure.jvm_lost`, `close`): the run's error says so, with
its exit code, and for one that ran out of memory the heap it had and how to give it more,
instead of py4j's "Answer from Java side is empty" or a refused connection while the run
cleans up."""

from __future__ import annotations

import subprocess
import sys
import typing as t
from types import SimpleNamespace

import pytest
from py4j.protocol import Py4JNetworkError

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.failure import close, jvm_lost


class _System:
    def __init__(self, alive: bool) -> None:
        self.alive = alive

    def nanoTime(self) -> int:  # (java.lang.System's name)
        if not self.alive:
            raise Py4JNetworkError("Answer from Java side is empty")
        return 1


def _spark(code: int | None, *, alive: bool = False, started_here: bool = True) -> t.Any:
    """A session whose JVM answers (`alive`) or not, its process exited with `code` (None:
    still running, then killed by the test) when this process started it (`started_here`)."""
    proc = None
    if started_here:
        wait = "import time; time.sleep(60)" if code is None else f"raise SystemExit({code})"
        proc = subprocess.Popen([sys.executable, "-c", wait])
        if code is not None:
            proc.wait()
    jvm = SimpleNamespace(java=SimpleNamespace(lang=SimpleNamespace(System=_System(alive))))
    gateway = SimpleNamespace(proc=proc)
    return SimpleNamespace(sparkContext=SimpleNamespace(_gateway=gateway, _jvm=jvm))


def test_a_jvm_that_ran_out_of_memory_names_its_heap_and_the_way_to_raise_it() -> None:
    lost = jvm_lost(_spark(52), "1.8 GiB")
    assert lost is not None
    text = str(lost)
    assert "ran out of memory" in text and "code 52" in text
    assert "with 1.8 GiB of heap (set by spark.driver.memory)" in text and "--driver-memory" in text


def test_a_jvm_that_stops_answering_is_waited_for_until_it_exits() -> None:
    # (What a JVM out of memory does: py4j's calls fail while its shutdown hooks run.)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); exit(52)"])
    spark = _spark(None, started_here=False)
    spark.sparkContext._gateway.proc = proc
    assert "ran out of memory and exited (code 52)" in str(jvm_lost(spark, "1.8 GiB"))


def test_another_exit_names_its_code_and_an_answering_jvm_is_not_lost() -> None:
    assert str(jvm_lost(_spark(1), "2g")) == (
        "the driver's JVM exited (code 1): Spark's log on stderr says why"
    )
    # (Under spark-submit this process did not start the JVM: no exit code to tell.)
    gone = jvm_lost(_spark(None, started_here=False), "2g")
    assert str(gone) == "the driver's JVM is gone: Spark's log on stderr says why"
    spark = _spark(None, alive=True)
    try:
        assert jvm_lost(spark, "2g") is None
    finally:
        spark.sparkContext._gateway.proc.kill()
        spark.sparkContext._gateway.proc.wait()


class _Processor:
    def __init__(self, spark: t.Any) -> None:
        self.session, self.driver_heap = spark, "1.8 GiB"

    def close(self) -> None:
        raise ConnectionRefusedError(111, "Connection refused")


def test_a_close_that_finds_the_jvm_gone_says_so_and_any_other_error_stays() -> None:
    with pytest.raises(StreamJoinError, match="ran out of memory") as err:
        close(_Processor(_spark(52)))  # type: ignore[arg-type]
    assert isinstance(err.value.__cause__, ConnectionRefusedError)
    spark = _spark(None, alive=True)
    try:
        with pytest.raises(ConnectionRefusedError):
            close(_Processor(spark))  # type: ignore[arg-type]
    finally:
        spark.sparkContext._gateway.proc.kill()
        spark.sparkContext._gateway.proc.wait()
