"""The engine's own micro-batch loop's log of which files each batch read (`runtime.loop`).

Batch b's files are logged before it runs, so that a batch that did not commit runs again with
the same files, and a file once logged is never taken again. Every `COMPACT_EVERY` committed
batches the single logs become one list of every file read and its batch.
"""

from __future__ import annotations

import json
import typing as t

from streamjoin.errors import StreamJoinError

if t.TYPE_CHECKING:
    from collections.abc import Mapping

    from streamjoin.plan import StreamPlan
    from streamjoin.runtime.state.checkpoint import Checkpoint

LOOP_DIR = "loop"
"""Under the checkpoint: the loop's log of each batch's files."""
COMPACT_EVERY = 100
"""Every so many committed batches, the logs so far become one list of the files read."""


def refuse_sparks_loop(store: Checkpoint, why: str) -> None:
    """Raise if this loop started checkpoint `store`, which Spark's loop is to continue (`why`
    it cannot be this one): Spark's loop knows nothing of the files read, and would read them
    all again."""
    names = store.fs.list_names(store.path(LOOP_DIR))
    if any(n.removesuffix(".read").isdigit() for n in names):
        msg = (
            f"checkpoint {store.root} was started by the engine's own micro-batch loop, which "
            f"cannot continue it ({why}), and Spark's loop would read every input file again: "
            "run the job as it was, or on a new checkpoint"
        )
        raise StreamJoinError(msg)


class BatchLog:
    """Which files each batch read, under ``<checkpoint>/loop``: ``<b>`` per batch (JSON: each
    stream's files and their sizes), written before the batch runs, and ``<b>.read``, every
    file the batches up to b read and its batch, which replaces the single logs up to b once b
    is committed.
    Also what `runtime.state.sourcefiles.SourceLog` tells a batch: the files of its streams
    whose state is read back from them."""

    def __init__(self, store: Checkpoint, sourced: t.Collection[StreamPlan] = ()) -> None:
        self.fs = store.fs
        self.dir = store.path(LOOP_DIR)
        self.sourced = {sp.name for sp in sourced}
        self._batches: dict[int, dict[str, list[tuple[str, int]]]] = {}

    def _names(self) -> list[str]:
        return self.fs.list_names(self.dir)

    def restore(self) -> tuple[dict[str, dict[str, int]], int | None]:
        """Every file logged so far and its batch, per stream, and the newest logged batch
        (None: none)."""
        names = self._names()
        compacts = sorted(int(n[: -len(".read")]) for n in names if n.endswith(".read"))
        read: dict[str, dict[str, int]] = {}
        newest = compacts[-1] if compacts else None
        if compacts:
            raw = json.loads(self.fs.read_text(f"{self.dir}/{compacts[-1]}.read"))
            read = {name: dict(files) for name, files in raw["streams"].items()}
        upto = compacts[-1] if compacts else -1
        for b in sorted(int(n) for n in names if n.isdigit()):
            if b <= upto:
                continue
            for name, files in self.read(b).items():
                read.setdefault(name, {}).update((f, b) for f, _ in files)
            newest = b
        return read, newest

    def read(self, batch: int) -> dict[str, list[tuple[str, int]]]:
        """Batch `batch`'s files per stream, with their sizes (empty: not logged)."""
        if batch not in self._batches:
            path = f"{self.dir}/{batch}"
            if not self.fs.exists(path):
                return {}
            raw = json.loads(self.fs.read_text(path))
            self._batches[batch] = {
                name: [(f, int(n)) for f, n in files] for name, files in raw["streams"].items()
            }
        return self._batches[batch]

    def write(self, batch: int, files: Mapping[str, list[tuple[str, int]]]) -> None:
        """Log batch `batch`'s files before it runs."""
        text = json.dumps({"streams": {n: [[f, s] for f, s in fs] for n, fs in files.items()}})
        self.fs.write_text_atomic(f"{self.dir}/{batch}", text)
        self._batches = {b: f for b, f in self._batches.items() if b >= batch - 1}
        self._batches[batch] = dict(files)

    def files(self, batch: int) -> dict[str, list[str]]:
        """The files batch `batch` read of each stream whose state is read back from them."""
        return {
            name: sorted(f for f, _ in files)
            for name, files in self.read(batch).items()
            if name in self.sourced and files
        }

    def idle(self, batch: int) -> frozenset[str]:
        """The sourced streams batch `batch` read no file of (this loop logs every file a batch
        takes: a stream not in a logged batch took none)."""
        logged = self.read(batch)
        return frozenset(n for n in self.sourced if logged and not logged.get(n))

    def compact(self, committed: int, read: Mapping[str, Mapping[str, int]]) -> None:
        """After batch `committed` is committed: every `COMPACT_EVERY` batches, the files read
        so far (`read`) in one file, and the logs it replaces deleted."""
        if (committed + 1) % COMPACT_EVERY:
            return
        text = json.dumps({"streams": {n: dict(sorted(fs.items())) for n, fs in read.items()}})
        self.fs.write_text_atomic(f"{self.dir}/{committed}.read", text)
        for name in self._names():
            stem = name[: -len(".read")] if name.endswith(".read") else name
            if stem.isdigit() and int(stem) < committed:
                self.fs.delete(f"{self.dir}/{name}")
        self.fs.delete(f"{self.dir}/{committed}")
