"""When an engine without batches (``flink``) was done with each fed file of a live run: from
the files of each result's two rows and the time the result was made
(`benchmarks.rate_latency.traced_done_times`)."""

from __future__ import annotations

import csv
import typing as t

from benchmarks.rate_feed import FedFile
from benchmarks.rate_latency import latency_figures, traced_done_times

if t.TYPE_CHECKING:
    from pathlib import Path

T0 = 1_800_000_000.0  # (2027-01-15 08:00:00 UTC)


def _at(seconds: float) -> str:
    import datetime as dt

    moment = dt.datetime.fromtimestamp(T0 + seconds, dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _write(path: Path, rows: list[list[t.Any]]) -> str:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    return str(path)


def test_a_file_is_done_when_read_and_the_last_result_it_completes_is_made(
    tmp_path: Path,
) -> None:
    fed = [
        FedFile(f"/feed/{s}/part-{j:05d}.csv", s, 10, T0 + j + (0.1 if s == "b" else 0.0))
        for j in range(3)
        for s in ("a", "b")
    ]
    # (Per pair of files: the latest time a result of the pair was made, how many.)
    traces = _write(
        tmp_path / "traces.csv",
        [
            # a's file 0 with b's file 0 (written 0.1 s after it): b's file 0 completes them.
            ["part-00000.csv", "part-00000.csv", _at(0.4), 3],
            # a's file 1 with b's files 0 and 1: a's file 1 completes the first pair's results.
            ["part-00001.csv", "part-00000.csv", _at(1.7), 2],
            ["part-00001.csv", "part-00001.csv", _at(1.2), 1],
            # b's file 2 with a's file 2; and a file never fed (a warm-up's): not timed.
            ["part-00002.csv", "part-00002.csv", _at(2.6), 1],
            ["part-00009.csv", "part-00002.csv", _at(2.9), 1],
        ],
    )
    # (Per file: the latest time one of its rows was read, how many.) a's file 0 completes no
    # result: done when read. a's file 2 was read only in part: not done. The warm-up's file
    # was not fed.
    reads = {
        _write(
            tmp_path / "reads-a.csv",
            [
                ["part-00000.csv", _at(0.05), 10],
                ["part-00001.csv", _at(1.1), 10],
                ["part-00002.csv", _at(2.5), 7],
                ["part-00009.csv", _at(0.0), 10],
            ],
        ): "a",
        _write(
            tmp_path / "reads-b.csv",
            [[f"part-0000{j}.csv", _at(j + 0.15), 10] for j in range(3)],
        ): "b",
    }
    done = traced_done_times({traces: ("a", "b")}, reads, fed)
    assert done == {
        "/feed/a/part-00000.csv": T0 + 0.05,
        "/feed/b/part-00000.csv": T0 + 0.4,
        "/feed/a/part-00001.csv": T0 + 1.7,
        "/feed/b/part-00001.csv": T0 + 1.2,
        "/feed/b/part-00002.csv": T0 + 2.6,
    }
    figures = latency_figures(str(tmp_path), fed, T0, T0 + 3, 1.0, done=done)
    # (Five files of ten rows timed: 0.05, 0.3, 0.7, 0.1 and 0.5 s after they were written.)
    assert figures["rows_processed"] == 50
    assert figures["rows_fed"] == 60
    assert figures["latency_p50_s"] == 0.3
    assert figures["latency_max_s"] == 0.7
