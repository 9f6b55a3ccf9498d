"""The test session's class-data archive of the CLI's driver JVM (`cli.class_archive`): one small
job's run writes it in the background, at the lowest priority, as its driver exits; every
driver started after that maps it and starts several seconds sooner.

``python -m tests.e2e.archive FOLDER`` writes it into FOLDER (what `start` runs)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import typing as t
from pathlib import Path

from tests.spark.streams import make_batches

from .cli import ARCHIVE, ARCHIVE_DIR, quick_driver
from .files import write_batches, write_job
from .groups import group_alive

if t.TYPE_CHECKING:
    from types import FrameType

_ROOT = Path(__file__).parents[2]
_W3 = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND"
_INSERTS = [
    f"INSERT INTO {sink} SELECT a.id AS aid, b.id AS bid, a.k AS kx FROM A a {join} B b ON {on};"
    for sink, join, on in (
        ("eq", "JOIN", f"a.k = b.k AND {_W3}"),
        ("band", "JOIN", f"abs(a.x - b.x) <= 0.5 AND {_W3}"),
        ("unmatched", "LEFT JOIN", f"a.k = b.k AND {_W3}"),
    )
]


def start() -> subprocess.Popen[bytes] | None:
    """Start writing the archive into the session's folder, unless there is none or another of
    the session's processes (an xdist worker) has started already."""
    folder = os.environ.get(ARCHIVE_DIR)
    if folder is None:
        return None
    try:
        os.close(os.open(os.path.join(folder, "started"), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return None
    return subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.archive", folder],
        cwd=_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a writer still running (its run's process group goes with it)."""
    if proc.poll() is None:
        proc.terminate()
    proc.wait(timeout=60)


def write(folder: Path) -> None:
    """Run the job to its end with a driver that writes the classes it loaded into an archive
    as it exits; once that JVM has gone, publish the archive whole under its name."""
    work = folder / "job"
    write_batches(work / "in", make_batches(1, n_batches=2, rows_per_batch=10))
    sinks = {name: work / "out" / name for name in ("eq", "band", "unmatched")}
    job = write_job(work / "job.sql", work / "in", sinks, _INSERTS)
    writing = folder / "writing.jsa"
    dump = quick_driver(f" -XX:ArchiveClassesAtExit={writing} -Xlog:cds*=off")
    args = ["run", str(job), "--once", "--checkpoint", str(work / "ckpt")]
    run = subprocess.Popen(
        [sys.executable, "-m", "streamjoin", *args],
        env={**os.environ, "TZ": "UTC", **dump},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def stopped(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        sys.exit(1)

    signal.signal(signal.SIGTERM, stopped)
    run.wait()
    while group_alive(run.pid):  # (the JVM writes the archive after the driver has exited)
        time.sleep(0.5)
    if run.returncode == 0 and writing.exists():
        os.replace(writing, folder / ARCHIVE)


if __name__ == "__main__":
    os.nice(19)  # (the tests' own processes first)
    write(Path(sys.argv[1]))
