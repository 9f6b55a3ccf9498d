"""Where a GROUP BY query new to a run starts answering (`runtime.batch.groups`)."""

from __future__ import annotations

from streamjoin.plan import plan_job
from streamjoin.runtime.batch.groups import _first_open
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
