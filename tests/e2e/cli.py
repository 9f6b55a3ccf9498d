"""Running the ``streamjoin`` command as a user would, in its own process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import typing as t

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

QUICK_JIT = "-XX:TieredStopAtLevel=1"
"""The JVM's quick compiler only: a short-lived test JVM on tiny inputs spends most of its CPU
compiling, and the tests check behaviour, not peak speed."""
ARCHIVE_DIR = "STREAMJOIN_TEST_ARCHIVE_DIR"
"""The environment variable naming this test session's folder for the driver JVM's class-data
archive (`tests/conftest.py` makes it; none: no archive)."""
ARCHIVE = "driver.jsa"


def class_archive() -> str:
    """JVM options that map this session's archive of the classes a driver loads, once a run has
    written it (else none): a driver JVM then starts several seconds sooner (it loads Spark's
    classes from the archive, not from the jars). A class path that differs from the one
    archived only makes the JVM ignore the archive; ``-Xlog:cds*=off`` keeps that quiet."""
    folder = os.environ.get(ARCHIVE_DIR)
    if folder is None or not os.path.exists(path := os.path.join(folder, ARCHIVE)):
        return ""
    return f" -XX:SharedArchiveFile={path} -Xlog:cds*=off"


def quick_driver(extra: str = "", memory: str | None = None) -> dict[str, str]:
    """The ``PYSPARK_SUBMIT_ARGS`` of a test's driver: `QUICK_JIT`, the parallel collector, the
    class-data archive if there is one, and `extra` JVM options; a heap of `memory` (as
    ``--driver-memory`` takes it) where given, else Spark's default."""
    options = f"{QUICK_JIT} -XX:+UseParallelGC{class_archive()}{extra}"
    heap = f"--driver-memory {memory} " if memory else ""
    submit = f'{heap}--conf "spark.driver.extraJavaOptions={options}" pyspark-shell'
    return {"PYSPARK_SUBMIT_ARGS": submit}


def streamjoin(
    *args: str,
    env: Mapping[str, str] | None = None,
    kill_when: Callable[[], bool] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m streamjoin ARGS``; with `kill_when`, SIGKILL the whole process group
    (driver and its JVM, as a machine failure would) as soon as it returns True."""
    full_env = {**os.environ, "TZ": "UTC", **quick_driver(), **(env or {})}
    # Files, not pipes: a failing run's Spark log fills a pipe nobody reads while it polls,
    # and the run then blocks on its next write.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamjoin", *args],
            env=full_env,
            stdout=out,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None:
                if kill_when is not None and kill_when():
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
                if time.monotonic() > deadline:
                    os.killpg(proc.pid, signal.SIGKILL)
                    err.seek(0)
                    said = "\n".join(_ours(err.read())[-40:])
                    msg = f"streamjoin {' '.join(args)} ran over {timeout}s; it said:\n{said}"
                    raise TimeoutError(msg)
                time.sleep(0.2)
            proc.wait(timeout=60)
        finally:
            # The JVM of a killed driver exits when its stdin closes; make sure of it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())


def _ours(log: str) -> list[str]:
    """The lines of `log` that streamjoin wrote (not Spark's log4j lines or stack frames)."""
    spark = (" INFO ", " WARN ", " ERROR ", "\tat ")
    return [line for line in log.splitlines() if line and not any(m in line for m in spark)]
