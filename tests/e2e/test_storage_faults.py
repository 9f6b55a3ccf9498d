"""Real storage faults under a run: a sink whose file system fills up in the middle of a run, then
a checkpoint whose file system is read-only (the run cannot start). Each run stops with one line
naming the path and the cause and commits nothing of the failed batch; the run after the faults
are cleared continues exactly (the output is the reference's)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import typing as t
from pathlib import Path

import pytest

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job
from tests.spark.streams import make_batches

from .cli import streamjoin
from .files import read_json_rows, write_batches, write_job

if t.TYPE_CHECKING:
    from collections.abc import Iterator

COLUMNS = ("aid", "bid", "kx")


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, timeout=30)


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` at `where` (a file system the test can fill and make read-only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill and make read-only needs root")
    where.mkdir(parents=True)
    try:
        _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"cannot mount a tmpfs here (no CAP_SYS_ADMIN?): {err}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, timeout=30)


def _fill(folder: Path) -> Path:
    """A file that takes every free byte of `folder`'s file system."""
    filler = folder / "filler"
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
    with contextlib.suppress(OSError), open(filler, "ab") as f:  # (the last partial block)
        while True:
            f.write(b"\0")
            f.flush()
    return filler


def _error_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 1, run.stderr[-3000:]
    assert run.stderr.count("\nerror: ") == 1, run.stderr[-3000:]
    return run.stderr.strip().splitlines()[-1]


def test_a_full_sink_then_a_read_only_checkpoint_then_an_exact_restart(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "sinkfs", "1m") as sinkfs, _tmpfs(tmp_path / "ckptfs", "16m") as ckfs:
        inputs, ckpt = tmp_path / "in", ckfs / "ckpt"
        insert = (
            "INSERT INTO eq SELECT a.id AS aid, b.id AS bid, a.k AS kx FROM A a "
            "JOIN B b ON a.k = b.k "
            "AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND;"
        )
        job = write_job(tmp_path / "job.sql", inputs, {"eq": sinkfs / "eq"}, [insert])
        batches = make_batches(23, n_batches=4, rows_per_batch=10)
        write_batches(inputs, batches)
        run = ("run", str(job), "--once", "--checkpoint", str(ckpt))
        manifests = ckpt / "manifests"
        filled: list[Path] = []

        def fill_after_the_first_commit() -> bool:
            if not filled and any(manifests.glob("*.json")):
                filled.append(_fill(sinkfs))
            return False

        # The sink's file system fills up after batch 0 (the hook the run is polled with never
        # kills it): a later batch stops at its sink.
        line = _error_line(streamjoin(*run, kill_when=fill_after_the_first_commit))
        last = max(int(p.stem) for p in manifests.glob("*.json"))
        assert 0 <= last < len(batches) - 1
        failed = last + 1
        assert line.startswith(
            f"error: cannot write file:{sinkfs}/eq/batch={failed}: No space left on device."
        ), line
        assert not (ckpt / "spark" / "commits" / str(failed)).exists()
        # (Its sink directory shows a reader no rows: any left are in Spark's hidden ones.)
        partial = sinkfs / "eq" / f"batch={failed}"
        shown = [p for p in partial.rglob("*") if p.is_file()]
        assert all(str(p.relative_to(partial)).startswith(("_", ".")) for p in shown), shown
        filler = filled[0]

        # Space again, but the checkpoint's file system is read-only: refused before a batch.
        filler.unlink()
        _mount("-o", "remount,ro", str(ckfs))
        line = _error_line(streamjoin(*run))
        assert line.startswith(f"error: cannot write {ckpt}/_lock/"), line
        assert "Read-only file system" in line

        _mount("-o", "remount,rw", str(ckfs))
        done = streamjoin(*run)
        assert done.returncode == 0, done.stderr[-3000:]
        got = read_json_rows(sinkfs / "eq", COLUMNS)

    expected = run_reference(parse_job(job.read_text(encoding="utf-8")), batches)
    assert normalize(got) == normalize(expected.outputs["q1"])
    assert got
