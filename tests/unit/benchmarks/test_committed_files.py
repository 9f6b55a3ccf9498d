"""Which fed files a live run has committed, read from a Spark checkpoint whose old commit files
Spark has deleted (it keeps a query's last 100): a run of more than 100 batches must drain."""

from __future__ import annotations

import json
import os
import typing as t

from benchmarks.rate_feed import FedFile
from benchmarks.rate_latency import CommitWatch, latency_figures
from benchmarks.sparklog import committed_files, drained

if t.TYPE_CHECKING:
    from pathlib import Path


def _file(feed: Path, batch: int) -> str:
    return str(feed / f"part-{batch:05d}.parquet")


def _checkpoint(
    root: Path,
    feed: Path,
    batches: int,
    commits: range,
    compact_every: int = 10,
    offsets: t.Sequence[int] | None = None,
) -> str:
    """A Spark file-source checkpoint: source entry i lists file i of `feed`; batch b read up
    to entry ``offsets[b]`` (default b: one entry a batch); ``commits/<i>`` for each i of
    `commits`, offset files for the same batches and the one after (planned, running); the
    source log compacted every `compact_every` entries, as Spark does."""
    for d in ("commits", "offsets", "sources/0"):
        (root / d).mkdir(parents=True)
    ends = list(range(batches)) if offsets is None else list(offsets)
    for b in range(commits.start, min(commits.stop + 1, len(ends))):
        meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}})
        offset = json.dumps({"logOffset": ends[b]})
        (root / "offsets" / str(b)).write_text(f"v1\n{meta}\n{offset}\n")
    log: list[str] = []
    for b in range(max(ends, default=-1) + 1):
        entry = json.dumps({"path": f"file://{_file(feed, b)}", "timestamp": 0, "batchId": b})
        log.append(entry)
        compact = (b + 1) % compact_every == 0
        name, lines = (f"{b}.compact", log) if compact else (str(b), [entry])
        (root / "sources" / "0" / name).write_text("\n".join(["v1", *lines]) + "\n")
    for b in commits:
        (root / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
        (root / "commits" / f".{b}.crc").write_text("")
    return str(root)


def test_batches_older_than_the_oldest_commit_left_are_committed(tmp_path: Path) -> None:
    feed = tmp_path / "feed"
    ckpt = _checkpoint(tmp_path / "ckpt", feed, batches=151, commits=range(50, 150))
    files = committed_files(ckpt)
    # (Batch 150 is running. Spark deleted the offset files of batches 0-49 with their commit
    # files: their files are given the oldest batch left, 50.)
    assert files == {_file(feed, b): max(b, 50) for b in range(150)}


def test_nothing_is_committed_before_the_first_commit(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path / "ckpt", tmp_path / "feed", batches=3, commits=range(0))
    assert committed_files(ckpt) == {}


def test_a_run_of_more_than_a_hundred_batches_drains(tmp_path: Path) -> None:
    feed = tmp_path / "feed"
    _checkpoint(tmp_path / "work" / "ckpt" / "q1", feed, batches=150, commits=range(50, 150))
    fed = {_file(feed, b) for b in range(150)}
    assert drained(str(tmp_path / "work"), fed)
    assert not drained(str(tmp_path / "work"), fed | {_file(feed, 150)})


def test_a_batch_without_new_data_puts_the_next_files_in_the_batch_after(tmp_path: Path) -> None:
    """Spark runs a batch without new data when a watermark moves: the sources' entries then
    trail the batches' numbers, and a file's batch is the first whose offset reaches it."""
    feed = tmp_path / "feed"
    # Entries 0, 1, 2 (a file each) read by batches 0, 1 and 3; batch 2 read nothing new.
    ckpt = _checkpoint(tmp_path / "ckpt", feed, batches=4, commits=range(3), offsets=[0, 1, 1, 2])
    assert committed_files(ckpt) == {_file(feed, 0): 0, _file(feed, 1): 1}  # (batch 3 runs)
    (tmp_path / "ckpt" / "commits" / "3").write_text("v1\n")
    assert committed_files(ckpt) == {_file(feed, 0): 0, _file(feed, 1): 1, _file(feed, 2): 3}


def test_offsets_seen_during_the_run_place_files_whose_offset_files_went(tmp_path: Path) -> None:
    feed, work = tmp_path / "feed", tmp_path / "work"
    ckpt = _checkpoint(
        work / "ckpt" / "q1", feed, batches=4, commits=range(4), offsets=[0, 0, 1, 2]
    )
    watch = CommitWatch(str(work))
    watch.scan()
    for b in (0, 1, 2):
        os.remove(os.path.join(ckpt, "offsets", str(b)))
    # (Without the watch, entries 0 and 1 fall to the oldest batch left that reaches them.)
    assert committed_files(ckpt) == {_file(feed, e): 3 for e in range(3)}
    assert committed_files(ckpt, watch.ends[ckpt]) == {
        _file(feed, 0): 0,
        _file(feed, 1): 2,
        _file(feed, 2): 3,
    }


def test_latency_takes_commit_times_seen_during_the_run(tmp_path: Path) -> None:
    feed, work = tmp_path / "feed", tmp_path / "work"
    ckpt = _checkpoint(work / "ckpt" / "q1", feed, batches=5, commits=range(3, 5))
    for b in (3, 4):
        os.utime(os.path.join(ckpt, "commits", str(b)), (110.0 + b, 110.0 + b))
    # Batches 0 and 1 were seen before their commit files went; batch 2's was never seen, so its
    # time is at most that of the oldest file left (batch 3's).
    watch = CommitWatch(str(work))
    watch.times = {ckpt: {0: 101.0, 1: 102.0}}
    watch.ends = {ckpt: {0: (0,), 1: (1,)}}
    fed = [FedFile(_file(feed, b), "a", 10, 100.0 + b) for b in range(5)]
    figures = latency_figures(str(work), fed, 100.0, 105.0, 1.0, watch)
    assert figures["rows_processed"] == figures["rows_fed"] == 50
    assert figures["latency_max_s"] == 113.0 - 102.0
    assert figures["latency_p50_s"] == 10.0  # (1, 1, 11, 10, 10 s)
    assert figures["drain_s"] == 114.0 - 105.0
    # A file fed after the last commit was never done: the engine did not drain (no negative
    # drain time from the files it did).
    late = latency_figures(
        str(work), [*fed, FedFile(_file(feed, 5), "a", 10, 105.0)], 100.0, 105.0, 1.0, watch
    )
    assert late["rows_processed"] == 50 and late["drain_s"] is None


def test_the_watch_keeps_the_times_of_deleted_commit_files(tmp_path: Path) -> None:
    feed, work = tmp_path / "feed", tmp_path / "work"
    ckpt = _checkpoint(work / "ckpt" / "q1", feed, batches=3, commits=range(2))
    watch = CommitWatch(str(work))
    watch.scan()
    os.remove(os.path.join(ckpt, "commits", "0"))
    (tmp_path / "work" / "ckpt" / "q1" / "commits" / "2").write_text("v1\n")
    assert set(watch.stop()[ckpt]) == {0, 1, 2}


def test_an_entry_compacted_away_while_being_read_is_found_in_the_compaction(
    tmp_path: Path, monkeypatch: t.Any
) -> None:
    """Spark writes ``<n>.compact`` and deletes the entries before it while the run goes on: an
    entry listed by one read may be gone when it is opened."""
    feed = tmp_path / "feed"
    ckpt = _checkpoint(tmp_path / "ckpt", feed, batches=9, commits=range(9))
    log = tmp_path / "ckpt" / "sources" / "0"
    real_walk = os.walk

    def walk_then_compact(top: str) -> t.Iterator[tuple[str, list[str], list[str]]]:
        for d, dirs, names in real_walk(top):
            if d == str(log) and not (log / "9.compact").exists():
                entries = [json.loads(line) for n in range(9) for line in _lines(log / str(n))]
                entries.append({"path": f"file://{_file(feed, 9)}", "timestamp": 0, "batchId": 9})
                rows = ["v1", *(json.dumps(e) for e in entries)]
                (log / "9.compact").write_text("\n".join(rows) + "\n")
                for n in range(9):
                    (log / str(n)).unlink()
            yield d, dirs, names  # (as listed before the compaction)

    monkeypatch.setattr(os, "walk", walk_then_compact)
    assert committed_files(ckpt) == {_file(feed, b): b for b in range(9)}


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines()[1:] if line.strip()]


def _loop_checkpoint(root: Path, feed: Path, batches: int, committed: int, compacted: int) -> str:
    """A checkpoint of streamjoin's own loop: batch b read file b of `feed` and of ``feed2``;
    logs up to `compacted` folded into ``<compacted>.read``, the rest one a batch; manifests of
    the last three committed batches left (older ones deleted), each written at 100 + b."""
    (root / "loop" / "empty").mkdir(parents=True)
    (root / "manifests").mkdir()
    uri = {
        b: [f"file:{_file(feed, b)}", f"file:{_file(feed.with_name('feed2'), b)}"]
        for b in range(batches)
    }
    read = {
        "a": {uri[b][0]: b for b in range(compacted + 1)},
        "b": {uri[b][1]: b for b in range(compacted + 1)},
    }
    (root / "loop" / f"{compacted}.read").write_text(json.dumps({"streams": read}))
    for b in range(compacted + 1, batches):
        logged = {"a": [[uri[b][0], 10]], "b": [[uri[b][1], 10]]}
        (root / "loop" / str(b)).write_text(json.dumps({"streams": logged}))
    for b in range(max(0, committed - 2), committed + 1):
        path = root / "manifests" / f"{b:012d}.json"
        path.write_text("{}")
        os.utime(path, (100.0 + b, 100.0 + b))
    return str(root)


def test_the_engines_own_loop_tells_which_batch_read_each_file_and_when_it_committed(
    tmp_path: Path,
) -> None:
    feed, work = tmp_path / "feed", tmp_path / "work"
    # Batch 6 is logged and running; 0-4 are compacted, 3-5 have their manifests left.
    ckpt = _loop_checkpoint(work / "ckpt", feed, batches=7, committed=5, compacted=4)
    files = committed_files(ckpt)
    assert files == {
        **{_file(feed, b): b for b in range(6)},
        **{_file(feed.with_name("feed2"), b): b for b in range(6)},
    }
    fed = {_file(feed, b) for b in range(6)}
    assert drained(str(work), fed)
    assert not drained(str(work), fed | {_file(feed, 6)})
    watch = CommitWatch(str(work))
    watch.times = {ckpt: {0: 100.0, 1: 101.0, 2: 102.0}}  # (seen before they were deleted)
    fed_files = [FedFile(_file(feed, b), "a", 10, 99.5 + b) for b in range(6)]
    figures = latency_figures(str(work), fed_files, 99.0, 106.0, 1.0, watch)
    assert figures["rows_processed"] == 60
    assert figures["latency_max_s"] == figures["latency_p50_s"] == 0.5
