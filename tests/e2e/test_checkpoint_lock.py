"""Two runs on one checkpoint: while a run holds it, a second is refused at once (before its Spark
starts), naming the first; after the first is SIGKILLed, a restart takes its lock over and
continues exactly."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job
from tests.spark.streams import make_batches

from .cli import quick_driver, streamjoin
from .files import read_json_rows, write_batches, write_job

COLUMNS = ("aid", "bid", "kx")


def test_a_second_run_is_refused_and_a_killed_run_s_lock_is_taken_over(tmp_path: Path) -> None:
    inputs, ckpt, out = tmp_path / "in", tmp_path / "ckpt", tmp_path / "out"
    insert = (
        "INSERT INTO band SELECT a.id AS aid, b.id AS bid, b.k AS kx FROM A a JOIN B b "
        "ON abs(a.x - b.x) <= 0.5 AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '4' SECOND;"
    )
    job = write_job(tmp_path / "job.sql", inputs, {"band": out}, [insert])
    batches = make_batches(31, n_batches=4, rows_per_batch=10)
    write_batches(inputs, batches[:2])
    env = {**os.environ, "TZ": "UTC", **quick_driver()}
    args = ["run", str(job), "--checkpoint", str(ckpt), "--trigger", "1s"]
    first = subprocess.Popen(
        [sys.executable, "-m", "streamjoin", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (ckpt / "manifests" / f"{1:012d}.json").exists():
            assert first.poll() is None, "the first run ended early"
            assert time.monotonic() < deadline, "the first run committed no batch 1"
            time.sleep(0.2)

        second = streamjoin("run", str(job), "--once", "--checkpoint", str(ckpt))
        assert second.returncode == 1, second.stderr[-3000:]
        line = second.stderr.strip().splitlines()[-1]
        assert line.startswith(
            f"error: checkpoint file:{ckpt} is in use by another run: pid {first.pid} on host "
        ), line
        assert "last heartbeat" in line
        assert "Traceback" not in second.stderr
        assert "log4j" not in second.stderr  # (refused before its Spark started)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()  # (reaped: a killed run's pid is dead, not a zombie)

    write_batches(inputs, batches[2:], first=2)
    restart = streamjoin("run", str(job), "--once", "--checkpoint", str(ckpt))
    assert restart.returncode == 0, restart.stderr[-3000:]
    expected = run_reference(parse_job(job.read_text(encoding="utf-8")), batches)
    got = read_json_rows(out, COLUMNS)
    assert normalize(got) == normalize(expected.outputs["q1"])
    assert got
