"""``streamjoin serve`` as a user runs it: a query added with ``streamjoin query add`` while the
service runs, the service SIGKILLed in the batch that applies it (after its sinks wrote, before
its commit), then restarted on the same checkpoint. Nothing is lost or repeated: the first
query's output is the reference's, the added one's is the reference's from the batch it
started in (the restarted service replays that batch with the change, read back from the
checkpoint's control directory)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import typing as t
from pathlib import Path

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job, parse_query_file
from tests.spark.streams import make_batches, stream_ddl

from .cli import quick_driver
from .files import read_json_rows, write_batches

N = 7


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(job: Path, ckpt: Path, port: int, fault: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "TZ": "UTC", **quick_driver()}
    if fault:
        env["STREAMJOIN_FAULT"] = fault
    args = ["serve", str(job), "--checkpoint", str(ckpt), "--port", str(port), "--trigger", "2s"]
    return subprocess.Popen(
        [sys.executable, "-m", "streamjoin", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "streamjoin", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _until(check: t.Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 240
    while not check():
        if proc.poll() is not None:
            raise AssertionError(f"serve ended ({proc.returncode}) before {what}")
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _committed(ckpt: Path, batch: int) -> bool:
    return (ckpt / "manifests" / f"{batch:012d}.json").exists()


def test_a_query_added_then_a_sigkill_in_the_batch_that_applies_it(tmp_path: Path) -> None:
    batches = make_batches(41, streams=("A", "B", "C"), n_batches=N, rows_per_batch=10, keys=3)
    write_batches(tmp_path / "in", batches)
    streams = [
        stream_ddl(s, str(tmp_path / "in" / s)).replace(
            "WITH (", "WITH (maxFilesPerTrigger = '1', "
        )
        for s in "ABC"
    ]
    job = tmp_path / "job.sql"
    job.write_text(
        "\n".join(
            [
                *streams,
                f"CREATE SINK eq WITH (format = 'json', path = '{tmp_path / 'out' / 'eq'}');",
                "INSERT INTO eq SELECT a.id AS i1, b.id AS i2 FROM A a JOIN B b ON a.k = b.k "
                "AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND;",
            ]
        ),
        encoding="utf-8",
    )
    added = tmp_path / "band.sql"
    added.write_text(
        f"CREATE SINK band WITH (format = 'json', path = '{tmp_path / 'out' / 'band'}');\n"
        "INSERT INTO band SELECT b.id AS i1, a.id AS i2 FROM B b JOIN A a\n"
        "  ON abs(b.x - a.x) <= 0.5 AND a.ts BETWEEN b.ts - INTERVAL '3' SECOND AND b.ts",
        encoding="utf-8",
    )
    ckpt, port = tmp_path / "ckpt", _free_port()

    # (Killed in whichever batch the addition reaches: the command may take longer than a
    # trigger on a loaded machine. The added query's window is within what q1 keeps of A and
    # B, so its results are whole from any batch on: a query reaching past the kept state is
    # test_job_versions'.)
    first = _serve(job, ckpt, port, fault="after-sink:added")
    try:
        _until(lambda: _committed(ckpt, 1), first, "batch 1")
        add = _cli("query", "add", str(added), "--port", str(port), "--wait", "0")
        assert add.returncode == 0, add.stderr
        assert "query band (sink band) starts at the next batch" in add.stdout
        first.wait(timeout=240)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert first.returncode == -9, first.stderr.read()[-3000:] if first.stderr else ""

    port = _free_port()
    second = _serve(job, ckpt, port)
    try:
        _until(lambda: _committed(ckpt, N - 1), second, f"batch {N - 1}")
        listing = _cli("query", "list", "--port", str(port))
        assert listing.returncode == 0, listing.stderr
        assert [line.split()[:2] for line in listing.stdout.splitlines()] == [
            ["q1", "running"],
            ["band", "running"],
        ], listing.stdout
        status = _cli("status", "--port", str(port))
        assert json.loads(status.stdout)["last_batch"] == N - 1, status.stdout
        os.killpg(second.pid, signal.SIGINT)
        second.wait(timeout=120)
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
    assert second.returncode == 0, second.stderr.read()[-3000:] if second.stderr else ""

    manifest = json.loads((ckpt / "manifests" / f"{N - 1:012d}.json").read_text())
    since = manifest["served"]["since"]["band"]
    assert 2 <= since < N, manifest["served"]  # (added once batch 1 had committed)
    base = parse_job(job.read_text(encoding="utf-8"))
    sink, query = parse_query_file(added.read_text(encoding="utf-8"), base)
    expected = run_reference(base.with_query(query, sink), batches)
    columns = ("i1", "i2")
    got = read_json_rows(tmp_path / "out" / "eq", columns)
    assert got and normalize(got) == normalize(expected.outputs["q1"])
    got = read_json_rows(tmp_path / "out" / "band", columns)
    assert got and normalize(got) == normalize(expected.since("band", since))
    assert not list((ckpt / "control").glob("*.json")), "the applied change's file is gone"
