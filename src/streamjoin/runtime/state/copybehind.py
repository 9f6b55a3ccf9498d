"""State units of unbounded file streams, copied into the checkpoint after their batch.

A sourced stream (`runtime.state.sourcefiles`) whose state is never dropped (a query over it
has no window) keeps every batch's rows. Read back from the input files for ever, that state
would hang on files the user may move or delete once Spark has read them; copied in the batch
(the state job), it costs a Spark job on every batch's path. So the batch keeps its unit as
the files, as a windowed stream does, and once the batch is committed a thread copies the
files byte for byte under the checkpoint (`StateUnit.behind`, `manifest.copy_state_dir`),
each at its place below the stream's directory, so that they read back as the stream's own
files do (the unit's watermark still tells its late rows apart). The manifest of a later
batch names the copies instead of the files. Until then the files must stay, as for any
sourced unit: a file gone or changed fails the copy, and the next batch with it, naming the
file. A copy costs no Spark job, only the bytes of the batch's input.

A copy is whole before a manifest names it, and a manifest is written whole, so a crash at
any point leaves each unit as its files or as a whole copy; the batches after a restart copy
what the newest manifest still names as files.
"""

from __future__ import annotations

import threading
import typing as t
from dataclasses import replace

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.state.sourcefiles import bare_path, check_files

if t.TYPE_CHECKING:
    from collections.abc import Collection

    from streamjoin.plan import JobPlan, StreamPlan
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.manifest import Manifest, StateUnit


def unbounded_streams(plan: JobPlan) -> list[StreamPlan]:
    """The streams of `plan` whose units may be read back from their files and are never
    dropped. (A stream whose units leave by a column, `StreamPlan.expiry`, keeps its files as
    a stream bounded by event time does: a copy of a unit that left before the copy was named
    would stay in the checkpoint for good.)"""
    return [sp for sp in plan.streams if sp.retain_us is None and sp.expiry is None]


LAG = 2
"""A batch's units are copies by the commit of the batch this many after it: a batch waits
for copies that late, so the input files are needed for at most as many batches, and copies
never fall further behind."""


class CopyBehind:
    """Copies, in one thread, the units of `streams` that a committed manifest names as input
    files (`submit`), and names the copies in the manifests after it (`swap`)."""

    def __init__(self, store: Checkpoint, streams: Collection[StreamPlan]) -> None:
        self.store = store
        self.streams = {sp.name: sp for sp in streams}
        """The streams whose state is unbounded, by name."""
        self._done = threading.Condition()
        self._queue: list[StateUnit] = []
        self._copies: dict[tuple[str, int], StateUnit] = {}
        """The copy of each unit copied that no committed manifest names yet."""
        self._error: BaseException | None = None
        self._running = False
        self._stopping = False
        self._worker: threading.Thread | None = None

    def submit(self, committed: Manifest) -> None:
        """Copy, in the copying thread, each unit the `committed` manifest still names as the
        stream's input files."""
        files = [u for u in committed.units if _original(u) and u.stream in self.streams]
        with self._done:
            named = {(u.stream, u.batch) for u in files}
            # (A copy a committed manifest names instead of files is done with.)
            self._copies = {k: c for k, c in self._copies.items() if k in named}
            have = {(u.stream, u.batch) for u in self._queue} | self._copies.keys()
            self._queue += [u for u in files if (u.stream, u.batch) not in have]
            if not self._queue or self._stopping:
                return
            self._running = True
            self._done.notify_all()
            if self._worker is None:
                # (One thread for the run: a thread started per batch would open a connection
                # to the JVM each time. It runs no Spark job, so needs no local properties.)
                self._worker = threading.Thread(
                    target=self._copy_all, name="streamjoin-copy-behind", daemon=True
                )
                self._worker.start()

    def swap(self, manifest: Manifest) -> None:
        """Name in `manifest`, before it is committed, the copies made of its units, once those
        of its units `LAG` batches old or more are made.

        Raises:
            StreamJoinError: a copy failed (a file gone or changed, a full disk); it names why.
        """
        due = {
            (u.stream, u.batch)
            for u in manifest.units
            if _original(u) and u.stream in self.streams and u.batch <= manifest.batch - LAG
        }
        with self._done:
            self._done.wait_for(
                lambda: self._error is not None or due <= self._copies.keys() or not self._running
            )
            err, self._error = self._error, None
            copies = dict(self._copies)
        if err is not None:
            msg = f"copying a stream's state into the checkpoint failed: {err}"
            raise StreamJoinError(msg) from err
        if not due <= copies.keys():  # (never queued: a fault of the engine's own)
            msg = f"state units {sorted(due - copies.keys())} were not copied into the checkpoint"
            raise StreamJoinError(msg)
        if copies:
            manifest.units = [_copy_of(u, copies) for u in manifest.units]

    def stop(self) -> None:
        """Let the copy under way end and drop the rest (the next run copies them)."""
        with self._done:
            self._stopping, self._queue = True, []
            self._done.notify_all()
        if self._worker is not None:
            self._worker.join()
        with self._done:
            self._stopping, self._running, self._copies, self._worker = False, False, {}, None

    def _copy_all(self) -> None:
        while True:
            with self._done:
                self._done.wait_for(lambda: bool(self._queue) or self._stopping)
                if self._stopping:
                    self._running = False
                    self._done.notify_all()
                    return
                unit = self._queue[0]
            try:
                copy = self._copy(unit)
            except Exception as err:  # (told by the next `swap`, which fails its batch)
                with self._done:
                    self._error, self._queue, self._running = err, [], False
                    self._done.notify_all()
                continue
            with self._done:
                self._copies[unit.stream, unit.batch] = copy
                self._queue = [u for u in self._queue if u != unit]
                self._running = bool(self._queue)
                self._done.notify_all()

    def _copy(self, unit: StateUnit) -> StateUnit:
        """Copy `unit`'s files under the checkpoint, each at its place below the stream's
        directory; the unit that names the copies."""
        sp = self.streams[unit.stream]
        fs = self.store.fs
        check_files(fs, sp, unit)
        root = bare_path(fs.qualify(sp.stream.option("path") or "").rstrip("/") + "/")
        copy = replace(unit, behind=True)
        base = self.store.path(copy.path)
        copies = []
        for f in unit.files:
            below = bare_path(f)
            if not below.startswith(root):
                msg = f"stream {sp.name!r}: input file {f} is not under the stream's path {root}"
                raise StreamJoinError(msg)
            copies.append(fs.qualify(f"{base}/{below[len(root) :]}"))
            fs.copy_file(f, copies[-1])
        check_files(fs, sp, unit)  # (unchanged while copied: the copies are the unit)
        return replace(copy, files=tuple(copies))


def _copy_of(unit: StateUnit, copies: dict[tuple[str, int], StateUnit]) -> StateUnit:
    copy = copies.get((unit.stream, unit.batch))
    return copy if _original(unit) and copy is not None and copy.same_rows(unit) else unit


def _original(unit: StateUnit) -> bool:
    """Whether `unit` is read back from the stream's own input files (not yet copied)."""
    return bool(unit.files) and not unit.behind
