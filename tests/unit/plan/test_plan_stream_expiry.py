"""A stream's state let go by a column (`retention.stream_expiry`, `StreamPlan.dead`): rows
that event times keep for good (Nexmark's auctions, ``b.ts BETWEEN a.ts AND a.expires``) leave
once the watermark passes their column, where every query that needs them says so."""

from __future__ import annotations

from streamjoin.plan import plan_job
from streamjoin.plan.retention import ColumnExpiry
from streamjoin.sql import parse_job

SECOND = 1_000_000
STREAMS = """
CREATE STREAM A (id BIGINT, k BIGINT, ts TIMESTAMP, e TIMESTAMP, f TIMESTAMP,
                 WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (format = 'json', path = '/a');
CREATE STREAM B (id BIGINT, k BIGINT, ts TIMESTAMP,
                 WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (format = 'json', path = '/b');
CREATE SINK s WITH (format = 'json', path = '/s');
CREATE SINK t WITH (format = 'json', path = '/t');
"""
BY_END = (
    "INSERT INTO s SELECT a.id AS i FROM A a JOIN B b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.e"
)


def _expiry(*inserts: str) -> ColumnExpiry | None:
    return plan_job(parse_job(STREAMS + ";\n".join(inserts) + ";")).stream("A").expiry


def test_a_side_bounded_by_its_column_leaves_by_it() -> None:
    assert _expiry(BY_END) == ColumnExpiry("e", 0, None)
    # (The loosest offset over the queries; an event-time bound of another query as well.)
    later = BY_END.replace("AND a.e", "AND a.e + INTERVAL '3' SECOND").replace(" s ", " t ")
    assert _expiry(BY_END, later) == ColumnExpiry("e", 3 * SECOND, None)
    timed = (
        "INSERT INTO t SELECT a.id AS i FROM A a JOIN B b ON a.k = b.k "
        "AND b.ts BETWEEN a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL '5' SECOND"
    )
    assert _expiry(BY_END, timed) == ColumnExpiry("e", 0, 5 * SECOND)


def test_rows_a_query_keeps_for_good_are_kept() -> None:
    history = "INSERT INTO t SELECT a.id AS i FROM A a JOIN B b ON a.k = b.k"
    assert _expiry(BY_END, history) is None
    other = BY_END.replace("a.e", "a.f").replace(" s ", " t ")
    assert _expiry(BY_END, other) is None  # (two columns: no one bound)
    outer = BY_END.replace("JOIN", "LEFT JOIN").replace(" s ", " t ") + " WITH (ttl = '1 hour')"
    # (An outer join's rows wait for a partner by event time, its ttl.)
    assert _expiry(BY_END, outer) == ColumnExpiry("e", 0, 3600 * SECOND)


def test_a_unit_is_dead_once_the_watermark_passes_its_greatest_column() -> None:
    sp = plan_job(parse_job(STREAMS + BY_END + ";")).stream("A")
    assert sp.retain_us is None
    at = 10 * SECOND
    assert not sp.dead(5 * SECOND, ("e", at), at)  # (a row still meets ts = 10 s)
    assert sp.dead(5 * SECOND, ("e", at), at + 1)
    assert sp.dead(5 * SECOND, ("e", -(2**63)), 0)  # (every end NULL: no pair)
    assert not sp.dead(5 * SECOND, ("e", None), 100 * SECOND)  # (not measured: kept)
    assert not sp.dead(5 * SECOND, (None, None), 100 * SECOND)
    assert not sp.dead(5 * SECOND, ("e", at), None)
    # (Measured for another column, under an earlier job: kept.)
    assert not sp.dead(5 * SECOND, ("f", at), 100 * SECOND)
    timed = BY_END.replace("b.ts BETWEEN a.ts AND a.e", "b.ts BETWEEN a.ts AND a.e AND a.id > 0")
    mixed = (
        "INSERT INTO t SELECT a.id AS i FROM A a JOIN B b ON a.k = b.k AND b.ts BETWEEN "
        "a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL '5' SECOND"
    )
    sp = plan_job(parse_job(STREAMS + timed + ";\n" + mixed + ";")).stream("A")
    assert sp.dead(5 * SECOND, ("e", 8 * SECOND), at + 1)
    assert not sp.dead(6 * SECOND, ("e", 8 * SECOND), at + 1)  # (the other query: ts >= W - 5 s)


def test_rows_let_go_by_the_column_a_query_is_bounded_by_are_no_gap_at_a_restart() -> None:
    """A restart warns of rows its queries need that the state dropped (`history_gaps`); a
    query bounded by the column the rows left by, with no larger offset, needs none of them."""
    from streamjoin.runtime.restart import history_gaps
    from streamjoin.runtime.state.manifest import Manifest
    from streamjoin.runtime.state.nextmanifest import _column_cut

    plan = plan_job(parse_job(STREAMS + BY_END + ";"))
    sp = plan.stream("A")
    cuts = _column_cut({}, sp, dropped_before=False)
    assert cuts == {"A": ["e", 0]}
    last = Manifest(batch=5, global_wm=100 * SECOND, expired={"A": 20 * SECOND}, column_cuts=cuts)
    assert history_gaps(plan, last) == []
    # (Dropped by event time before, or by another column: the gap is told.)
    assert _column_cut({}, sp, dropped_before=True) == {}
    for other in ({}, {"A": ["f", 0]}, {"A": ["", 0]}):
        gaps = history_gaps(
            plan, Manifest(batch=5, global_wm=100 * SECOND, expired={"A": 1}, column_cuts=other)
        )
        assert len(gaps) == 1 and "query q1 joins A's rows all of its history" in gaps[0]
    later = plan_job(
        parse_job(STREAMS + BY_END.replace("AND a.e", "AND a.e + INTERVAL '1' SECOND") + ";")
    )
    # (A larger offset needs rows dropped under the smaller.)
    assert len(history_gaps(later, last)) == 1
    assert _column_cut({"A": ["e", 3]}, sp, dropped_before=True) == {"A": ["e", 0]}


def test_a_stream_that_leaves_by_a_column_is_not_copied_behind() -> None:
    """Its units are dropped, as a stream's bounded by event time are: they stay its files."""
    from streamjoin.runtime.state.copybehind import unbounded_streams

    history = "INSERT INTO t SELECT a.id AS i FROM A a JOIN B b ON a.k = b.k"
    assert [sp.name for sp in unbounded_streams(plan_job(parse_job(STREAMS + BY_END + ";")))] == []
    kept = plan_job(parse_job(STREAMS + BY_END + ";\n" + history + ";"))
    assert [sp.name for sp in unbounded_streams(kept)] == ["A", "B"]
