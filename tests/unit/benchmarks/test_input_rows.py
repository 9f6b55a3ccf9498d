"""A Spark peer's input rows, read from its progress events (`engines_measure._Batches`)."""

from __future__ import annotations

from benchmarks.engines_measure import _Batches


def _progress(*sources: tuple[str, int]) -> dict[str, object]:
    return {
        "numInputRows": sum(n for _, n in sources),
        "durationMs": {"triggerExecution": 40},
        "sources": [{"description": d, "numInputRows": n} for d, n in sources],
    }


def test_a_stream_read_twice_in_one_query_counts_its_rows_once() -> None:
    batches = _Batches()
    bids = "FileStreamSource[file:/data/bid]"
    batches.record(_progress((bids, 1000), (bids, 1000)))  # (q7: bids joined with their groups)
    batches.record(
        _progress(("FileStreamSource[file:/data/a]", 10), ("FileStreamSource[file:/data/b]", 5))
    )
    batches.record({"numInputRows": 7, "durationMs": {}})  # (no sources listed: Spark's count)
    assert batches.rows == 1000 + 15 + 7
    assert batches.batch_ms == [40.0, 40.0, 0.0]
