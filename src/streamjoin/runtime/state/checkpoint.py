"""Where a job keeps its state under the checkpoint directory, and how batches commit.

Layout under ``<checkpoint>/``:
``spark/`` (Spark's offset and commit logs), ``manifests/<batch>.json`` (each whole, or the
changes from the one before: a chain from a whole one, `Chain`),
``state/b=<batch>/sj_stream=<stream>/`` (the rows batch b added to the stream's state), and
``deadletter/<stream>/batch=<batch>/``, and ``_lock/`` (the run that uses it, `state.lock`).
"""

from __future__ import annotations

import json
import threading
import typing as t
from dataclasses import dataclass, replace

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.state.manifest import (
    Manifest,
    batch_state_dir,
    manifest_name,
    parse_manifest_name,
)
from streamjoin.runtime.state.readback import WrittenSchemas

if t.TYPE_CHECKING:
    from streamjoin.model import StreamDef
    from streamjoin.runtime.state.fs import FileStore
    from streamjoin.runtime.state.lock import CheckpointLock
    from streamjoin.runtime.state.manifest import StateUnit


CHAIN_LIMIT = 1000
"""Manifests a chain may hold after its whole one: a restart reads at most this many files."""


@dataclass(frozen=True)
class Chain:
    """Where a committed manifest's chain starts: the manifest written whole (`whole`, of
    `whole_bytes`), then each batch's changes from the one before (`since`: their bytes).

    A manifest is written as its changes while they add up to less than the whole one, so the
    bytes of a chain are at most twice its whole manifest's, and a batch of a stream whose
    state is thousands of units writes a few hundred bytes where the whole would be megabytes."""

    whole: int
    whole_bytes: int
    since: int = 0


class Checkpoint:
    """Manifests and state paths of one checkpoint directory."""

    def __init__(self, fs: FileStore, checkpoint: str) -> None:
        self.fs = fs
        self.root = fs.qualify(checkpoint).rstrip("/")
        self._cached: Manifest | None = None
        self._chains: dict[int, tuple[Chain, list[StateUnit]]] = {}
        """The chain of each manifest written or read (the newest few), with its units as
        written: a later batch's changes are taken from them, whatever a caller does to the
        manifest it was handed."""
        self._chains_lock = threading.Lock()
        """(A served job's requests read manifests beside the batches.)"""
        self._read: dict[int, str] = {}
        """The files of the newest chain read: a restart reads the newest manifest and the one
        before it several times, each through the whole chain."""
        self._cleaned = -1
        """Manifests of batches before this one are deleted."""
        self.lock: CheckpointLock | None = None
        """The run's lock on the checkpoint, checked before each commit (None: not locked)."""
        self.schemas = WrittenSchemas()
        """Of the files the batches write and read back (group buffers, rollup tables)."""

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
        """Batch `batch`'s manifest, read back through its chain."""
        chain = []
        at: int | None = batch
        while at is not None:  # (to the whole manifest the chain starts with)
            with self._chains_lock:
                text = self._read.get(at)
            if text is None:
                text = self.fs.read_text(self.path(f"manifests/{manifest_name(at)}"))
                with self._chains_lock:
                    self._read[at] = text
            raw = json.loads(text)
            chain.append((raw, len(text)))
            at = raw.get("base")
        manifest: Manifest | None = None
        for raw, _ in reversed(chain):
            try:
                manifest = Manifest.from_json(raw, manifest)
            except ValueError as err:  # (a file of the chain written again by another run)
                msg = f"checkpoint {self.root}: {err}"
                raise StreamJoinError(msg) from None
        assert manifest is not None
        whole, whole_bytes = chain[-1][0]["batch"], chain[-1][1]
        since = sum(size for _, size in chain[:-1])  # (the changes after the whole one)
        with self._chains_lock:
            known = self._chains.get(batch)
            if known is None:
                self._chains[batch] = (Chain(whole, whole_bytes, since), list(manifest.units))
            else:  # (the same units, as the objects the next batch's changes are taken from)
                manifest.units = list(known[1])
        return manifest

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
        with self._chains_lock:
            known = self._chains.get(prev.batch)
        text, chain = self._encode(manifest, prev, known)
        self.fs.write_text_atomic(self.path(f"manifests/{manifest_name(manifest.batch)}"), text)
        self._cached = manifest
        with self._chains_lock:
            self._chains = {b: c for b, c in self._chains.items() if b == prev.batch}
            self._chains[manifest.batch] = (chain, list(manifest.units))
            self._read = {b: r for b, r in self._read.items() if chain.whole <= b < manifest.batch}
        for rel in prev.dropped:
            self.fs.delete(self.path(rel))
        self.schemas.forget(self.path(rel) for rel in prev.dropped)
        # (A replay of this batch reads `prev` through its chain: what is before it goes, once.)
        start = known[0].whole if known is not None else -1
        if start > self._cleaned:
            for old in self._manifests():
                if old < start:
                    self.fs.delete(self.path(f"manifests/{manifest_name(old)}"))
            self._cleaned = start

    @staticmethod
    def _encode(
        manifest: Manifest, prev: Manifest, known: tuple[Chain, list[StateUnit]] | None
    ) -> tuple[str, Chain]:
        """`manifest`'s file: its changes from `prev` (its units as written: `known`) while
        its chain allows, else whole."""
        if known is not None:
            chain, written = known
            if manifest.batch - chain.whole <= CHAIN_LIMIT:
                base = replace(prev, units=written)
                text = manifest.delta_json(base)
                if chain.since + len(text) <= chain.whole_bytes:
                    return text, Chain(chain.whole, chain.whole_bytes, chain.since + len(text))
        text = manifest.to_json()
        return text, Chain(manifest.batch, len(text))
