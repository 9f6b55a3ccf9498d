"""Which files a batch of a file stream read, from Spark's checkpoint logs (`SourceLog`), and
which streams keep their state in their own files (`sourced_streams`). No JVM: the logs are
text in a dictionary standing in for the file system; Spark's side is
`tests/spark/test_sourced_state`."""

from __future__ import annotations

import json

import pytest

from streamjoin.errors import StreamJoinError
from streamjoin.plan import JobPlan, plan_job
from streamjoin.runtime.state.copybehind import unbounded_streams
from streamjoin.runtime.state.sourcefiles import SourceLog, sourced_streams
from streamjoin.sql import parse_job

CKPT = "file:/ck/spark"


class _Files:
    """The file system calls `SourceLog` makes, over a dictionary of path → text."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def exists(self, path: str) -> bool:
        return path in self.files

    def read_text(self, path: str) -> str:
        return self.files[path]

    def list_names(self, path: str) -> list[str]:
        return [p[len(path) + 1 :] for p in self.files if p.startswith(path + "/")]

    def qualify(self, path: str) -> str:
        return "file:" + path


def _plan(options: str = "", window: bool = True, extra: str = "") -> JobPlan:
    streams = "\n".join(
        f"CREATE STREAM {n} (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)"
        f" WITH (format = 'parquet', path = '/in/{n}'{options});"
        for n in ("a", "b")
    )
    on = "l.k = r.k" + (
        " AND r.ts BETWEEN l.ts - INTERVAL '5' SECOND AND l.ts + INTERVAL '5' SECOND"
        if window
        else ""
    )
    text = (
        f"{streams}\nCREATE SINK o WITH (format = 'parquet', path = '/out');\n"
        f"INSERT INTO o SELECT l.k AS k FROM a l JOIN b r ON {on};\n{extra}"
    )
    return plan_job(parse_job(text, "<test>"))


def _offsets(*per_source: int | None) -> str:
    lines = ["v1", json.dumps({"batchWatermarkMs": 0, "conf": {}})]
    lines += ["-" if o is None else json.dumps({"logOffset": o}) for o in per_source]
    return "\n".join(lines)


def _entries(*entries: tuple[str, int]) -> str:
    rows = [json.dumps({"path": p, "timestamp": 1, "batchId": b}) for p, b in entries]
    return "\n".join(["v1", *rows])


def _log(files: dict[str, str]) -> SourceLog:
    return SourceLog(_Files(files), CKPT, _plan().streams)  # type: ignore[arg-type]


def test_a_batch_reads_the_files_of_its_log_offsets_per_source() -> None:
    log = _log(
        {
            f"{CKPT}/offsets/0": _offsets(0, 0),
            f"{CKPT}/offsets/1": _offsets(1, 0),
            f"{CKPT}/sources/0/0": _entries(("file:///in/a/p0.parquet", 0)),
            f"{CKPT}/sources/0/1": _entries(("file:///in/a/p%20q.parquet", 1)),
            f"{CKPT}/sources/1/0": _entries(("file:///in/b/p0.parquet", 0)),
        }
    )
    assert log.files(0) == {"a": ["file:///in/a/p0.parquet"], "b": ["file:///in/b/p0.parquet"]}
    # b read nothing new in batch 1: it has no unit to keep; a's name is unescaped.
    assert log.files(1) == {"a": ["file:///in/a/p q.parquet"]}


def test_an_offset_folded_into_a_compaction_is_read_from_it() -> None:
    log = _log(
        {
            f"{CKPT}/offsets/8": _offsets(8, 8),
            f"{CKPT}/offsets/9": _offsets(9, 9),
            f"{CKPT}/offsets/4": _offsets(4, 4),
            f"{CKPT}/offsets/5": _offsets(5, 5),
            # Offset 5's own file went after the compaction; later single ones are no help.
            f"{CKPT}/sources/0/8": _entries(("file:///in/a/p8.parquet", 8)),
            f"{CKPT}/sources/0/10": _entries(("file:///in/a/p10.parquet", 10)),
            f"{CKPT}/sources/0/9.compact": _entries(
                ("file:///in/a/p5.parquet", 5),
                ("file:///in/a/p8.parquet", 8),
                ("file:///in/a/p9.parquet", 9),
            ),
            f"{CKPT}/sources/1/9.compact": _entries(("file:///in/b/p9.parquet", 9)),
        }
    )
    assert log.files(9) == {"a": ["file:///in/a/p9.parquet"], "b": ["file:///in/b/p9.parquet"]}
    assert log.files(5) == {"a": ["file:///in/a/p5.parquet"]}


def test_a_compaction_is_read_from_its_end_down_to_the_offset() -> None:
    # The lines before offset 9's are never parsed: a batch costs its entries, not the run's.
    older = "\n".join(["v1", "{not json", _entries(("file:///in/a/p8.parquet", 8))[3:]])
    log = _log(
        {
            f"{CKPT}/offsets/8": _offsets(8, None),
            f"{CKPT}/offsets/9": _offsets(9, None),
            f"{CKPT}/sources/0/9.compact": older
            + "\n"
            + "\n".join(
                json.dumps({"path": f"file:///in/a/p9-{i}.parquet", "batchId": 9}) for i in (0, 1)
            ),
        }
    )
    assert log.files(9) == {"a": ["file:///in/a/p9-0.parquet", "file:///in/a/p9-1.parquet"]}


def test_streams_whose_files_the_logs_do_not_tell_are_left_out() -> None:
    log = _log(
        {
            # No offsets before batch 3: where its files start is unknown.
            f"{CKPT}/offsets/3": _offsets(3, 3),
            f"{CKPT}/offsets/5": _offsets(5, 5),
            f"{CKPT}/offsets/6": _offsets(6, 6),
            # a's offset 6 names a file outside a's path (sources in another order).
            f"{CKPT}/sources/0/6": _entries(("file:///in/b/p6.parquet", 6)),
            # b's offset 6 is in no log.
        }
    )
    assert log.files(4) == {}
    assert log.files(6) == {}


def test_file_streams_keep_their_state_in_their_files_unless_told() -> None:
    assert [sp.name for sp in sourced_streams(_plan(), {"a", "b"})] == ["a", "b"]
    assert sourced_streams(_plan(), {"a", "b"}, from_source=False) == []
    # A stream handed over as a DataFrame: the sources' order is unknown.
    assert sourced_streams(_plan(), {"a"}) == []
    # Full history: the files are needed until each unit's copy lands (`copybehind`).
    unbounded = _plan(window=False)
    assert [sp.name for sp in sourced_streams(unbounded, {"a", "b"})] == ["a", "b"]
    assert [sp.name for sp in unbounded_streams(unbounded)] == ["a", "b"]
    assert unbounded_streams(_plan()) == []
    assert sourced_streams(_plan(", state = 'copy'"), {"a", "b"}) == []
    assert sourced_streams(_plan(", cleanSource = 'delete'"), {"a", "b"}) == []
    with pytest.raises(StreamJoinError, match="state must be one of 'auto', 'copy', got 'keep'"):
        sourced_streams(_plan(", state = 'keep'"), {"a", "b"})
