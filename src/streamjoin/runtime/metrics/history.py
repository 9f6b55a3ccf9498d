"""`MetricsHistory`: the newest batches' figures in memory, and every batch's in a JSON-lines file
under the checkpoint, rotated by size."""

from __future__ import annotations

import json
import os
import sys
import threading
import typing as t
from collections import deque

from streamjoin.runtime.metrics.record import BatchFigures, figures_of

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from streamjoin.runtime.batch.context import BatchReport

FILE_NAME = "batches.jsonl"
"""The history file, under ``<checkpoint>/metrics/``; older parts are ``batches.1.jsonl``, …"""
KEEP = 1000
"""Batches kept in memory by default (at a 1 s trigger: the last quarter of an hour)."""
ROTATE_BYTES = 8 * 1024 * 1024
"""A history file's size from which it is moved aside and a new one begun."""
PARTS = 3
"""The rotated parts kept besides the current file."""


def local_dir(checkpoint_root: str) -> str | None:
    """The local directory of a checkpoint (a plain path or a ``file:`` URI), or None for any
    other file system: the history file is written only on this machine's."""
    if checkpoint_root.startswith("file:"):
        path = checkpoint_root.removeprefix("file:")
        return "/" + path.lstrip("/")
    return None if "://" in checkpoint_root else checkpoint_root


class MetricsHistory:
    """The figures of the newest `keep` batches (safe to read from any thread), each batch
    also appended as one JSON line to `folder`/``batches.jsonl`` (None: no file).

    A batch replayed after a crash is recorded again: in the file, a later line for the same
    batch id replaces the earlier one (`read_history` keeps the last).
    """

    def __init__(
        self,
        folder: str | None = None,
        keep: int = KEEP,
        rotate_bytes: int = ROTATE_BYTES,
        parts: int = PARTS,
    ) -> None:
        self.folder = folder
        self.rotate_bytes = rotate_bytes
        self.parts = parts
        self._records: deque[BatchFigures] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._serial = 0
        self.failed: str | None = None
        """Why the file stopped being written (None: it is written)."""

    @property
    def path(self) -> str | None:
        """The current history file (None: no file)."""
        return None if self.folder is None else os.path.join(self.folder, FILE_NAME)

    def record(self, report: BatchReport, queries: Sequence[str]) -> BatchFigures:
        """Keep the figures of `report`'s batch, which ran `queries`; return them."""
        with self._lock:
            before = self._records[-1] if self._records else None
            figures = figures_of(report, queries, before)
            self._records.append(figures)
            self._serial += 1
        if self.path is not None and self.failed is None:
            try:
                self._write(figures)
            except OSError as err:
                # A full disk or a lost folder must not stop the job: the file stops, once said.
                self.failed = f"{self.path}: {err}"
                print(
                    f"streamjoin: the metrics file is no longer written ({self.failed})",
                    file=sys.stderr,
                )
        return figures

    def _write(self, figures: BatchFigures) -> None:
        path = t.cast("str", self.path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(path) and os.path.getsize(path) >= self.rotate_bytes:
            for i in range(self.parts - 1, 0, -1):
                older = _part(path, i)
                if os.path.exists(older):
                    os.replace(older, _part(path, i + 1))
            os.replace(path, _part(path, 1))
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(figures.to_dict(), sort_keys=True) + "\n")

    def records(self, since: int = -1) -> list[BatchFigures]:
        """The figures kept, oldest first, of the batches after batch id `since`."""
        with self._lock:
            return [r for r in self._records if r.batch > since]

    def latest(self) -> BatchFigures | None:
        """The newest batch's figures (None before the first)."""
        with self._lock:
            return self._records[-1] if self._records else None

    @property
    def serial(self) -> int:
        """Batches recorded since the history was made (replays included)."""
        return self._serial


def _part(path: str, i: int) -> str:
    stem = path.removesuffix(".jsonl")
    return f"{stem}.{i}.jsonl"


def read_history(folder: str) -> list[BatchFigures]:
    """Every batch's figures in the history files under `folder` (rotated parts first), one
    per batch id (the last line written for it), by batch id."""
    path = os.path.join(folder, FILE_NAME)
    paths = [_part(path, i) for i in range(PARTS, 0, -1)] + [path]
    by_batch: dict[int, BatchFigures] = {}
    for p in paths:
        if not os.path.exists(p):
            continue
        with open(p, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    figures = BatchFigures.of(json.loads(line))
                    by_batch[figures.batch] = figures
    return [by_batch[b] for b in sorted(by_batch)]
