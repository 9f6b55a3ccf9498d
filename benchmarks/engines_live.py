"""How an engine's queries are triggered and awaited (`benchmarks.engines`): over a backlog to
its end (``availableNow``), or on a live source (`Live`, the ``--rate`` mode) until the feeder's
files are processed."""

from __future__ import annotations

import contextlib
import json
import os
import time
import typing as t
from dataclasses import dataclass

from benchmarks.sparklog import drained

if t.TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True)
class Live:
    """A live run: `trigger` (Spark's processingTime text) until the feeder's `done` file (JSON:
    ``{"files": [path, ...]}``) exists and every file it lists is in a committed batch of every
    query, or until `drain_limit` seconds after it appeared. `warmup`: a job (``{out}`` for its
    result directory) run to its end first, in the same process, so that the live run does not
    measure a cold JVM's first batches."""

    trigger: str
    done: str
    drain_limit: float
    warmup: str | None = None


def _await(queries: list[t.Any], time_limit: float | None) -> bool:
    """Wait for `queries` to end; past `time_limit` stop them. True if any was stopped."""
    deadline = None if time_limit is None else time.monotonic() + time_limit
    stopped = False
    for query in queries:
        while query.isActive:
            query.awaitTermination(1)
            if deadline is not None and time.monotonic() > deadline and query.isActive:
                query.stop()
                stopped = True
        if query.exception() is not None and not stopped:
            raise RuntimeError(str(query.exception()).splitlines()[0])
    return stopped


def _await_live(queries: list[t.Any], workdir: str, live: Live) -> bool:
    """Signal readiness, then wait until the feed is processed; past the drain limit, stop the
    queries anyway. True if stopped before every fed file was processed."""
    from pyspark.errors import StreamingQueryException

    from streamjoin.runtime.engine import interrupted

    def stop() -> None:
        for q in queries:
            q.stop()

    def alive() -> bool:
        # (A query stopped may end with the interruption as its error, which the wait raises:
        # every query's error is judged below, once the wait is over.)
        with contextlib.suppress(StreamingQueryException):
            queries[0].awaitTermination(0.5)
        return any(q.isActive for q in queries)

    stopped = await_drained(alive, stop, workdir, live)
    for q in queries:
        # Stopping interrupts whatever a query was doing (with watermarks, Spark may be planning
        # a no-data batch); an error that interruption raises is the stop's, not the run's.
        if q.exception() is not None and not stopped and not interrupted(q):
            raise RuntimeError(str(q.exception()).splitlines()[0])
    return stopped


def await_drained(
    alive: Callable[[], bool], stop: Callable[[], None], workdir: str, live: Live
) -> bool:
    """Signal readiness, then, while `alive()` (which waits a while), wait until the feed is
    processed; past the drain limit, `stop()` the run anyway. True if stopped before every fed
    file was processed."""
    with open(os.path.join(workdir, "ready"), "w", encoding="utf-8") as f:
        f.write(str(time.time()))
    deadline: float | None = None
    fed: set[str] = set()
    stopped = False
    while alive():
        if deadline is None and os.path.exists(live.done):
            with open(live.done, encoding="utf-8") as f:
                fed = {os.path.abspath(p) for p in json.load(f)["files"]}
            deadline = time.monotonic() + live.drain_limit
        if deadline is None:
            continue
        done = drained(workdir, fed)
        if done or time.monotonic() > deadline:
            stopped = not done
            stop()
    return stopped


def _trigger(writer: t.Any, live: Live | None) -> t.Any:
    return (
        writer.trigger(availableNow=True)
        if live is None
        else writer.trigger(processingTime=live.trigger)
    )
