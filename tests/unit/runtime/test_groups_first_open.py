"""Where a GROUP BY query new to a run starts answering (`runtime.batch.groups`)."""

from __future__ import annotations

import pytest

from streamjoin.errors import StreamJoinError
from streamjoin.plan import plan_job
from streamjoin.runtime.batch.groups import _first_open
from streamjoin.runtime.serve.queries import _closed_by_column
from streamjoin.runtime.state.manifest import Manifest
from streamjoin.sql import parse_job
from tests.reference_cases import JOIN, STREAMS


def test_a_new_query_skips_the_windows_its_missed_results_may_fall_into() -> None:
    query = f"INSERT INTO s SELECT count(*) AS n {JOIN}GROUP BY window(b.ts, '10 seconds');"
    plan = plan_job(parse_job(STREAMS + query))
    (ap,) = plan.aggregates
    assert _first_open(plan, ap, Manifest()) is None  # (the run's first batch: nothing missed)
    # B had seen event times up to 42 s (its watermark 41 s, delay 1 s): results before the
    # query have b.ts <= 42 s, so windows starting after it, ending after 52 s, are whole.
    seen = Manifest(batch=3, stream_wm={"A": 50_000_000, "B": 41_000_000}, global_wm=41_000_000)
    assert _first_open(plan, ap, seen) == 52_000_000


def test_groups_per_row_closed_by_a_column_cannot_start_in_a_run_that_read_rows() -> None:
    """A row read before the query has its groups anywhere in the closing column, so no
    window bound says which groups are whole: the query starts with a run, or is refused
    (at a restart with a changed query here, and when a served job is asked to add it)."""
    from tests.unit.sql.test_sql_rowgroups import Q4
    from tests.unit.sql.test_sql_rowgroups import STREAMS as KEYED

    job = parse_job(KEYED + Q4.format(more=""))
    plan = plan_job(job)
    (ap,) = plan.aggregates
    assert _first_open(plan, ap, Manifest()) is None
    seen = Manifest(batch=3, stream_wm={"auction": 9_000_000}, global_wm=9_000_000)
    with pytest.raises(StreamJoinError, match=r"passes A.expires, cannot start in a run"):
        _first_open(plan, ap, seen)
    assert _closed_by_column(job, job.queries[0]) == "A.expires"
    grouped = parse_job(STREAMS + f"INSERT INTO s SELECT count(*) AS n {JOIN}GROUP BY b.ts;")
    assert _closed_by_column(grouped, grouped.queries[0]) is None


def test_a_streams_rows_joined_with_groups_start_once_no_row_they_pair_with_was_missed() -> None:
    """B's rows pair with A's 10 s windows ending up to 20 s after them: rows B read before the
    query (up to 62 s) were not kept for it, so its first whole window ends after 82 s."""
    query = (
        "INSERT INTO s SELECT b.id AS id FROM B b JOIN (SELECT max(x) AS hx, window_end AS w "
        "FROM TABLE(TUMBLE(TABLE A, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
        "GROUP BY window_start, window_end) g ON b.x = g.hx "
        "WHERE b.ts BETWEEN g.w - INTERVAL '20' SECOND AND g.w;"
    )
    plan = plan_job(parse_job(STREAMS + query))
    (gp,) = plan.group_queries
    (ap,) = gp.inputs
    assert _first_open(plan, ap, Manifest()) is None
    # (A alone: windows starting after its newest event time, 51 s.)
    seen = Manifest(batch=3, stream_wm={"A": 50_000_000}, global_wm=50_000_000)
    assert _first_open(plan, ap, seen) == 61_000_000
    seen = Manifest(batch=3, stream_wm={"A": 50_000_000, "B": 61_000_000}, global_wm=50_000_000)
    assert _first_open(plan, ap, seen) == 82_000_000
