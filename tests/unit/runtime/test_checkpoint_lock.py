"""The checkpoint's lock (`runtime.state.lock`): a live holder refuses a second run, naming
itself; a released, silent or dead one is taken over, by exactly one of several racing runs;
a holder taken over from commits nothing more."""

from __future__ import annotations

import os
import threading
import typing as t

import pytest

from streamjoin.errors import CheckpointInUseError, StreamJoinError
from streamjoin.runtime.state.lock import STALE_BEATS, CheckpointLock, pid_alive, refuse_if_held

if t.TYPE_CHECKING:
    from pathlib import Path

    from streamjoin.runtime.state.fs import FileStore


class _LocalFiles:
    """The calls of `FileStore` the lock makes, on local paths (no JVM)."""

    def list_names(self, path: str) -> list[str]:
        return os.listdir(path) if os.path.isdir(path) else []

    def read_text(self, path: str) -> str:
        with open(path, encoding="utf-8") as f:
            return f.read()

    def write_text_atomic(self, path: str, text: str) -> None:
        tmp = f"{path}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)

    def create_new(self, path: str, text: str) -> bool:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            os.remove(tmp)
        return True

    def delete(self, path: str) -> None:
        if os.path.exists(path):
            os.remove(path)


class _Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _lock(root: Path, clock: _Clock, alive: bool = True) -> CheckpointLock:
    files = t.cast("FileStore", _LocalFiles())
    return CheckpointLock.take(
        files, str(root), interval=3600.0, clock=clock, alive=lambda _pid: alive
    )


def _other_host(root: Path) -> None:
    """Make the current holder a process of another machine (its pid means nothing here)."""
    lock_dir = root / "_lock"
    newest = max(p for p in lock_dir.iterdir() if p.suffix == ".json")
    newest.write_text(newest.read_text().replace('"host": "', '"host": "elsewhere-'))


def test_a_live_holder_refuses_a_second_run_naming_itself(tmp_path: Path) -> None:
    clock = _Clock()
    first = _lock(tmp_path, clock)
    clock.now += 7
    with pytest.raises(CheckpointInUseError) as refused:
        _lock(tmp_path, clock)
    text = str(refused.value)
    assert str(tmp_path) in text
    assert f"pid {os.getpid()} on host " in text
    assert "since 2027-01-15 08:00:00 UTC, last heartbeat 7 s ago" in text
    first.check()  # (still its own)
    first.release()
    second = _lock(tmp_path, clock)
    assert second.generation == 1  # (a released lock keeps its generation: they only grow)
    second.release()


def test_a_silent_holder_is_taken_over_and_then_commits_nothing(tmp_path: Path) -> None:
    clock = _Clock()
    first = _lock(tmp_path, clock)
    _other_host(tmp_path)
    clock.now += first.interval * STALE_BEATS - 1
    with pytest.raises(CheckpointInUseError):
        _lock(tmp_path, clock)
    clock.now += 2
    second = _lock(tmp_path, clock)
    assert sorted(p.name for p in (tmp_path / "_lock").iterdir()) == [
        "000000000001.beat",
        "000000000001.json",
    ]
    with pytest.raises(StreamJoinError, match="took its lock over"):
        first.check()
    first.release()  # (leaves the new holder's lock alone)
    second.check()
    with pytest.raises(CheckpointInUseError):
        _lock(tmp_path, clock)


def test_a_dead_holder_on_this_machine_is_taken_over_at_once(tmp_path: Path) -> None:
    clock = _Clock()
    first = _lock(tmp_path, clock)
    # (Its own pid, alive or not, is never taken over from by this process's other runs.)
    with pytest.raises(CheckpointInUseError):
        _lock(tmp_path, clock, alive=False)
    lock_dir = tmp_path / "_lock"
    record = lock_dir / "000000000000.json"
    record.write_text(record.read_text().replace(f'"pid": {os.getpid()}', '"pid": 1'))
    with pytest.raises(CheckpointInUseError, match="pid 1 on host"):
        _lock(tmp_path, clock, alive=True)
    _lock(tmp_path, clock, alive=False).release()
    first.release()  # (taken over: it leaves the lock alone)
    assert '"released": true' in (lock_dir / "000000000001.beat").read_text()


def test_of_runs_racing_for_a_stale_lock_exactly_one_takes_it(tmp_path: Path) -> None:
    clock = _Clock()
    silent = _lock(tmp_path, clock)
    _other_host(tmp_path)
    clock.now += 3600.0 * STALE_BEATS + 1
    won: list[CheckpointLock] = []
    refused: list[CheckpointInUseError] = []
    start = threading.Barrier(8)

    def race() -> None:
        start.wait()
        try:
            won.append(_lock(tmp_path, clock))
        except CheckpointInUseError as err:
            refused.append(err)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert (len(won), len(refused)) == (1, 7)
    assert won[0].generation == 1
    won[0].release()
    silent.release()


def test_a_zombie_is_dead_and_this_process_alive() -> None:
    assert pid_alive(os.getpid())
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = 200
        while pid_alive(pid) and deadline:  # (exited, not yet reaped: a zombie)
            threading.Event().wait(0.01)
            deadline -= 1
        assert not pid_alive(pid)
    finally:
        os.waitpid(pid, 0)
    assert not pid_alive(pid)


def test_the_command_line_refuses_a_local_checkpoint_in_use_before_spark_starts(
    tmp_path: Path,
) -> None:
    # (The real clock, as the command line's: a fresh heartbeat of a live process.)
    holder = CheckpointLock.take(t.cast("FileStore", _LocalFiles()), str(tmp_path))
    for given in (str(tmp_path), f"file:{tmp_path}", f"file://{tmp_path}", f"{tmp_path}/."):
        with pytest.raises(CheckpointInUseError, match=f"^checkpoint file:{tmp_path} is in use"):
            refuse_if_held(given)
    refuse_if_held(f"hdfs://namenode{tmp_path}")  # (only the run can look there)
    refuse_if_held(str(tmp_path / "elsewhere"))
    holder.release()
    refuse_if_held(str(tmp_path))
