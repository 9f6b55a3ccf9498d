"""`FileLoop._bounded`: a batch's files within `streamjoin.batch.maxRows` (no JVM): a prefix of
each stream's files, the oldest of each at least, the rest within the bound, and a stream of
small files not held back by another's large ones."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from streamjoin.runtime.loop import FileLoop


def loop_of(streams: int, max_rows: int, row_bytes: float = 1.0) -> FileLoop:
    loop = FileLoop.__new__(FileLoop)
    loop.streams = [SimpleNamespace(name=f"s{i}") for i in range(streams)]  # type: ignore[misc]
    loop.max_rows = max_rows
    loop._row_bytes = {f"s{i}": row_bytes for i in range(streams)}
    loop.held_back = False
    return loop


sizes = st.lists(st.integers(1, 50), max_size=8)


@given(st.lists(sizes, min_size=1, max_size=3), st.integers(1, 100))
def test_a_prefix_of_each_stream_the_oldest_at_least_the_rest_within_the_bound(
    streams: list[list[int]], bound: int
) -> None:
    takes = [[(f"f{i}-{j}", size) for j, size in enumerate(s)] for i, s in enumerate(streams)]
    loop = loop_of(len(takes), bound)
    out = loop._bounded(takes)
    for got, take in zip(out, takes, strict=True):
        assert got == take[: len(got)] and bool(got) == bool(take)
    beyond = sum(size for got in out for _, size in got[1:])
    firsts = sum(got[0][1] for got in out if got)
    assert firsts + beyond <= bound or not beyond
    assert loop.held_back == any(len(g) < len(t) for g, t in zip(out, takes, strict=True))


def test_small_files_go_on_where_another_streams_next_file_does_not_fit() -> None:
    takes = [[("big-0", 40), ("big-1", 40)], [(f"small-{j}", 2) for j in range(10)]]
    out = loop_of(2, 60)._bounded(takes)
    assert [len(s) for s in out] == [1, 10]
