"""AJoin's grouping of two-way queries (`optimizer.sharing`) and the shared join it plans
(`plan.shared`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamjoin.optimizer.sharing import (
    FIXED,
    MAX_BITS,
    Candidate,
    cost,
    group_all,
    place,
    remove,
)
from streamjoin.plan import plan_job
from streamjoin.plan.querybits import SIDE_FILTER_TERMS, mask, query_bits, side_filter
from streamjoin.plan.shared import candidate
from streamjoin.sql import parse_job

KEY = ("A", "B", ("sjl.k = sjr.k",))


def _c(name: str, span: float | None = 4.0, left: str = "", key: object = KEY) -> Candidate:
    sides = (frozenset([left] if left else []), frozenset[str]())
    return Candidate(name, key, span, sides, ("A", "B"))


def test_alike_queries_share_and_a_narrow_one_stays_apart_from_a_wide_one() -> None:
    alike = [_c("q1"), _c("q2", 6.0), _c("q3", 2.0, "sjl.x > 5")]
    assert [sorted(g) for g in group_all(alike)] == [["q1", "q2", "q3"]]
    # An hour of rows selected one way next to a second selected another way: the shared join
    # would index an hour of both selections; apart, each indexes its own.
    assert group_all([_c("n", 1.0, "sjl.x > 5"), _c("w", 3600.0, "sjl.x < 1")]) == []
    assert cost([_c("w", 3600.0)], {}) > FIXED


def test_only_queries_of_one_key_and_kind_of_window_share() -> None:
    other = ("A", "B", ("sjl.s = sjr.s",))
    pool = [_c("q1"), _c("q2", key=other), _c("q3", None), _c("q4", None), _c("q5")]
    assert sorted(group_all(pool)) == [["q1", "q5"], ["q3", "q4"]]


def test_a_group_holds_at_most_64_queries() -> None:
    groups = group_all([_c(f"q{i}") for i in range(100)])
    assert sorted(map(len, groups)) == [36, MAX_BITS]


@given(st.lists(st.sampled_from([1.0, 2.0, 5.0, 600.0, None]), min_size=1, max_size=12))
def test_placing_one_by_one_keeps_every_query_once(spans: list[float | None]) -> None:
    pool = [_c(f"q{i}", s, "sjl.x > 5" if i % 3 else "") for i, s in enumerate(spans)]
    groups: list[list[str]] = []
    for i, c in enumerate(pool):
        groups = place(groups, c, pool[: i + 1])
    names = [n for g in groups for n in g]
    assert len(names) == len(set(names)) and all(2 <= len(g) <= MAX_BITS for g in groups)
    for c in pool:
        groups = remove(groups, c.name)
    assert groups == []


@given(st.lists(st.sampled_from([1.0, 2.0, 5.0, 600.0, None]), min_size=2, max_size=12))
def test_queries_added_together_are_each_placed_once(spans: list[float | None]) -> None:
    # (A served job's change of several queries: each is placed among all that will run, the
    # others added with it among them, so one may take another as its partner before its turn.)
    pool = [_c(f"q{i}", s, "sjl.x > 5" if i % 3 else "") for i, s in enumerate(spans)]
    groups: list[list[str]] = []
    for c in pool:
        groups = place(groups, c, pool)
    names = [n for g in groups for n in g]
    assert len(names) == len(set(names)) and all(2 <= len(g) <= MAX_BITS for g in groups)
    assert place([["q0", "q1"]], pool[1], pool) == [["q0", "q1"]]


def test_the_shared_join_of_a_job() -> None:
    w = "{1}.ts BETWEEN {0}.ts - INTERVAL '{2}' SECOND AND {0}.ts + INTERVAL '{2}' SECOND"
    ddl = (
        "CREATE STREAM {0} (id BIGINT, k BIGINT, x DOUBLE, s STRING, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'json', path = '/{0}');"
    )
    job = parse_job(
        "\n".join(
            [
                ddl.format("A"),
                ddl.format("B"),
                "CREATE SINK s1 WITH (format = 'json', path = '/1');",
                "CREATE SINK s2 WITH (format = 'json', path = '/2');",
                "INSERT INTO s1 SELECT a.id AS i FROM A a JOIN B b ON a.k = b.k "
                f"AND {w.format('a', 'b', 3)};",
                "INSERT INTO s2 SELECT y.id AS i, x.x + y.x AS t FROM A x JOIN B y ON y.k = x.k "
                f"AND x.x > 5 AND x.x < y.x AND {w.format('x', 'y', 2)};",
            ]
        )
    )
    c1, c2 = (candidate(qp) for qp in plan_job(job, groups=()).queries)
    assert c1 is not None and c2 is not None
    assert (c1.span_s, c2.span_s) == (6.0, 4.0)
    assert (c2.left, c2.right) == (frozenset({"sjl.x > 5"}), frozenset())
    plan = plan_job(job)
    (group,) = plan.shared
    assert [(m.name, m.bit, m.columns) for m in group.members] == [
        ("q1", 0, (("_sjc0", "i"),)),
        ("q2", 1, (("_sjc1", "i"), ("_sjc2", "t"))),
    ]
    qp = group.plan
    assert qp.strategy == "hash" and qp.parts.window is not None
    assert (qp.parts.window.lo_us, qp.parts.window.hi_us) == (-3_000_000, 3_000_000)
    assert [k.describe() for k in qp.parts.equi] == ["sjl.k = sjr.k"]
    # q1 takes every left row, so the join filters no side; the bits test each member's own
    # conditions over the join's columns, each distinct condition once.
    assert "sjl.x > 5" not in qp.query.predicate
    assert [s.alias for s in qp.query.select][-2:] == ["_sjc5", "_sjc6"]
    assert "CASE WHEN _sjc3 > 5 THEN 0L ELSE 2L END" in group.bits
    # q1's window is the shared join's: no member tests it again; q2's, narrower, it tests.
    assert group.members[0].predicate is None
    assert group.members[1].predicate == (
        "(_sjc3 < _sjc4) AND (_sjc3 > 5) "
        "AND (_sjc5 BETWEEN _sjc6 - INTERVAL '2' SECOND AND _sjc6 + INTERVAL '2' SECOND)"
    )
    assert [j.query.name for j in plan.joins] == [group.name]


def test_a_side_is_filtered_in_the_join_only_by_a_short_condition() -> None:
    one = [frozenset({c}) for c in ("sjl.x > 7", "sjl.x > 5", "sjl.x > 6.5")]
    numeric = {"sjl.x", "sjr.x"}
    assert side_filter(one, numeric) == "sjl.x > 5"
    below = [frozenset({"sjr.x <= 2"}), frozenset({"sjr.x <= 4"})]
    assert side_filter(below, numeric) == "sjr.x <= 4"
    # Not a numeric column: Spark casts it to each literal's type, in whatever order; the
    # filter keeps every member's selection. (Bounds compare exactly, not as doubles.)
    assert side_filter(one) == "(sjl.x > 5) OR (sjl.x > 6.5) OR (sjl.x > 7)"
    huge = [frozenset({"sjl.x > 9007199254740993"}), frozenset({"sjl.x > 9007199254740992"})]
    assert side_filter(huge, numeric) == "sjl.x > 9007199254740992"
    mixed = [frozenset({"sjl.x > 5", "sjl.s = 'p'"}), frozenset({"sjl.y > 7"})]
    assert side_filter(mixed, numeric) == "(sjl.s = 'p' AND sjl.x > 5) OR (sjl.y > 7)"
    # A member that takes every row, or selections too many to repeat in the join: no filter.
    assert side_filter([frozenset({"sjl.x > 5"}), frozenset()], numeric) is None
    many = [frozenset({f"sjl.y = {i}"}) for i in range(SIDE_FILTER_TERMS + 1)]
    assert side_filter(many) is None
    assert side_filter(many[:SIDE_FILTER_TERMS]) is not None


def test_the_bits_test_each_distinct_condition_once() -> None:
    bits = query_bits([["_sjc0 > 5"], [], ["_sjc0 > 5", "_sjc1 < 2"]])
    assert bits == (
        "7L & ~(CASE WHEN _sjc0 > 5 THEN 0L ELSE 5L END | CASE WHEN _sjc1 < 2 THEN 0L ELSE 4L END)"
    )
    assert query_bits([[], []]) == "3L"
    # Bit 63 is BIGINT's sign bit.
    assert mask(1 << 63) == "shiftleft(1L, 63)"
    assert mask((1 << 64) - 1) == "(-1L)" and mask((1 << 63) | 1) == f"({1 - (1 << 63)}L)"


def test_a_multiway_member_tests_only_the_windows_the_shared_ones_do_not_imply() -> None:
    from streamjoin.plan.shared_multiway import shared_core

    ddl = (
        "CREATE STREAM {0} (k BIGINT, x DOUBLE, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'json', path = '/{0}');"
    )
    w = "{1}.ts BETWEEN {0}.ts - INTERVAL '{2}' SECOND AND {0}.ts + INTERVAL '{2}' SECOND"
    insert = (
        "INSERT INTO s{n} SELECT a.k AS k FROM A a JOIN B b ON a.k = b.k AND {ab} "
        "JOIN C c ON c.k = b.k AND {bc} WHERE a.x > {n};"
    )
    job = parse_job(
        "\n".join(
            [
                *(ddl.format(s) for s in "ABC"),
                "CREATE SINK s1 WITH (format = 'json', path = '/1');",
                "CREATE SINK s2 WITH (format = 'json', path = '/2');",
                insert.format(n=1, ab=w.format("a", "b", 10), bc=w.format("b", "c", 10)),
                insert.format(n=2, ab=w.format("a", "b", 10), bc=w.format("b", "c", 4)),
            ]
        )
    )
    core, members, _ = shared_core(job, job.queries)
    assert "INTERVAL '-10000000' MICROSECOND" in core.predicate
    wide, narrow = (m.predicate or "" for m in members)
    # Both members' a-b windows, and q1's b-c one, are the shared join's: tested once, there.
    assert "BETWEEN" not in wide and "> 1" in wide
    assert narrow.count("BETWEEN") == 1 and "INTERVAL '4' SECOND" in narrow
