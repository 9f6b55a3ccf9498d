"""Where a job keeps its state under the checkpoint directory, and how batches commit.

Layout under ``<checkpoint>/``:
``spark/`` (Spark's offset and commit logs), ``manifests/<batch>.json``,
``state/b=<batch>/sj_stream=<stream>/`` (the rows batch b added to the stream's state), and
``deadletter/<stream>/batch=<batch>/``, and ``_lock/`` (the run that uses it, `state.lock`).
"""

from __future__ import annotations

import typing as t

from streamjoin.runtime.state.manifest import (
    Manifest,
    batch_state_dir,
    manifest_name,
    parse_manifest_name,
)

if t.TYPE_CHECKING:
    from streamjoin.model import StreamDef
    from streamjoin.runtime.state.fs import FileStore
    from streamjoin.runtime.state.lock import CheckpointLock


class Checkpoint:
    """Manifests and state paths of one checkpoint directory."""

    def __init__(self, fs: FileStore, checkpoint: str) -> None:
        self.fs = fs
        self.root = fs.qualify(checkpoint).rstrip("/")
        self._cached: Manifest | None = None
        self.lock: CheckpointLock | None = None
        """The run's lock on the checkpoint, checked before each commit (None: not locked)."""

    def path(self, relative: str) -> str:
        """Absolute location of a path relative to the checkpoint."""
        return f"{self.root}/{relative}"

    def batch_dir(self, batch: int) -> str:
        """Where batch `batch` appends the rows of every stream."""
        return self.path(batch_state_dir(batch))

    def deadletter_dir(self, stream: StreamDef) -> str:
        """The stream's ``deadletter`` option, or ``<checkpoint>/deadletter/<stream>``."""
        return stream.option("deadletter") or self.path(f"deadletter/{stream.name}")

    def _manifests(self) -> list[int]:
        ids = (parse_manifest_name(n) for n in self.fs.list_names(self.path("manifests")))
        return sorted(i for i in ids if i is not None)

    def _load(self, batch: int) -> Manifest:
        return Manifest.from_json(self.fs.read_text(self.path(f"manifests/{manifest_name(batch)}")))

    def previous(self, batch_id: int) -> Manifest:
        """The newest committed manifest of a batch before `batch_id` (empty if none)."""
        cached = self._cached
        if cached is not None and cached.batch == batch_id - 1:
            return cached
        earlier = [i for i in self._manifests() if i < batch_id]
        return self._load(earlier[-1]) if earlier else Manifest()

    def committed(self, batch_id: int) -> Manifest | None:
        """Batch `batch_id`'s own manifest if it was committed before (the batch is a replay),
        else None. The batch after the one this checkpoint committed last is never a replay."""
        cached = self._cached
        if cached is not None and cached.batch == batch_id - 1:
            return None
        return self._load(batch_id) if batch_id in self._manifests() else None

    def latest(self) -> Manifest:
        """The newest committed manifest (empty if none)."""
        ids = self._manifests()
        return self._load(ids[-1]) if ids else Manifest()

    def commit(self, manifest: Manifest, prev: Manifest) -> None:
        """Make `manifest` the committed state, then delete what no replay can need any more.

        A replay of this batch starts from `prev`, which still references the state units this batch
        dropped, so those are kept; the ones `prev` dropped are referenced by neither and go.

        Raises:
            StreamJoinError: another run took the checkpoint's lock over; nothing is written.
        """
        if self.lock is not None:
            self.lock.check()
        self.fs.write_text_atomic(
            self.path(f"manifests/{manifest_name(manifest.batch)}"), manifest.to_json()
        )
        self._cached = manifest
        for rel in prev.dropped:
            self.fs.delete(self.path(rel))
        for old in self._manifests():
            if old < prev.batch:
                self.fs.delete(self.path(f"manifests/{manifest_name(old)}"))
