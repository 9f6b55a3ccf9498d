"""What a file-source query's checkpoint says about its input: which batch read each file, and
whether that batch committed. Every engine but streamjoin's own loop (`LOOP`) reads with
Spark's file source, so the same logs describe them.

A query's batch and its sources' log entries are numbered apart. ``sources/<i>/<n>`` lists
the files source ``i`` took at its ``n``-th offset; ``offsets/<batch>`` says up to which offset
of each source the batch reads. A batch with no new data (Spark runs one when a watermark
moves) advances no source, so after one the source's numbers trail the batch's: a file's
batch is the first whose end offset reaches the file's entry."""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import time
import typing as t

if t.TYPE_CHECKING:
    from collections.abc import Collection, Mapping

Ends = tuple[int | None, ...]
"""A batch's end offset of each source, by source index (None: a source with none yet)."""


LOOP = "loop"
"""streamjoin's own micro-batch loop keeps, under its checkpoint, ``loop/<batch>`` (JSON: each
stream's files and their sizes, written before the batch runs) and ``loop/<batch>.read``
(every file read up to that batch, and its batch), and commits a batch by its manifest,
``manifests/<batch, 12 digits>.json``; older manifests are deleted as batches run."""


def _is_loop(checkpoint: str) -> bool:
    return os.path.isdir(os.path.join(checkpoint, LOOP))


def commit_file(checkpoint: str, batch: int) -> str:
    """The file whose existence commits `batch`: Spark's ``commits/<batch>``, or the engine's
    own loop's manifest."""
    if _is_loop(checkpoint):
        return os.path.join(checkpoint, "manifests", f"{batch:012d}.json")
    return os.path.join(checkpoint, "commits", str(batch))


def commit_ids(checkpoint: str) -> set[int]:
    """The batches of a query's checkpoint whose commit file (`commit_file`) is there."""
    if _is_loop(checkpoint):
        folder = os.path.join(checkpoint, "manifests")
        names = os.listdir(folder) if os.path.isdir(folder) else []
        stems = (n[: -len(".json")] for n in names if n.endswith(".json"))
        return {int(stem) for stem in stems if stem.isdigit()}
    commits = os.path.join(checkpoint, "commits")
    return {int(n) for n in os.listdir(commits) if n.isdigit()} if os.path.isdir(commits) else set()


def _loop_files(checkpoint: str) -> dict[str, int]:
    """Every file the engine's own loop logged, with its batch (local paths)."""
    folder = os.path.join(checkpoint, LOOP)
    # (A compaction between the listing and the reads: read again until the listing holds.)
    for _ in range(20):
        names = os.listdir(folder)
        files = _read_loop_logs(folder, names)
        if sorted(os.listdir(folder)) == sorted(names):
            break
    return files


def _read_loop_logs(folder: str, names: list[str]) -> dict[str, int]:
    from urllib.parse import urlparse

    files: dict[str, int] = {}
    for name in sorted(names, key=lambda n: n.endswith(".read"), reverse=True):
        stem = name.removesuffix(".read")
        if not stem.isdigit():
            continue
        with contextlib.suppress(FileNotFoundError):  # (compacted meanwhile: in a .read)
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                streams = json.load(f)["streams"]
            for logged in streams.values():
                if name.endswith(".read"):
                    files.update({urlparse(p).path: int(b) for p, b in logged.items()})
                else:
                    files.update({urlparse(p).path: int(stem) for p, _ in logged})
    return files


def offset_ends(checkpoint: str, known: Collection[int] = ()) -> dict[int, Ends]:
    """Each planned batch of the checkpoint (but those in `known`) with its sources' end
    offsets: ``offsets/<batch>`` holds a version line, the batch's metadata, then a line per
    source, a file source's ``{"logOffset": n}``."""
    folder = os.path.join(checkpoint, "offsets")
    names = os.listdir(folder) if os.path.isdir(folder) else []
    ends: dict[int, Ends] = {}
    for name in names:
        if not name.isdigit() or int(name) in known:
            continue
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:  # (deleted meanwhile: Spark keeps a query's last 100)
            continue
        if lines[:1] != ["v1"]:
            msg = f"{path}: an offset log of a version this reader does not know ({lines[:1]})"
            raise ValueError(msg)
        ends[int(name)] = tuple(_log_offset(line) for line in lines[2:])
    return ends


def _log_offset(line: str) -> int | None:
    with contextlib.suppress(ValueError):
        value = json.loads(line)
        if isinstance(value, dict) and isinstance(value.get("logOffset"), int):
            return int(value["logOffset"])
    return None


def committed_files(checkpoint: str, ends: Mapping[int, Ends] | None = None) -> dict[str, int]:
    """Every input file of a Spark file-source query's checkpoint that is in a committed batch,
    with the batch's id. The ``sources/<i>/<n>`` logs (and their ``.compact`` files) list each
    source offset's files; the first batch whose ``offsets/<batch>`` reaches the offset read
    them (`ends`: batches' end offsets seen earlier, `offset_ends`, which Spark may have
    deleted since); ``commits/<batch>`` exists once the batch's output is committed.

    Spark keeps only the last ``minBatchesToRetain`` (100) offset and commit files and deletes
    older ones as later batches run; a batch runs only once the one before it has committed,
    so a batch older than the oldest commit file left has committed too. (A file whose batch's
    offsets went unseen is given the oldest batch left that reaches it: a later commit, so its
    latency is overstated, never understated.)"""
    from urllib.parse import unquote, urlparse

    done = commit_ids(checkpoint)
    oldest = min(done, default=None)
    if _is_loop(checkpoint):  # (a batch runs after the one before it committed)
        newest = max(done, default=-1)
        return {p: b for p, b in _loop_files(checkpoint).items() if b <= newest}
    planned = {**offset_ends(checkpoint, known=(ends or {}).keys()), **(ends or {})}
    order = sorted(planned)

    def committed(batch: int) -> bool:
        return batch in done or (oldest is not None and batch < oldest)

    def batch_of(source: int) -> t.Callable[[int], int | None]:
        # (Offsets only grow from batch to batch: the first batch reaching an entry, by bisection.)
        batches: list[int] = []
        offsets: list[int] = []
        for b in order:
            end = planned[b][source] if source < len(planned[b]) else None
            if end is not None:
                batches.append(b)
                offsets.append(end)

        def find(entry: int) -> int | None:
            i = bisect.bisect_left(offsets, entry)
            return batches[i] if i < len(batches) else None

        return find

    def read(sources: str) -> dict[str, int]:
        files: dict[str, int] = {}
        for log in os.listdir(sources) if os.path.isdir(sources) else []:
            if not log.isdigit():
                continue
            find = batch_of(int(log))
            for name in os.listdir(os.path.join(sources, log)):
                if name.startswith("."):
                    continue
                with open(os.path.join(sources, log, name), encoding="utf-8") as f:
                    lines = f.read().splitlines()[1:]
                for line in lines:
                    if not line.strip():
                        continue
                    entry = json.loads(line)
                    batch = find(int(entry["batchId"]))
                    if batch is not None and committed(batch):
                        files[unquote(urlparse(entry["path"]).path)] = batch
        return files

    # A running query compacts its log: an entry listed a moment ago may be gone, its files
    # then in a later ``.compact``. Read the folder again until a pass meets no such gap.
    for _ in range(20):
        try:
            return read(os.path.join(checkpoint, "sources"))
        except FileNotFoundError:
            time.sleep(0.05)
    return read(os.path.join(checkpoint, "sources"))


def query_checkpoints(workdir: str) -> list[str]:
    """The query checkpoints under ``workdir/ckpt``: one per Spark query (``commits`` beside
    ``offsets``) or per run of streamjoin's own loop (``loop`` beside ``manifests``), wherever
    each engine keeps it."""
    found = []
    for d, subdirs, _ in os.walk(os.path.join(workdir, "ckpt")):
        if ("commits" in subdirs and "offsets" in subdirs) or (
            LOOP in subdirs and "manifests" in subdirs
        ):
            found.append(d)
    return sorted(found)


def drained(workdir: str, fed: set[str]) -> bool:
    """Every fed file of a stream a query reads is in one of its committed batches."""
    checkpoints = query_checkpoints(workdir)
    if not checkpoints:
        return False
    for ckpt in checkpoints:
        seen = committed_files(ckpt)
        dirs = {os.path.dirname(p) for p in seen}
        want = {p for p in fed if os.path.dirname(p) in dirs}
        if not dirs or not want <= seen.keys():
            return False
    return True
