"""The checkpoint's lock in the Python API and through Hadoop's file system, and a manifest whose
rename fails: a served job (`Engine.start`) holds its checkpoint against a second served job and
a run until it stops; a batch whose manifest cannot be renamed into place commits nothing, and
says so in one line."""

from __future__ import annotations

import errno
import os
import typing as t

import pytest

from streamjoin.errors import CheckpointInUseError, StorageError
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.runtime.state.fs import FileStore
from streamjoin.runtime.state.lock import CheckpointLock
from streamjoin.runtime.state.manifest import Manifest
from streamjoin.runtime.storagefaults import told
from tests.e2e.files import write_batches

from .streams import make_batches
from .test_serve import _base

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


def test_a_served_job_holds_its_checkpoint_until_it_stops(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_batches(tmp_path / "in", make_batches(3, streams=("A", "B", "C"), n_batches=2))
    job = _base(tmp_path, ("ab",), files=True)
    ckpt = str(tmp_path / "ckpt")
    engine = Engine(spark)
    serving = engine.start(job, checkpoint=ckpt, trigger="1 second")
    try:
        mine = f"in use by another run: pid {os.getpid()} on host "
        with pytest.raises(CheckpointInUseError, match=mine):
            engine.start(job, checkpoint=ckpt)
        with pytest.raises(CheckpointInUseError, match=mine):
            engine.run(job, checkpoint=ckpt, once=True, progress=False)
    finally:
        serving.stop()
    again = engine.start(job, checkpoint=ckpt, trigger="1 second")
    again.stop()
    assert '"released": true' in (tmp_path / "ckpt" / "_lock" / f"{1:012d}.beat").read_text()


def test_a_manifest_that_cannot_be_renamed_into_place_is_not_committed(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Checkpoint(FileStore(spark), str(tmp_path / "ckpt"))
    first = Manifest(batch=0)
    store.commit(first, Manifest())

    def cross_device(src: str, dst: str) -> None:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src, None, dst)

    monkeypatch.setattr(os, "replace", cross_device)
    target = f"{tmp_path}/ckpt/manifests/{1:012d}.json"
    said = f"^cannot write {target}: Invalid cross-device link"
    with pytest.raises(StorageError, match=said), told(store.root):
        store.commit(Manifest(batch=1), first)
    monkeypatch.undo()
    assert Checkpoint(FileStore(spark), str(tmp_path / "ckpt")).latest().batch == 0


def test_the_lock_through_hadoop_s_file_system(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (Every path through the JVM's FileSystem, as on HDFS or an object store.)
    monkeypatch.setattr(FileStore, "_local", staticmethod(lambda _path: None))
    fs = FileStore(spark)
    root = fs.qualify(str(tmp_path / "ckpt"))
    assert fs.create_new(f"{root}/once", "first")
    assert not fs.create_new(f"{root}/once", "second")
    assert fs.read_text(f"{root}/once") == "first"
    held = CheckpointLock.take(fs, root)
    with pytest.raises(CheckpointInUseError, match=f"in use by another run: pid {os.getpid()} "):
        CheckpointLock.take(fs, root)
    held.release()
    after = CheckpointLock.take(fs, root)
    assert after.generation == 1
    after.release()
