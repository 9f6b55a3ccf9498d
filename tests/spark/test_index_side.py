"""One side of an executor-memory index (``IndexSide.java``) against a model of it: rows added
in arrival order, dropped from the oldest end by event time and from the newest by batch, and
each key's live rows found newest first, one at a time and a run of consecutive slots at a
time, with each row's bucket and outer mark, through the array growth and shrinking, the
reclaiming of dead rows, the table's rebuilds that many operations set off, the columns made
at their first value, and the spills of the oldest rows' bytes to files, read back."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Model:
    """The side as a list in arrival order: (key, time, batch, row id), with each row's bucket
    and the rows marked matched, by id."""

    rows: list[tuple[int, int, int, int]] = field(default_factory=list)
    buckets: dict[int, int] = field(default_factory=dict)
    matched: set[int] = field(default_factory=set)

    def add(self, key: int, ts: int, batch: int, rid: int, bucket: int) -> None:
        self.rows.append((key, ts, batch, rid))
        self.buckets[rid] = bucket

    def expire(self, least: int) -> None:
        while self.rows and self.rows[0][1] < least:
            self.rows.pop(0)

    def undo(self, batch: int) -> None:
        while self.rows and self.rows[-1][2] == batch:
            self.rows.pop()

    def find(self, key: int) -> list[int]:
        return [rid for k, _, _, rid in reversed(self.rows) if k == key]


# Few keys (chains of many rows), bands' consecutive buckets, and hashes' extremes.
KEYS = st.one_of(st.integers(0, 6), st.sampled_from([-(2**63), 2**63 - 1, -1, 2**40]))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), KEYS, st.integers(0, 40), st.integers(1, 8)),
        st.tuples(st.just("batch"), st.integers(1, 60), KEYS, st.integers(0, 40)),
        st.tuples(st.just("spread"), st.integers(1, 40), st.integers(-50, 50), st.integers(0, 40)),
        st.tuples(st.just("expire"), st.integers(0, 45)),
        st.tuples(st.just("undo"), st.integers(1, 9)),
        # (Spills the oldest rows in memory until those left hold at most so many bytes.)
        st.tuples(st.just("spill"), st.sampled_from([0, 64, 200, 10**6])),
        # (A band's rows, each with its bucket: the side makes its bucket column.)
        st.tuples(st.just("band"), st.integers(1, 30), KEYS, st.integers(0, 40)),
        # (An outer join's mark on a key's newest row: the side makes its marks.)
        st.tuples(st.just("match"), KEYS),
    ),
    max_size=40,
)


def _index_side(spark: SparkSession) -> t.Any:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    side = jvm.streamjoin.operator.IndexSide
    try:
        return side()
    except Exception:  # (py4j: a class it cannot find is a package, and calling it fails)
        pytest.skip("streamjoin's jar is not on the driver's class path")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_an_index_side_finds_what_the_model_keeps(spark: SparkSession, ops: list[t.Any]) -> None:
    gateway = spark.sparkContext._gateway
    jvm = spark.sparkContext._jvm
    assert gateway is not None and jvm is not None
    side, model, rid = _index_side(spark), Model(), 0

    def add(key: int, ts: int, batch: int, bucket: int = 0) -> None:
        nonlocal rid
        rid += 1
        # (An UnsafeRow of one int, as the operator stores rows: its bytes can spill.)
        row = jvm.org.apache.spark.sql.catalyst.expressions.UnsafeRow(1)
        row.pointTo(bytearray(16), 16)
        row.setInt(0, rid)
        if bucket:
            side.add(key, bucket, ts, batch, row)
        else:
            side.add(key, ts, batch, row)
        model.add(key, ts, batch, rid, bucket)

    def check(key: int) -> None:
        found, i = [], side.first(key)
        while i >= 0:
            got = side.row(i).getInt(0)
            found.append(got)
            assert side.bucket(i) == model.buckets[got], (key, got)
            assert side.matched(i) == (got in model.matched), (key, got)
            i = side.next(i)
        assert found == model.find(key), key
        # (A run at a time, as a probe takes them: every slot of a run is the key's row.)
        in_runs, i = [], side.first(key)
        while i >= 0:
            first = side.runFrom(i)
            in_runs += [side.row(k).getInt(0) for k in range(i, first - 1, -1)]
            i = side.next(first)
        assert in_runs == found, key

    for op in ops:
        if op[0] == "add":
            add(op[1], op[2], op[3])
        elif op[0] == "batch":  # (many rows of one key and batch: the arrays grow and reclaim)
            for i in range(op[1]):
                add(op[2] if i % 2 else i % 5, op[3] + i % 7, 9)
        elif op[0] == "spread":  # (many keys: the table is made again, dead keys left out)
            for i in range(op[1]):
                add(op[2] + i, op[3] + i % 3, 8)
        elif op[0] == "band":  # (consecutive buckets, some rows of one key in a row)
            for i in range(op[1]):
                add(op[2] if i % 3 else i, op[3] + i % 5, 7, bucket=1 + i // 2)
        elif op[0] == "match":
            i = side.first(op[1])
            if i >= 0:
                side.match(i)
                model.matched.add(side.row(i).getInt(0))
        elif op[0] == "expire":
            side.expire(op[1], None)  # (no shared marks)
            model.expire(op[1])
        elif op[0] == "undo":
            side.undo(op[1])
            model.undo(op[1])
        else:
            side.spillTo(op[1])
        assert side.size() == len(model.rows)
        for key in (0, model.rows[-1][0] if model.rows else 1):  # (a stale chain shows at once)
            check(key)
    for key in {k for k, *_ in model.rows} | {0, 7, 99, -(2**63)}:
        check(key)
    side.close()


def test_spilled_rows_are_read_back_taken_back_and_expired(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    side = _index_side(spark)
    for rid in range(10):  # (keys 0 and 1 alternate; batch 1 for the first 6, then 2)
        row = jvm.org.apache.spark.sql.catalyst.expressions.UnsafeRow(1)
        row.pointTo(bytearray(16), 16)
        row.setInt(0, rid)
        side.add(rid % 2, rid, 1 if rid < 6 else 2, row)
    side.spillTo(0)
    assert side.spilledRows() == 10

    def rows(key: int) -> list[int]:
        found, i = [], side.first(key)
        while i >= 0:
            found.append(side.row(i).getInt(0))
            i = side.next(i)
        return found

    assert rows(0) == [8, 6, 4, 2, 0] and rows(1) == [9, 7, 5, 3, 1]
    side.undo(2)  # (the newest 4, spilled, taken back)
    assert side.spilledRows() == 6 and rows(0) == [4, 2, 0]
    side.expire(3, None)
    assert side.spilledRows() == 3 and rows(1) == [5, 3]
    side.close()


def test_a_bursts_arrays_shrink_once_its_rows_expire(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    side, model = _index_side(spark), Model()

    def add(rid: int, ts: int) -> None:
        row = jvm.org.apache.spark.sql.catalyst.expressions.UnsafeRow(1)
        row.pointTo(bytearray(16), 16)
        row.setInt(0, rid)
        side.add(rid % 50, ts, 1, row)
        model.add(rid % 50, ts, 1, rid, 0)

    for rid in range(4000):  # (a burst: the arrays grow to its size)
        add(rid, rid)
    burst = side.slotBytes()
    side.expire(3990, None)
    model.expire(3990)
    for rid in range(4000, 4200):  # (the arrays fill up: the reclaim moves the 10 left)
        add(rid, rid)
    assert side.slotBytes() * 8 < burst, (side.slotBytes(), burst)
    for key in range(50):
        found, i = [], side.first(key)
        while i >= 0:
            found.append(side.row(i).getInt(0))
            i = side.next(i)
        assert found == model.find(key), key
    side.close()
