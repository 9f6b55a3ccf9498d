"""Helpers of a batch: a Spark job run in the background, and a clock of the batch's phases."""

from __future__ import annotations

import threading
import time
import typing as t

if t.TYPE_CHECKING:
    from collections.abc import Callable


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
        if self.wait() is not None:
            raise t.cast("BaseException", self._error)
        return self._value

    def wait(self) -> BaseException | None:
        """Wait for the function to end; its error, if it raised one."""
        self._thread.join()
        return self._error


class PhaseClock:
    """Seconds spent in each phase of a batch: where per-batch time goes, for profiling."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.monotonic()

    def mark(self, phase: str) -> None:
        now = time.monotonic()
        self.phases[phase] = round(now - self._last, 3)
        self._last = now
