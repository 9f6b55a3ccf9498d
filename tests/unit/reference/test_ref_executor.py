"""The reference run of a job: late and malformed rows, the global watermark, join results."""

from __future__ import annotations

import bisect
import datetime as dt
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.model import (
    Column,
    Job,
    JoinSide,
    Query,
    SelectItem,
    SinkDef,
    SqlType,
    StreamDef,
    Watermark,
)
from streamjoin.model.types import TypeName
from streamjoin.reference import event_time_us, normalize, reference_join, run_reference

BASE = dt.datetime(2024, 1, 1)
SECOND = 1_000_000
Row = Mapping[str, object]


def t(seconds: float) -> dt.datetime:
    """The event time `seconds` after BASE."""
    return BASE + dt.timedelta(seconds=seconds)


def us(seconds: float) -> int:
    """Epoch microseconds of t(seconds)."""
    return event_time_us(t(seconds))


def stream(
    name: str, *columns: tuple[str, TypeName | SqlType], watermark: tuple[str, int] | None = None
) -> StreamDef:
    """A JSON stream; `watermark` is (column, delay in seconds)."""
    wm = Watermark(watermark[0], watermark[1] * SECOND) if watermark else None
    cols = tuple(Column(n, ty if isinstance(ty, SqlType) else SqlType(ty)) for n, ty in columns)
    return StreamDef(name, cols, "json", watermark=wm)


def query(name: str, left: str, right: str, predicate: str, *select: tuple[str, str]) -> Query:
    """A query; `left`/`right` are "stream alias"; `select` holds (sql, alias) pairs."""
    (ls, la), (rs, ra) = left.split(), right.split()
    items = tuple(SelectItem(sql, alias) for sql, alias in select)
    return Query(name, "out", JoinSide(ls, la), JoinSide(rs, ra), predicate, items)


def job(streams: Sequence[StreamDef], *queries: Query) -> Job:
    return Job(tuple(streams), (SinkDef("out", "json"),), queries)


ID_TS: tuple[tuple[str, TypeName], ...] = (("id", "BIGINT"), ("ts", "TIMESTAMP"))


# ------------------------------------------------------------------------ the watermark rule


def test_watermark_rule_on_a_hand_worked_example() -> None:
    left = stream("L", *ID_TS, watermark=("ts", 5))
    right = stream("R", *ID_TS, watermark=("ts", 2))
    idle = stream("X", *ID_TS, watermark=("ts", 0))  # no query reads X: it must not hold W back
    q = query("q", "L l", "R r", "l.id = r.id", ("l.id", "id"), ("l.ts", "lts"), ("r.ts", "rts"))
    j = job([left, right, idle], q)

    def row(i: int, seconds: float | None) -> dict[str, object]:
        return {"id": i, "ts": None if seconds is None else t(seconds)}

    batches: list[dict[str, list[dict[str, object]]]] = [
        # wm_L = 20 - 5 = 15; R has no watermark yet, so W stays None.
        {"L": [row(1, 10), row(2, 20)], "X": [row(9, 1000)]},
        # W is None: nothing is late, however old. Row 4 has no event time: malformed.
        # wm_L = max(15, 1 - 5) = 15; wm_R = 30 - 2 = 28; W = min(15, 28) = 15.
        {"L": [row(3, 1), row(4, None)], "R": [row(1, 30), row(3, 12)]},
        # W = 15: L@14 and R@10 are late, L@15 is not (strictly below only).
        # wm_L = max(15, 40 - 5) = 35; wm_R = max(28, 20 - 2) = 28; W = 28.
        {"L": [row(5, 14), row(6, 15), row(7, 40)], "R": [row(2, 10), row(6, 15), row(5, 20)]},
        # An empty batch leaves everything as it was.
        {},
        # W = 28: L@27 is late, L@28 is on time. wm_L stays 35 (23 < 35); wm_R = 98; W = 35.
        {"L": [row(8, 27), row(7, 28)], "R": [row(7, 100), row(8, 50)]},
    ]
    result = run_reference(j, batches)

    assert result.watermarks == [None, us(15), us(28), us(28), us(35)]
    assert result.late == {"L": [row(5, 14), row(8, 27)], "R": [row(2, 10)]}
    assert result.malformed == {"L": [row(4, None)], "R": []}
    # Joins on id among on-time rows only: 5 (L late), 2 (R late), 8 (L late), 4 (malformed)
    # find no partner; 7 joins twice (two on-time L rows), across batches.
    assert normalize(result.outputs["q"]) == normalize(
        [
            (1, t(10), t(30)),
            (3, t(1), t(12)),
            (6, t(15), t(15)),
            (7, t(40), t(100)),
            (7, t(28), t(100)),
        ]
    )


def test_stream_without_watermark_is_all_on_time_and_does_not_hold_w() -> None:
    timed = stream("A", *ID_TS, watermark=("ts", 0))
    untimed = stream("B", *ID_TS)
    j = job([timed, untimed], query("q", "A a", "B b", "a.id = b.id", ("b.ts", "bts")))
    batches: list[dict[str, list[dict[str, object]]]] = [
        {"A": [{"id": 1, "ts": t(100)}], "B": [{"id": 1, "ts": None}]},
        {"A": [{"id": 2, "ts": t(50)}], "B": [{"id": 2, "ts": t(0)}, {"id": 1, "ts": t(1)}]},
    ]
    result = run_reference(j, batches)
    assert result.watermarks == [us(100), us(100)]
    assert result.late == {"A": [{"id": 2, "ts": t(50)}], "B": []}
    assert result.malformed == {"A": [], "B": []}
    assert normalize(result.outputs["q"]) == normalize([(None,), (t(1),)])


def test_no_watermarked_stream_means_no_watermark() -> None:
    a, b = stream("A", ("k", "BIGINT")), stream("B", ("k", "BIGINT"))
    j = job([a, b], query("q", "A a", "B b", "a.k = b.k", ("a.k", "k")))
    result = run_reference(j, [{"A": [{"k": 1}]}, {"B": [{"k": 1}]}])
    assert result.watermarks == [None, None]
    assert result.outputs == {"q": [(1,)]}


def test_unknown_stream_in_a_batch_is_an_error() -> None:
    a = stream("A", ("k", "BIGINT"))
    j = job([a], query("q", "A x", "A y", "x.k = y.k", ("x.k", "k")))
    with pytest.raises(KeyError, match="unknown streams"):
        run_reference(j, [{"Nope": [{"k": 1}]}])


# --------------------------------------------------------------------------- join semantics


KV: tuple[tuple[str, TypeName], ...] = (("k", "BIGINT"), ("v", "STRING"))


def test_self_join_pairs_include_each_row_with_itself() -> None:
    s = stream("S", *KV)
    j = job([s], query("q", "S a", "S b", "a.k = b.k", ("a.v", "av"), ("b.v", "bv")))
    rows = [{"k": 1, "v": "x"}, {"k": 1, "v": "y"}, {"k": 2, "v": "z"}]
    want = [("x", "x"), ("x", "y"), ("y", "x"), ("y", "y"), ("z", "z")]
    assert normalize(reference_join(j, "q", rows, rows)) == want
    assert normalize(run_reference(j, [{"S": rows}]).outputs["q"]) == want


def test_null_keys_never_equal_but_null_safe_equal() -> None:
    a, b = stream("A", *KV), stream("B", *KV)
    eq = query("eq", "A a", "B b", "a.k = b.k", ("a.v", "av"), ("b.v", "bv"))
    nse = query("nse", "A a", "B b", "a.k <=> b.k", ("a.v", "av"), ("b.v", "bv"))
    j = job([a, b], eq, nse)
    left: list[Row] = [{"k": 1, "v": "l1"}, {"k": None, "v": "ln1"}, {"k": None, "v": "ln2"}]
    right: list[Row] = [{"k": 1, "v": "r1"}, {"k": None, "v": "rn"}]
    assert reference_join(j, "eq", left, right) == [("l1", "r1")]
    assert normalize(reference_join(j, "nse", left, right)) == [
        ("l1", "r1"),
        ("ln1", "rn"),
        ("ln2", "rn"),
    ]


def test_duplicates_multiply() -> None:
    a, b = stream("A", *KV), stream("B", *KV)
    j = job([a, b], query("q", "A a", "B b", "a.k = b.k", ("a.v", "av"), ("b.v", "bv")))
    left = [{"k": 1, "v": "l"}] * 2
    right = [{"k": 1, "v": "r"}] * 3
    assert reference_join(j, "q", left, right) == [("l", "r")] * 6


def test_select_order_and_expressions() -> None:
    a = stream("A", ("k", "BIGINT"), ("price", "DOUBLE"))
    b = stream("B", ("k", "BIGINT"), ("price", "DOUBLE"))
    q = query(
        "q",
        "A a",
        "B b",
        "abs(a.price - b.price) <= 0.5 AND a.k <> b.k",
        ("b.k", "bk"),
        ("a.k", "ak"),
        ("a.price - b.price", "diff"),
    )
    j = job([a, b], q)
    left: list[Row] = [{"k": 1, "price": 10}, {"k": 2, "price": 10.25}]  # int in a DOUBLE column
    right = [{"k": 1, "price": 10.5}, {"k": 3, "price": 9.0}]
    got = reference_join(j, "q", left, right)
    assert normalize(got) == [(1, 2, -0.25)]
    assert type(got[0][2]) is float


def test_rows_are_conformed_to_the_schema() -> None:
    a = stream("A", ("K", "BIGINT"), ("d", SqlType("DECIMAL", 5, 2)), ("ts", "TIMESTAMP"))
    j = job([a], query("q", "A x", "A y", "x.k = y.k", ("x.d", "d"), ("x.ts", "ts")))
    aware = dt.datetime(2024, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    got = reference_join(j, "q", [{"k": 1, "D": 1.005, "ts": aware}], [{"K": 1}])
    assert got == [(Decimal("1.01"), BASE)]
    assert type(got[0][0]) is Decimal
    assert reference_join(j, "q", [{"k": 1, "d": 1000}], [{"k": 1}]) == [(None, None)]
    assert reference_join(j, "q", [{"d": 1}], [{"d": 1}]) == []  # a missing column is NULL
    with pytest.raises(ValueError, match="no column 'nope'"):
        reference_join(j, "q", [{"nope": 1}], [])
    with pytest.raises(TypeError, match="is BIGINT"):
        reference_join(j, "q", [{"k": "1"}], [])
    with pytest.raises(TypeError, match="is BIGINT"):
        reference_join(j, "q", [{"k": 1.0}], [])
    with pytest.raises(KeyError, match="unknown query"):
        reference_join(j, "nope", [], [])


def _window_job() -> Job:
    """A ⋈ B within ±2 s, selecting both ids; both streams with a 10 s watermark delay."""
    a = stream("A", *ID_TS, watermark=("ts", 10))
    b = stream("B", *ID_TS, watermark=("ts", 10))
    window = "b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '2' SECOND"
    return job([a, b], query("q", "A a", "B b", window, ("a.id", "a"), ("b.id", "b")))


def test_time_window_join_over_batches() -> None:
    j = _window_job()
    batches = [
        {"A": [{"id": 1, "ts": t(10)}], "B": [{"id": 10, "ts": t(12)}]},
        {"A": [{"id": 2, "ts": t(20)}], "B": [{"id": 11, "ts": t(8)}, {"id": 12, "ts": t(19)}]},
    ]
    assert normalize(run_reference(j, batches).outputs["q"]) == [(1, 10), (1, 11), (2, 12)]


def test_a_result_arrives_in_the_batch_of_its_last_row() -> None:
    j = _window_job()
    batches = [
        {"A": [{"id": 1, "ts": t(10)}], "B": [{"id": 10, "ts": t(12)}]},
        {"B": [{"id": 11, "ts": t(8)}]},
        {"A": [{"id": 2, "ts": t(20)}], "B": [{"id": 12, "ts": t(19)}]},
    ]
    result = run_reference(j, batches)
    got = dict(zip(result.outputs["q"], result.arrivals["q"], strict=True))
    assert got == {(1, 10): 0, (1, 11): 1, (2, 12): 2}
    assert normalize(result.since("q", 1)) == [(1, 11), (2, 12)]
    assert result.since("q", 3) == []
    assert normalize(result.since("q", 0)) == normalize(result.outputs["q"])
    with pytest.raises(KeyError, match="unknown query"):
        result.since("nope", 0)


# ---------------------------------------------------------------------------------- normalize


def test_normalize_is_a_canonical_multiset_order() -> None:
    rows: list[tuple[object, ...]] = [
        (2, "b", 0.1 + 0.2),
        (None, "z", 1.0),
        (1, None, float("nan")),
        (2, "a", 3.0),
        (2, "a", 3.0),
    ]
    other: list[tuple[object, ...]] = [
        (2, "a", 3),
        (1, None, float("nan")),
        (None, "z", Decimal("1")),
        (2.0, "a", 3.0),
        (2, "b", 0.3),
    ]
    assert normalize(rows) == normalize(other)
    assert normalize(rows)[0] == (None, "z", 1.0)
    assert normalize(rows)[1][2] is math.nan
    assert normalize(rows) != normalize(rows[:-1])  # multiplicity matters


# ------------------------------------------------------------------------------ properties

KEYS = st.one_of(st.none(), st.integers(min_value=0, max_value=4))
LEFT_ROWS = st.lists(st.fixed_dictionaries({"k": KEYS, "v": st.integers(-5, 5)}), max_size=12)
RIGHT_ROWS = st.lists(st.fixed_dictionaries({"k": KEYS, "w": st.integers(-5, 5)}), max_size=12)

EQUI_JOB = job(
    [stream("A", ("k", "BIGINT"), ("v", "BIGINT")), stream("B", ("k", "BIGINT"), ("w", "BIGINT"))],
    query("q", "A a", "B b", "a.k = b.k", ("a.k", "k"), ("a.v", "v"), ("b.w", "w")),
)


@settings(max_examples=150, deadline=None)
@given(LEFT_ROWS, RIGHT_ROWS)
def test_equi_join_equals_a_hash_join(
    left: list[dict[str, int | None]], right: list[dict[str, int | None]]
) -> None:
    table: dict[int, list[Mapping[str, int | None]]] = defaultdict(list)
    for r in right:
        if r["k"] is not None:  # NULL never equals anything
            table[r["k"]].append(r)
    want = [
        (lr["k"], lr["v"], r["w"]) for lr in left if lr["k"] is not None for r in table[lr["k"]]
    ]
    assert normalize(reference_join(EQUI_JOB, "q", left, right)) == normalize(want)


BAND_JOB = job(
    [stream("A", ("x", "BIGINT")), stream("B", ("y", "DOUBLE"))],
    query("q", "A a", "B b", "abs(a.x - b.y) <= 3", ("a.x", "x"), ("b.y", "y")),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(-20, 20), max_size=15),
    # Quarters are exact in binary, so x - y and x ± 3 round the same way.
    st.lists(st.integers(-80, 80).map(lambda q: q / 4), max_size=15),
)
def test_band_join_equals_a_sorted_range_scan(xs: list[int], ys: list[float]) -> None:
    ordered = sorted(ys)
    want = [
        (x, y)
        for x in xs
        for y in ordered[bisect.bisect_left(ordered, x - 3) : bisect.bisect_right(ordered, x + 3)]
    ]
    got = reference_join(BAND_JOB, "q", [{"x": x} for x in xs], [{"y": y} for y in ys])
    assert normalize(got) == normalize(want)


@settings(max_examples=50, deadline=None)
@given(LEFT_ROWS, RIGHT_ROWS, st.integers(1, 4))
def test_batching_does_not_change_a_join_without_watermarks(
    left: list[dict[str, int | None]], right: list[dict[str, int | None]], parts: int
) -> None:
    batches = [
        {"A": left[i::parts], "B": right[i::parts]} for i in range(parts)
    ]  # any split of the input into batches
    got = run_reference(EQUI_JOB, batches).outputs["q"]
    assert normalize(got) == normalize(reference_join(EQUI_JOB, "q", left, right))


# ------------------------------------------------------------------------ multi-way joins

_THREE = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), max_size=7)


@given(a=_THREE, b=_THREE, c=_THREE, bound=st.integers(0, 3))
@settings(max_examples=60, deadline=None)
def test_three_way_join_is_every_combination_whose_whole_predicate_holds(
    a: list[tuple[int, int]], b: list[tuple[int, int]], c: list[tuple[int, int]], bound: int
) -> None:
    """The conjunct-at-a-time shortcut gives exactly the combinations whose whole predicate is
    TRUE (checked here by a plain triple loop), NULLs included."""
    from streamjoin.reference.evaluate import compile_expression

    cols: tuple[tuple[str, TypeName], ...] = (("k", "BIGINT"), ("x", "BIGINT"))
    streams = [stream("A", *cols), stream("B", *cols)]
    predicate = f"a.k = b.k AND abs(b.x - c.x) <= {bound} AND (c.k <> a.x OR a.k IS NULL)"
    q = Query(
        "q",
        "out",
        JoinSide("A", "a"),
        JoinSide("B", "b"),
        predicate,
        (SelectItem("a.x", "ax"), SelectItem("b.x", "bx"), SelectItem("c.x", "cx")),
        further=(JoinSide("A", "c"),),
    )

    def rows(pairs: list[tuple[int, int]]) -> list[dict[str, object]]:
        # Key 0 stands for NULL, so that three-valued logic is exercised.
        return [{"k": k or None, "x": x} for k, x in pairs]

    got = run_reference(job(streams, q), [{"A": rows(a + c), "B": rows(b)}]).outputs["q"]
    whole = compile_expression(predicate)
    stream_a = rows(a + c)
    want = [
        (ra["x"], rb["x"], rc["x"])
        for ra in stream_a
        for rb in rows(b)
        for rc in stream_a
        if whole({"a": ra, "b": rb, "c": rc}) is True
    ]
    assert normalize(got) == normalize(want)


@given(a=_THREE, b=_THREE, cut=st.integers(0, 3), parts=st.integers(1, 3))
@settings(max_examples=40, deadline=None)
def test_results_since_a_batch_are_all_results_but_those_of_the_batches_before(
    a: list[tuple[int, int]], b: list[tuple[int, int]], cut: int, parts: int
) -> None:
    """Without watermarks every row is on time, so the results arriving from batch `cut` on are
    the whole input's results minus those of the input before `cut` (as multisets)."""
    cols: tuple[tuple[str, TypeName], ...] = (("k", "BIGINT"), ("x", "BIGINT"))
    q = Query(
        "q",
        "out",
        JoinSide("A", "a"),
        JoinSide("B", "b"),
        "a.k = b.k AND c.x >= b.x",
        (SelectItem("a.x", "ax"), SelectItem("b.x", "bx"), SelectItem("c.x", "cx")),
        further=(JoinSide("A", "c"),),
    )
    j = job([stream("A", *cols), stream("B", *cols)], q)

    def rows(pairs: list[tuple[int, int]]) -> list[dict[str, object]]:
        return [{"k": k, "x": x} for k, x in pairs]

    batches = [{"A": rows(a[i::parts]), "B": rows(b[i::parts])} for i in range(parts)]
    everything = run_reference(j, batches)
    before = Counter(normalize(run_reference(j, batches[:cut]).outputs["q"]))
    want = Counter(normalize(everything.outputs["q"])) - before
    assert Counter(normalize(everything.since("q", cut))) == want
