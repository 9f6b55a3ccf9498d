"""Manifests written as their changes from the batch before (`runtime.state.checkpoint.Chain`):
whatever a run of batches adds, drops and replaces, each committed manifest reads back equal to
what was committed, from the files alone, for the next batch and for a replay of the newest;
a batch of a large state writes its changes, not the state; old chains go."""

from __future__ import annotations

import json
import os
import threading
import typing as t
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.state.checkpoint import CHAIN_LIMIT, Checkpoint
from streamjoin.runtime.state.manifest import Manifest, StateUnit, Totals

if t.TYPE_CHECKING:
    from pathlib import Path

    from streamjoin.runtime.state.fs import FileStore


class _LocalFiles:
    """The calls of `FileStore` a checkpoint's manifests make, on local paths (no JVM)."""

    def __init__(self) -> None:
        self.written: list[tuple[str, int]] = []
        self.read: list[str] = []

    def qualify(self, path: str) -> str:
        return path

    def list_names(self, path: str) -> list[str]:
        return os.listdir(path) if os.path.isdir(path) else []

    def read_text(self, path: str) -> str:
        self.read.append(path)
        with open(path, encoding="utf-8") as f:
            return f.read()

    def write_text_atomic(self, path: str, text: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
        self.written.append((path, len(text)))

    def delete(self, path: str) -> None:
        if os.path.exists(path):
            os.remove(path)


def _store(root: Path, files: _LocalFiles | None = None) -> Checkpoint:
    return Checkpoint(t.cast("FileStore", files or _LocalFiles()), str(root))


def _unit(stream: str, batch: int, files: bool = True) -> StateUnit:
    names = (f"file:///in/{stream}/part-{batch:05d}.parquet",) if files else ()
    return StateUnit(stream, batch, 10 + batch, batch * 1000, batch * 1000 + 999, 4096, names)


def _next(prev: Manifest, batch: int, step: tuple[int, int, bool]) -> Manifest:
    """The manifest after `prev` as a batch makes it: units kept as the same objects (some
    dropped from the oldest, one replaced by a copy as `copybehind.swap` does), new ones
    appended."""
    drop, copy, add_b = step
    units = list(prev.units[drop:])
    if units and copy < len(units):
        units[copy] = replace(units[copy], behind=True, files=("file:///ckpt/copy",))
    units += [_unit("a", batch)] + ([_unit("b", batch)] if add_b else [])
    totals = Totals(batches=batch + 1, rows_in={"a": batch * 10})
    return Manifest(batch, {"a": batch * 1000}, batch * 1000, units, [], totals)


_GROWING = (0, 10**6, True)
"""An unbounded stream's batch: a unit a batch per stream, none dropped or copied."""


def _commit(
    store: Checkpoint, batches: int, step: tuple[int, int, bool] = _GROWING
) -> list[Manifest]:
    """Commits `batches` batches made by `_next` with `step`; their manifests."""
    made = [Manifest()]
    for batch in range(batches):
        made.append(_next(made[-1], batch, step))
        store.commit(made[-1], made[-2])
    return made[1:]


_steps = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 40), st.booleans()), min_size=1, max_size=40
)


@settings(max_examples=40, deadline=None)
@given(steps=_steps)
def test_each_committed_manifest_reads_back_equal_from_the_files(
    tmp_path_factory: t.Any, steps: list[tuple[int, int, bool]]
) -> None:
    root = tmp_path_factory.mktemp("ckpt")
    store = _store(root)
    prev = Manifest()
    for batch, step in enumerate(steps):
        manifest = _next(prev, batch, step)
        store.commit(manifest, prev)
        fresh = _store(root)  # (a restart: the files alone)
        assert fresh.latest().to_json() == manifest.to_json()
        assert fresh.previous(batch + 1).to_json() == manifest.to_json()
        # (A replay of this batch starts from the one before, read back from the files.)
        assert fresh.previous(batch).to_json() == prev.to_json()
        committed = fresh.committed(batch)
        assert committed is not None and committed.to_json() == manifest.to_json()
        prev = manifest


def test_a_replayed_batch_commits_the_same_manifest_as_its_first_attempt(tmp_path: Path) -> None:
    prev = _commit(_store(tmp_path), 6, (0, 99, True))[-1]
    text = (tmp_path / "manifests" / f"{5:012d}.json").read_text(encoding="utf-8")
    again = _store(tmp_path)  # (after a crash: batch 5 runs again from batch 4's manifest)
    before = again.previous(5)
    replayed = _next(before, 5, (0, 99, True))
    again.commit(replayed, before)
    assert (tmp_path / "manifests" / f"{5:012d}.json").read_text(encoding="utf-8") == text
    assert _store(tmp_path).latest().to_json() == prev.to_json()


def test_a_large_state_s_batch_writes_its_changes_and_old_chains_go(tmp_path: Path) -> None:
    files = _LocalFiles()
    prev = _commit(_store(tmp_path, files), 2000)[-1]
    whole = len(prev.to_json())
    last = [size for _, size in files.written[-100:]]
    assert max(last) < whole / 100  # (a few hundred bytes, where the whole is ~1 MB)
    kept = sorted(os.listdir(tmp_path / "manifests"))
    assert len(kept) <= CHAIN_LIMIT + 2
    assert _store(tmp_path).latest().to_json() == prev.to_json()
    # (The bytes written stay within twice the whole manifests written.)
    wholes = sum(size for _, size in files.written if size > whole / 100)
    assert sum(size for _, size in files.written) <= 2 * wholes + whole


def test_a_manifest_written_whole_before_chains_existed_reads_back(tmp_path: Path) -> None:
    old = _next(Manifest(), 0, (0, 0, True))
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / f"{0:012d}.json").write_text(old.to_json(), encoding="utf-8")
    store = _store(tmp_path)
    prev = store.latest()
    manifest = _next(prev, 1, (0, 99, False))
    store.commit(manifest, prev)
    assert _store(tmp_path).latest().to_json() == manifest.to_json()


def test_readers_beside_the_batches_leave_the_chain_as_it_was(tmp_path: Path) -> None:
    wholes = {}
    for readers in (False, True):
        files = _LocalFiles()
        store = _store(tmp_path / str(readers), files)
        prev = Manifest()
        for batch in range(300):
            manifest = _next(prev, batch, _GROWING)
            store.commit(manifest, prev)
            if readers:
                store.latest()  # (a served job's request, on the same checkpoint)
            prev = manifest
        sizes = sorted(size for _, size in files.written)
        wholes[readers] = sum(1 for size in sizes if size > 10 * sizes[len(sizes) // 2])
    assert wholes[True] == wholes[False] > 0


def test_a_caller_s_change_to_a_committed_manifest_reads_back_as_committed(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    prev = Manifest()
    for batch in range(60):
        manifest = _next(prev, batch, _GROWING)
        store.commit(manifest, prev)
        assert _store(tmp_path).latest().units == manifest.units
        # (A change to the manifest it was handed, after its commit: the next batch builds on
        # it, the files keep what was committed.)
        manifest.units.reverse()
        prev = manifest


def test_a_batch_run_again_in_the_same_process_reads_its_start_from_the_files(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    *_, before, prev = _commit(store, 5, (1, 0, True))
    start = store.previous(4)  # (batch 4 again: its start is batch 3's manifest)
    assert start.to_json() == before.to_json()
    again = _next(start, 4, (1, 0, True))
    store.commit(again, start)
    assert _store(tmp_path).latest().to_json() == prev.to_json()


def test_a_delta_on_another_base_is_refused_naming_both(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first = _next(Manifest(), 0, (0, 0, True))
    second = _next(first, 1, (0, 99, True))
    store.commit(first, Manifest())
    store.commit(second, first)
    other = _next(Manifest(), 0, (0, 0, False))  # (batch 0 written again, with fewer units)
    (tmp_path / "manifests" / f"{0:012d}.json").write_text(other.to_json(), encoding="utf-8")
    with pytest.raises(StreamJoinError, match="batch 1 is a delta on 2 units of batch 0"):
        _store(tmp_path).latest()


def test_a_restart_reads_each_file_of_its_chain_once(tmp_path: Path) -> None:
    *_, before, prev = _commit(_store(tmp_path), 280)
    files = _LocalFiles()
    again = _store(tmp_path, files)
    # (What a restart asks for: the newest manifest, then batch 280's start, again and again.)
    assert again.latest().to_json() == prev.to_json()
    for _ in range(3):
        assert again.previous(280).to_json() == prev.to_json()
        assert again.committed(280) is None
    assert again.previous(279).to_json() == before.to_json()
    kept = os.listdir(tmp_path / "manifests")
    assert len(files.read) == len(set(files.read)) == len(kept) > 1


class _Deletes(_LocalFiles):
    """`_LocalFiles` that records what a commit deletes."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[str] = []

    def delete(self, path: str) -> None:
        self.deleted.append(path)


def test_a_manifest_that_kept_mir_stores_loads_and_their_files_go_at_the_next_commit(
    tmp_path: Path,
) -> None:
    """Earlier versions kept MIR stores on the cached slices, their units in the manifest's
    ``mirs`` and their files under ``mir/``: nothing reads them now."""
    raw = json.loads(Manifest(4, units=[_unit("a", 4)], dropped=["state/b=3/x"]).to_json())
    unit = {"name": "m0", "batch": 3, "rows": 5, "streams": ["B", "C"], "max_ts": [1, None]}
    raw["mirs"] = {"m0": [unit]}
    old = Manifest.from_json(json.dumps(raw))
    assert old.units == [_unit("a", 4)] and old.dropped == ["state/b=3/x", "mir"]
    files = _Deletes()
    store = _store(tmp_path, files)
    store.commit(_next(old, 5, _GROWING), old)
    assert files.deleted == [store.path("state/b=3/x"), store.path("mir")]
    assert "mirs" not in store.latest().to_json()
    # (Without MIR units, as every manifest from now on: nothing more to drop.)
    raw["mirs"] = {}
    assert Manifest.from_json(json.dumps(raw)).dropped == ["state/b=3/x"]
